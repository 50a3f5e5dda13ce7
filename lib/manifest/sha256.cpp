// SHA-256 as specified in FIPS 180-4, streaming, with lowercase hex output.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "manifest/manifest.h"
#include "support/error.h"

namespace pipecut {
namespace {

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the
// cube roots of the first 64 primes.
constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

// Section 5.3.3: the first 32 bits of the fractional parts of the square roots
// of the first 8 primes.
constexpr std::array<uint32_t, 8> kInitialHash = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

class Sha256 {
 public:
  void update(const unsigned char* data, size_t n) {
    totalBytes_ += n;
    if (used_ > 0) {  // finish a partial block first
      size_t take = std::min(n, block_.size() - used_);
      std::memcpy(block_.data() + used_, data, take);
      used_ += take;
      data += take;
      n -= take;
      if (used_ < block_.size()) return;
      compress(block_.data());
      used_ = 0;
    }
    for (; n >= block_.size(); data += block_.size(), n -= block_.size()) compress(data);
    std::memcpy(block_.data(), data, n);
    used_ = n;
  }

  std::string hexDigest() {
    // Section 5.1.1: a 1 bit, zeros up to 56 mod 64 bytes, then the bit length big-endian.
    uint64_t bitLength = totalBytes_ * 8;
    unsigned char pad[72] = {0x80};
    size_t padLen = (used_ < 56 ? 56 - used_ : 120 - used_);
    for (int i = 0; i < 8; ++i) pad[padLen + i] = static_cast<unsigned char>(bitLength >> (56 - 8 * i));
    update(pad, padLen + 8);

    static const char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(64);
    for (uint32_t word : state_)
      for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(word >> shift) & 0xf];
    return out;
  }

 private:
  // Section 6.2.2: one 512-bit block.
  void compress(const unsigned char* p) {
    uint32_t w[64];
    for (int t = 0; t < 16; ++t)
      w[t] = (uint32_t(p[4 * t]) << 24) | (uint32_t(p[4 * t + 1]) << 16) | (uint32_t(p[4 * t + 2]) << 8) |
             uint32_t(p[4 * t + 3]);
    for (int t = 16; t < 64; ++t) {
      uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int t = 0; t < 64; ++t) {
      uint32_t bigSigma1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + bigSigma1 + ch + kRoundConstants[t] + w[t];
      uint32_t bigSigma0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = bigSigma0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a; state_[1] += b; state_[2] += c; state_[3] += d;
    state_[4] += e; state_[5] += f; state_[6] += g; state_[7] += h;
  }

  std::array<uint32_t, 8> state_ = kInitialHash;
  std::array<unsigned char, 64> block_{};
  size_t used_ = 0;          // bytes waiting in block_
  uint64_t totalBytes_ = 0;  // message length so far
};

// Closes a file descriptor on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

std::string sha256Bytes(const void* data, size_t n) {
  Sha256 h;
  h.update(static_cast<const unsigned char*>(data), n);
  return h.hexDigest();
}

std::string sha256File(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::InvalidInput, path, "", std::string("cannot open: ") + std::strerror(errno));
  FdCloser closer{fd};
  constexpr size_t kChunk = 64 * 1024;
  auto buffer = std::make_unique<unsigned char[]>(kChunk);
  Sha256 h;
  for (;;) {
    ssize_t got = ::read(fd, buffer.get(), kChunk);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::InvalidInput, path, "", std::string("cannot read: ") + std::strerror(errno));
    }
    if (got == 0) break;
    h.update(buffer.get(), static_cast<size_t>(got));
  }
  return h.hexDigest();
}

}  // namespace pipecut
