#include "support/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "support/error.h"

namespace pipecut::support {

std::string readFile(const std::string& path, const std::string& what) {
  auto fail = [&](const char* verb, int err) -> void {
    throwOsError(path, std::string(verb) + (what.empty() ? "" : " " + what), err);
  };
  // Opened without blocking: a FIFO nobody writes to would hold a plain
  // open forever. Reads block again, so a pipe with a writer (a shell's
  // <(...)) is read whole, and one without reads as empty.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("open", errno);
  if (int flags = ::fcntl(fd, F_GETFL); flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int err = errno;
    ::close(fd);
    fail("open", err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    int err = S_ISDIR(st.st_mode) ? EISDIR : errno;
    ::close(fd);
    fail("read", err);
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      fail("read", err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

namespace {
constexpr size_t kBuffer = 1u << 20;
// Large records are hashed and written in pieces this size: each stays in
// the core's L2 cache between the two (see write()).
constexpr size_t kPiece = 256u << 10;
}  // namespace

HashingWriter::HashingWriter(std::string path, bool sha256) : path_(std::move(path)), sha256_(sha256) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) throwOsError(path_, "create", errno);
  buffer_.reserve(kBuffer);
}

HashingWriter::~HashingWriter() {
  if (fd_ >= 0) ::close(fd_);
}

size_t HashingWriter::write(const void* data, size_t n) {
  bytes_ += n;
  if (n < kBuffer) {
    if (sha256_) hash_.update(data, n);
    fast_.update(data, n);
    if (buffer_.size() + n > kBuffer) flushBuffer();
    buffer_.append(static_cast<const char*>(data), n);
    return n;
  }
  // A large record (a weight of hundreds of MB): hashed and written a piece
  // at a time, so that write() copies bytes the hash just brought into the
  // cache instead of reading the record from memory a second time.
  flushBuffer();
  const char* p = static_cast<const char*>(data);
  for (size_t done = 0; done < n;) {
    size_t k = std::min(kPiece, n - done);
    if (sha256_) hash_.update(p + done, k);
    fast_.update(p + done, k);
    writeAll(p + done, k);
    done += k;
  }
  return n;
}

void HashingWriter::flushBuffer() {
  writeAll(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void HashingWriter::writeAll(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::write(fd_, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) throwOsError(path_, "write", errno);
    p += k;
    n -= static_cast<size_t>(k);
    written_ += static_cast<uint64_t>(k);
    startWriteback();
  }
}

// Stage files of a large model are gigabytes of dirty pages. Left to the
// kernel, they reach the disk only once the split is done (a `sync`, or the
// writeback timer), so the disk idles while we hash and copy, and works alone
// after. Asking for each written range to go out now (asynchronously: this
// does not wait for the disk) overlaps the two. Best effort: a file system
// without it changes nothing.
void HashingWriter::startWriteback() {
  constexpr uint64_t kWritebackChunk = 32u << 20;
  if (written_ - writebackFrom_ < kWritebackChunk) return;
#if defined(__linux__)
  ::sync_file_range(fd_, static_cast<off64_t>(writebackFrom_), static_cast<off64_t>(written_ - writebackFrom_),
                    SYNC_FILE_RANGE_WRITE);
#endif
  writebackFrom_ = written_;
}

std::string HashingWriter::finish() {
  flushBuffer();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throwOsError(path_, "write", errno);
  xxh3_128_ = fast_.hexDigest();
  return sha256_ ? hash_.hexDigest() : std::string();
}

}  // namespace pipecut::support
