#include "support/sha256.h"

#include <openssl/evp.h>

#include "support/digest.h"
#include "support/error.h"

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
  return lowerHex(digest, len);
}

std::string sha256Bytes(const void* data, size_t n) {
  Sha256 h;
  h.update(data, n);
  return h.hexDigest();
}

std::string sha256File(const std::string& path, const std::function<void(size_t)>& progress) {
  return digestFile(Digest::Sha256, path, progress);
}

}  // namespace pipecut
