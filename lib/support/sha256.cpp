#include "support/sha256.h"

#include <algorithm>
#include <cctype>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

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

bool isSha256Hex(const std::string& s, bool lowercaseOnly) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [&](unsigned char c) {
           return std::isdigit(c) || (c >= 'a' && c <= 'f') || (!lowercaseOnly && c >= 'A' && c <= 'F');
         });
}

std::string hmacSha256(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), out, &len))
    internalError("hmac", "OpenSSL HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(out), len);
}

bool equalConstantTime(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string sha256File(const std::string& path, const std::function<void(size_t)>& progress) {
  return digestFile(Digest::Sha256, path, progress);
}

}  // namespace pipecut
