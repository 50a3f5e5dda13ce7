// What a stranger may write into the rendezvous store -> the decoders of
// runtime/control_messages.h. The first byte picks the message kind (and
// whether it is unsealed first under a fixed test secret), the rest is the
// message. A pipecut::Error of kind RankFailed is the expected refusal (the
// run ends, exit 5); anything else escaping is a finding, and a message that
// decodes must encode back to the same bytes (nothing is accepted loosely).
#include <cmath>
#include <utility>

#include "runtime/control_messages.h"
#include "targets.h"

namespace pipecut::fuzz {

namespace {

// The store's refusal is the end of the run (exit 5), not bad input.
template <class F>
bool refusedAsRankFailure(const char* step, F&& body) {
  return refusesOrRuns(step, std::forward<F>(body), ErrorKind::RankFailed);
}

}  // namespace

int control_messages(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int selector = data[0];
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const int world = 4;
  if (selector & 0x80) {
    // Sealed under a secret: most inputs fail to verify, which is the point.
    static const runtime::control::MacKey key = runtime::control::runKey("fuzz-secret-0123456789", {"n0", "n1"});
    if (!refusedAsRankFailure("unseal", [&] { bytes = runtime::control::unseal(key, "abort", bytes); })) return 0;
  }
  using namespace runtime::control;
  auto roundTrip = [&](const std::string& again, const char* what) {
    if (again != bytes) finding(std::string(what) + " decoded but does not encode back to the same bytes");
  };
  switch (selector % 6) {
    case 0: {
      Hello h;
      if (refusedAsRankFailure("decodeHello", [&] { h = decodeHello(bytes, 2); })) roundTrip(encodeHello(h), "hello");
      break;
    }
    case 1: {
      std::vector<std::string> d;
      if (refusedAsRankFailure("decodeIdentity", [&] { d = decodeIdentity(bytes); })) roundTrip(encodeIdentity(d), "identity");
      break;
    }
    case 2: {
      AbortNotice a;
      if (refusedAsRankFailure("decodeAbort", [&] { a = decodeAbort(bytes, world); })) {
        roundTrip(encodeAbort(a), "abort");
        std::string text = describe(a);
        for (char c : text)
          if (static_cast<unsigned char>(c) < 0x20) finding("describe() of an abort holds a control character");
      }
      break;
    }
    case 3: {
      uint64_t n = 0;
      if (refusedAsRankFailure("decodeCounter", [&] { n = decodeCounter(bytes); })) roundTrip(encodeCounter(n), "counter");
      break;
    }
    default: {
      std::vector<double> v;
      const bool strict = selector % 6 == 4;
      if (refusedAsRankFailure("decodeNumbers", [&] { v = decodeNumbers(bytes, 64, strict, "numbers"); })) {
        if (v.size() > 64) finding("more numbers than allowed");
        for (double x : v)
          if (strict && !(std::isfinite(x) && x >= 0)) finding("a value a strict decode must refuse");
        roundTrip(encodeNumbers(v), "numbers");
      }
    }
  }
  return 0;
}

}  // namespace pipecut::fuzz
