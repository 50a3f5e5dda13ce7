#pragma once
// One error type for the whole compiler. It carries the exit-code class and the
// context a user needs to find the problem: the file, and where inside it
// (a record, a JSON field path, a node, a module).
#include <stdexcept>
#include <string>

namespace pipecut {

enum class ErrorKind {
  Usage = 1,         // bad command line
  InvalidInput = 2,  // the input file or spec is malformed or unsupported
  Internal = 3,      // a bug or an environment failure (disk full, ...)
  RankFailed = 5,    // a multi-process run stopped: this rank or a peer failed (pipecut-run)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string file, std::string where, const std::string& message)
      : std::runtime_error(compose(file, where, message)),
        kind_(kind), file_(std::move(file)), where_(std::move(where)), message_(message) {}

  ErrorKind kind() const { return kind_; }
  int exitCode() const { return static_cast<int>(kind_); }
  const std::string& file() const { return file_; }
  const std::string& where() const { return where_; }
  const std::string& message() const { return message_; }

  // Re-raise with a file name attached, for errors raised below the layer that knows it.
  [[noreturn]] void rethrowWithFile(const std::string& file) const {
    throw Error(kind_, file_.empty() ? file : file_, where_, message_);
  }

 private:
  static std::string compose(const std::string& file, const std::string& where,
                             const std::string& message) {
    std::string s;
    if (!file.empty()) s += file + ": ";
    if (!where.empty()) s += where + ": ";
    return s + message;
  }
  ErrorKind kind_;
  std::string file_, where_, message_;
};

// The first line of a message: LibTorch's errors go on with a backtrace.
inline std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

[[noreturn]] inline void invalidInput(const std::string& where, const std::string& message) {
  throw Error(ErrorKind::InvalidInput, "", where, message);
}
[[noreturn]] inline void internalError(const std::string& where, const std::string& message) {
  throw Error(ErrorKind::Internal, "", where, message);
}

}  // namespace pipecut
