#pragma once
// SHA-256 through OpenSSL's libcrypto (EVP), which uses the CPU's SHA
// instructions where it has them (~1.5-2 GB/s per core against ~0.2 GB/s for
// a portable implementation): stage files of a 70B model are hashed at split,
// at verify and before every run. Lowercase hex digests.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace pipecut {

// Streaming: hash bytes as they are written.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  std::string hexDigest();  // once; the object is spent after

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256Bytes(const void* data, size_t n);
// 64 hex digits: lowercase only as pipecut writes them (`lowercaseOnly`), or
// either case as a user may type one (--expect-manifest).
bool isSha256Hex(const std::string& s, bool lowercaseOnly = false);
// HMAC-SHA256 (RFC 2104) of `data` under `key`: the 32 raw bytes.
std::string hmacSha256(const std::string& key, const std::string& data);
// Equal without an early exit (no timing to learn a tag from).
bool equalConstantTime(const std::string& a, const std::string& b);
// Throws pipecut::Error (InvalidInput) naming the file when it cannot be read.
// `progress`, when given, is called with the bytes of each chunk read.
std::string sha256File(const std::string& path, const std::function<void(size_t)>& progress = nullptr);

}  // namespace pipecut
