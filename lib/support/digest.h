#pragma once
// The two digests a stage file is recorded with, and hashing a whole file
// with either (manifest/verify.h runs several at once).
//
// SHA-256 (sha256.h) is the file's cryptographic identity: what a user pins
// outside the directory. XXH3-128 (libxxhash) is a check against accidental
// change (a truncated copy, a flipped bit, a file from another split) at
// memory speed (`xxhsum -H2` of a 2.1 GB file in the page cache: 0.16 s
// here) against ~2 GB/s per core for SHA-256 with the CPU's SHA
// instructions, so checking a 70B model's 140 GB of stages is
// bound by the disk, not by two cores hashing for a minute. It protects
// nothing against someone who can write the directory: they could rewrite
// the manifest's digests as well.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace pipecut {

enum class Digest { Sha256, Xxh3_128 };

// The manifest's field for it: "sha256", "xxh3_128".
const char* digestName(Digest d);

// Streaming XXH3-128, as `xxhsum -H2` prints it (32 lowercase hex digits).
class Xxh3_128 {
 public:
  Xxh3_128();
  ~Xxh3_128();
  Xxh3_128(const Xxh3_128&) = delete;
  Xxh3_128& operator=(const Xxh3_128&) = delete;
  void update(const void* data, size_t n);
  std::string hexDigest();  // once; the object is spent after

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string xxh3_128Bytes(const void* data, size_t n);

// Lowercase hex of `n` bytes, as both digests print.
std::string lowerHex(const unsigned char* bytes, size_t n);

// Throws pipecut::Error (InvalidInput) naming the file when it cannot be read.
// `progress`, when given, is called with the bytes of each chunk read.
std::string digestFile(Digest d, const std::string& path, const std::function<void(size_t)>& progress = nullptr);

}  // namespace pipecut
