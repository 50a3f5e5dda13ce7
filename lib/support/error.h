#pragma once
// One error type for the whole compiler. It carries the exit-code class and the
// context a user needs to find the problem: the file, and where inside it
// (a record, a JSON field path, a node, a module).
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace pipecut {

enum class ErrorKind {
  Usage = 1,         // bad command line
  InvalidInput = 2,  // the input file or spec is malformed or unsupported
  Internal = 3,      // a bug in pipecut, and nothing else
  RankFailed = 5,    // a multi-process run stopped: this rank or a peer failed (pipecut-run)
  Environment = 6,   // the machine refused: disk full, read-only, permission, busy, I/O error
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

// Which class an operating system's refusal `err` (an errno) belongs to. A
// path that does not lead anywhere (no such file, not a directory, a loop of
// links, a name too long) is the user's input; everything else the machine
// says (no space, read-only, permission, busy, an I/O error, no descriptors)
// is the environment's. Never Internal: the OS refusing is not a bug of ours.
inline ErrorKind osErrorKind(int err) {
  switch (err) {
    case ENOENT: case ENOTDIR: case EISDIR: case ELOOP: case ENAMETOOLONG: case EEXIST: case ENOTEMPTY:
      return ErrorKind::InvalidInput;
    default:
      return ErrorKind::Environment;
  }
}

// "cannot <doing>: <the OS's text>", classed by osErrorKind, naming `path`.
[[noreturn]] inline void throwOsError(const std::string& path, const std::string& doing, int err) {
  throw Error(osErrorKind(err), path, "", "cannot " + doing + ": " + std::strerror(err));
}

// The first line of a message: LibTorch's errors go on with a backtrace.
inline std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

[[noreturn]] inline void invalidInput(const std::string& where, const std::string& message) {
  throw Error(ErrorKind::InvalidInput, "", where, message);
}
[[noreturn]] inline void internalError(const std::string& where, const std::string& message) {
  throw Error(ErrorKind::Internal, "", where, message);
}

}  // namespace pipecut
