#include "pt2/pickle_check.h"

#include <cstdint>
#include <cstdio>

#include "support/little_endian.h"

namespace pipecut::pt2 {

namespace {

// How an opcode's argument is laid out (pickle protocols 0 to 5).
enum class Arg { None, Fixed, Counted, Line, TwoLines };

struct Opcode {
  Arg arg = Arg::None;
  int bytes = 0;     // Fixed: argument bytes; Counted: bytes of the length prefix
  bool memo = false; // its argument is a memo index (PUT, GET and their binary forms)
  bool known = false;
};

struct Table {
  Opcode op[256];
  Table() {
    auto set = [&](unsigned char c, Arg a, int bytes = 0, bool memo = false) { op[c] = Opcode{a, bytes, memo, true}; };
    for (unsigned char c : std::string_view("(.012N}Ra]b)deltuosQ\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98"))
      set(c, Arg::None);
    set('J', Arg::Fixed, 4);
    set('K', Arg::Fixed, 1);
    set('M', Arg::Fixed, 2);
    set('G', Arg::Fixed, 8);
    set('\x80', Arg::Fixed, 1);
    set('\x82', Arg::Fixed, 1);
    set('\x83', Arg::Fixed, 2);
    set('\x84', Arg::Fixed, 4);
    set('\x95', Arg::Fixed, 8);  // FRAME: its length is a hint, not a jump
    set('h', Arg::Fixed, 1, true);
    set('j', Arg::Fixed, 4, true);
    set('q', Arg::Fixed, 1, true);
    set('r', Arg::Fixed, 4, true);
    set('T', Arg::Counted, 4);
    set('U', Arg::Counted, 1);
    set('X', Arg::Counted, 4);
    set('\x8c', Arg::Counted, 1);
    set('\x8d', Arg::Counted, 8);
    set('B', Arg::Counted, 4);
    set('C', Arg::Counted, 1);
    set('\x8e', Arg::Counted, 8);
    set('\x8a', Arg::Counted, 1);
    set('\x8b', Arg::Counted, 4);
    set('\x96', Arg::Counted, 8);
    for (unsigned char c : std::string_view("ILSVFP")) set(c, Arg::Line);
    set('g', Arg::Line, 0, true);
    set('p', Arg::Line, 0, true);
    set('c', Arg::TwoLines);
    set('i', Arg::TwoLines);
  }
};

std::string hex(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", c);
  return buf;
}

}  // namespace

std::optional<std::string> pickleProblem(std::string_view p) {
  static const Table table;
  uint64_t opcodes = 0;
  size_t at = 0;
  while (at < p.size()) {
    const size_t start = at;
    const unsigned char c = static_cast<unsigned char>(p[at++]);
    const Opcode& op = table.op[c];
    const std::string where = " at byte " + std::to_string(start);
    if (!op.known) return "opcode " + hex(c) + where + " is unknown";
    uint64_t memoIndex = 0;
    switch (op.arg) {
      case Arg::None:
        break;
      case Arg::Fixed:
        if (p.size() - at < static_cast<size_t>(op.bytes)) return "opcode " + hex(c) + where + " is cut short";
        memoIndex = support::littleEndian(p.data() + at, op.bytes);
        at += static_cast<size_t>(op.bytes);
        break;
      case Arg::Counted: {
        if (p.size() - at < static_cast<size_t>(op.bytes)) return "opcode " + hex(c) + where + " is cut short";
        uint64_t n = support::littleEndian(p.data() + at, op.bytes);
        at += static_cast<size_t>(op.bytes);
        if (n > p.size() - at)
          return "opcode " + hex(c) + where + " claims " + std::to_string(n) + " bytes, " +
                 std::to_string(p.size() - at) + " remain";
        at += static_cast<size_t>(n);
        break;
      }
      case Arg::Line:
      case Arg::TwoLines:
        for (int line = 0; line < (op.arg == Arg::Line ? 1 : 2); ++line) {
          size_t nl = p.find('\n', at);
          if (nl == std::string_view::npos) return "opcode " + hex(c) + where + " has no line end";
          if (op.memo) {
            std::string_view digits = p.substr(at, nl - at);
            if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string_view::npos)
              return "opcode " + hex(c) + where + " has a malformed memo index";
            memoIndex = std::stoull(std::string(digits));
          }
          at = nl + 1;
        }
        break;
    }
    if (op.memo && memoIndex > opcodes)
      return "memo index " + std::to_string(memoIndex) + where + " exceeds the " + std::to_string(opcodes) +
             " opcodes before it";
    ++opcodes;
    if (c == '.') return std::nullopt;  // STOP
  }
  return "no STOP opcode (truncated pickle)";
}

}  // namespace pipecut::pt2
