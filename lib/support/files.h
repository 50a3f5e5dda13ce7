#pragma once
// Reading whole files, for the small ones pipecut reads in one go (specs,
// manifests, references, inputs). Large inputs (.pt2) are memory-mapped by
// pt2::ArchiveReader instead; outputs go through support/staging.h.
#include <cstdint>
#include <string>

#include "support/digest.h"
#include "support/sha256.h"

namespace pipecut::support {

// Throws pipecut::Error naming the file (InvalidInput for a path that leads
// nowhere, Environment for what the OS refuses: support/error.h's
// osErrorKind), with `what` ("the split spec") in the message when given.
// A FIFO without a writer reads as empty rather than blocking.
std::string readFile(const std::string& path, const std::string& what = "");

// Writes a new file and hashes its bytes on the way (no second read to hash
// it). Small writes are buffered; large ones (weights) go straight through.
// Errors are pipecut::Error (Environment: disk full, ...) naming the file.
class HashingWriter {
 public:
  // `sha256` false: XXH3-128 only (SHA-256 costs a core-second per ~2 GB,
  // the most CPU a split of real weights spends).
  explicit HashingWriter(std::string path, bool sha256 = true);
  ~HashingWriter();
  HashingWriter(const HashingWriter&) = delete;
  HashingWriter& operator=(const HashingWriter&) = delete;
  size_t write(const void* data, size_t n);
  // Flushes and closes; returns the SHA-256 of everything written ("" when
  // not asked for).
  std::string finish();
  // After finish(): the XXH3-128 of everything written (support/digest.h).
  const std::string& xxh3_128() const { return xxh3_128_; }
  uint64_t bytes() const { return bytes_; }

 private:
  void flushBuffer();
  void writeAll(const void* data, size_t n);
  void startWriteback();
  std::string path_;
  int fd_ = -1;
  std::string buffer_;
  uint64_t bytes_ = 0;
  uint64_t written_ = 0, writebackFrom_ = 0;  // bytes handed to the kernel; start of the range not yet sent to disk
  bool sha256_ = true;
  Sha256 hash_;
  Xxh3_128 fast_;  // the same bytes, for the manifest's xxh3_128 (support/digest.h)
  std::string xxh3_128_;
};

}  // namespace pipecut::support
