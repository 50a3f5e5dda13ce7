#include "support/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "support/error.h"

namespace pipecut::support {

namespace {

std::string describeMode(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string notARegularFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::string("cannot be read: ") + std::strerror(errno);
  return describeMode(st.st_mode);
}

void requireRegularFile(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throwOsError(path, "read " + what, errno);
  const std::string kind = describeMode(st.st_mode);
  if (!kind.empty()) throw Error(ErrorKind::InvalidInput, path, "", "is " + kind + ", expected " + what);
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, const std::string& what) {
  // O_NONBLOCK: opening a FIFO for reading blocks until a writer opens it;
  // fstat below then refuses it, and a regular file ignores the flag.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throwOsError(path, "open " + what, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throwOsError(path, "read " + what, err);
  }
  const std::string kind = describeMode(st.st_mode);
  if (!kind.empty()) {
    ::close(fd);
    throw Error(ErrorKind::InvalidInput, path, "", "is " + kind + ", expected " + what);
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    // Private and writable: a write (a program updating a buffer it was
    // bound, in place) copies the page it touches for this process alone;
    // the file is never written, and pages nothing writes stay the page cache's.
    void* m = ::mmap(nullptr, static_cast<size_t>(f->size_), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    int err = errno;
    if (m == MAP_FAILED) {
      ::close(fd);
      throwOsError(path, "map " + what, err);
    }
    f->data_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
}

}  // namespace pipecut::support
