#include "support/private_dir.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "support/error.h"

namespace pipecut::support {

PrivateDir::PrivateDir(const std::string& stem, const std::string& what, const std::string& forPath) {
  const char* env = std::getenv("TMPDIR");
  const std::string base = env && *env ? env : "/tmp";
  std::string tmpl = base + "/" + stem + "-XXXXXX";
  if (!mkdtemp(tmpl.data()))
    throw Error(osErrorKind(errno), forPath, "",
                "cannot make a directory for " + what + " in " + base + ": " + std::strerror(errno) +
                    " (set TMPDIR to a directory with room)");
  dir_ = tmpl;
}

std::string PrivateDir::file(const std::string& name) {
  file_ = dir_ + "/" + name;
  return file_;
}

void PrivateDir::remove() {
  if (!file_.empty()) ::unlink(file_.c_str());
  if (!dir_.empty()) ::rmdir(dir_.c_str());
  file_.clear();
  dir_.clear();
}

}  // namespace pipecut::support
