#pragma once
// A directory only this process uses (0700, a fresh name) under $TMPDIR, else
// /tmp, for a file a library insists on opening by path (an AOTInductor
// package's library, a bound stage file for NativeRT). Its file is written,
// opened by the library, and unlinked at once: the directory and the file
// go when this does, on every path out.
#include <string>

namespace pipecut::support {

class PrivateDir {
 public:
  // Throws pipecut::Error naming `forPath` (what the file is made from):
  // osErrorKind of the OS's refusal, saying "cannot make a directory for
  // <what> in <base>" and that TMPDIR moves it.
  PrivateDir(const std::string& stem, const std::string& what, const std::string& forPath);
  ~PrivateDir() { remove(); }
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;

  const std::string& path() const { return dir_; }
  // `name` in the directory (the one file this removes with it).
  std::string file(const std::string& name);
  // Removes the file and the directory now; idempotent.
  void remove();

 private:
  std::string dir_, file_;
};

}  // namespace pipecut::support
