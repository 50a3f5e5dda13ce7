#include "support/digest.h"

#include <fcntl.h>
#include <unistd.h>

#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "support/error.h"
#include "support/sha256.h"

namespace pipecut {

const char* digestName(Digest d) { return d == Digest::Sha256 ? "sha256" : "xxh3_128"; }

struct Xxh3_128::Impl {
  XXH3_state_t* state = nullptr;
};

Xxh3_128::Xxh3_128() : impl_(std::make_unique<Impl>()) {
  impl_->state = XXH3_createState();
  if (!impl_->state || XXH3_128bits_reset(impl_->state) != XXH_OK)
    internalError("xxh3_128", "libxxhash cannot initialize XXH3-128");
}

Xxh3_128::~Xxh3_128() { XXH3_freeState(impl_->state); }

void Xxh3_128::update(const void* data, size_t n) {
  if (n && XXH3_128bits_update(impl_->state, data, n) != XXH_OK) internalError("xxh3_128", "XXH3-128 update failed");
}

std::string Xxh3_128::hexDigest() {
  // The canonical (big-endian) bytes: the digits xxhsum prints.
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(impl_->state));
  return lowerHex(canonical.digest, sizeof canonical.digest);
}

std::string lowerHex(const unsigned char* bytes, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return out;
}

std::string xxh3_128Bytes(const void* data, size_t n) {
  Xxh3_128 h;
  h.update(data, n);
  return h.hexDigest();
}

namespace {

template <class Hasher>
std::string hashFile(const std::string& path, const std::function<void(size_t)>& progress) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::InvalidInput, path, "", std::string("cannot open: ") + std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  Hasher h;
  // 4 MiB: large enough that syscalls cost nothing, small enough for L2/L3.
  constexpr size_t kChunk = 4u << 20;
  std::unique_ptr<char[]> buf(new char[kChunk]);
  while (true) {
    ssize_t n = ::read(fd, buf.get(), kChunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw Error(ErrorKind::InvalidInput, path, "", std::string("cannot read: ") + std::strerror(err));
    }
    if (n == 0) break;
    h.update(buf.get(), static_cast<size_t>(n));
    if (progress) progress(static_cast<size_t>(n));
  }
  ::close(fd);
  return h.hexDigest();
}

}  // namespace

std::string digestFile(Digest d, const std::string& path, const std::function<void(size_t)>& progress) {
  return d == Digest::Sha256 ? hashFile<Sha256>(path, progress) : hashFile<Xxh3_128>(path, progress);
}

}  // namespace pipecut
