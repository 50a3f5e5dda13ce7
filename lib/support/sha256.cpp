#include "support/sha256.h"

#include <fcntl.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>

#include "support/error.h"
#include "support/parallel.h"

namespace pipecut {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1)
    internalError("sha256", "OpenSSL cannot initialize SHA-256");
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(const void* data, size_t n) {
  if (n && EVP_DigestUpdate(impl_->ctx, data, n) != 1) internalError("sha256", "OpenSSL SHA-256 update failed");
}

std::string Sha256::hexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(impl_->ctx, digest, &len) != 1) internalError("sha256", "OpenSSL SHA-256 final failed");
  static const char* kHex = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

std::string sha256Bytes(const void* data, size_t n) {
  Sha256 h;
  h.update(data, n);
  return h.hexDigest();
}

std::string sha256File(const std::string& path, const std::function<void(size_t)>& progress) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::InvalidInput, path, "", std::string("cannot open: ") + std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  Sha256 h;
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

std::vector<std::string> sha256Files(const std::vector<std::string>& paths, unsigned threads,
                                     const std::function<void(size_t)>& progress) {
  std::vector<std::string> out(paths.size());
  support::parallelFor(paths.size(), threads, [&](size_t i) { out[i] = sha256File(paths[i], progress); });
  return out;
}

}  // namespace pipecut
