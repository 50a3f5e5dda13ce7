#include "runtime/stage_failure.h"

#include <cctype>
#include <vector>

namespace pipecut::runtime {

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool identifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A printable excerpt: the text is LibTorch's, but bounded and without
// control characters, since it reaches the terminal.
std::string clean(const std::string& s, size_t limit = 300) {
  std::string out;
  for (char c : s) {
    if (out.size() >= limit) {
      out += "...";
      break;
    }
    out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c;
  }
  return out;
}

// "RuntimeError: index out of range in self" -> "index out of range in self".
std::string withoutExceptionType(const std::string& s) {
  size_t colon = s.find(": ");
  if (colon == std::string::npos || colon == 0) return s;
  for (size_t i = 0; i < colon; ++i)
    if (!identifierChar(s[i]) && s[i] != '.') return s;
  if (s.compare(colon - 5, 5, "Error") != 0 && s.compare(colon - 9, 9, "Exception") != 0) return s;
  return s.substr(colon + 2);
}

void parseTorchScript(const std::vector<std::string>& ls, StageFailure& f) {
  // The last marked line is the innermost frame: the operator itself.
  for (size_t i = ls.size(); i-- > 1;) {
    const std::string& mark = ls[i];
    size_t here = mark.find("<--- HERE");
    if (here == std::string::npos) continue;
    size_t from = mark.find('~');
    if (from == std::string::npos || from > here) continue;
    size_t to = mark.find_first_not_of('~', from);
    const std::string& code = ls[i - 1];
    if (from < code.size()) f.expression = trim(code.substr(from, std::min(to, code.size()) - from));
    // The call is the whole right side of "name = call(...)": name is the node.
    size_t eq = code.find(" = ");
    if (eq != std::string::npos && code.find_first_not_of(' ', eq + 3) == from) {
      std::string lhs = trim(code.substr(0, eq));
      bool ident = !lhs.empty();
      for (char c : lhs) ident &= identifierChar(c);
      if (ident) f.node = lhs;
    }
    break;
  }
  // The cause: the last line that is not the traceback's furniture.
  for (size_t i = ls.size(); i-- > 0;) {
    std::string t = trim(ls[i]);
    if (t.empty() || t.rfind("Traceback of TorchScript", 0) == 0) continue;
    f.cause = withoutExceptionType(t);
    break;
  }
}

void parseNativeRT(const std::vector<std::string>& ls, size_t at, StageFailure& f) {
  const std::string& line = ls[at];
  size_t pct = line.find('%', line.find("Exception while executing node"));
  if (pct != std::string::npos) {
    size_t end = pct + 1;
    while (end < line.size() && identifierChar(line[end])) ++end;
    f.node = line.substr(pct + 1, end - pct - 1);
    size_t eq = line.find(" = ", end);
    if (eq != std::string::npos) {
      std::string call = trim(line.substr(eq + 3));
      f.expression = call.substr(0, call.find('('));
    }
  }
  for (size_t i = at + 1; i < ls.size(); ++i) {
    std::string t = trim(ls[i]);
    if (t.empty() || t.rfind("Exception raised from", 0) == 0 || t.rfind("frame #", 0) == 0) continue;
    f.cause = withoutExceptionType(t);
    break;
  }
}

}  // namespace

StageFailure parseStageFailure(const std::string& text) {
  StageFailure f;
  const std::vector<std::string> ls = lines(text);
  bool nativert = false;
  for (size_t i = 0; i < ls.size(); ++i)
    if (ls[i].find("Exception while executing node") != std::string::npos) {
      parseNativeRT(ls, i, f);
      nativert = true;
      break;
    }
  if (!nativert && text.find("failed in the TorchScript interpreter") != std::string::npos) parseTorchScript(ls, f);
  if (f.cause.empty()) f.cause = trim(ls.empty() ? "" : ls[0]);
  if (f.cause.empty()) f.cause = "failed (no message)";
  f.node = clean(f.node, 120);
  f.expression = clean(f.expression);
  f.cause = clean(f.cause, 500);
  return f;
}

std::string describeFailingNode(const StageFailure& f) {
  if (f.node.empty() && f.expression.empty()) return "";
  if (f.node.empty()) return "at " + f.expression;
  return "node '" + f.node + "'" + (f.expression.empty() ? "" : " (" + f.expression + ")");
}

}  // namespace pipecut::runtime
