#include "runtime/control_messages.h"

#include <cmath>
#include <cstring>

#include "support/error.h"
#include "support/sha256.h"

namespace pipecut::runtime::control {

namespace {

[[noreturn]] void malformed(const std::string& what, const std::string& why) {
  throw Error(ErrorKind::RankFailed, "", "rendezvous store", "the " + what + " message " + why);
}

void putU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t getU64(const std::string& b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

// One format byte leads every payload, so that a message of one kind never
// decodes as another, nor an older pipecut's as this one's.
constexpr char kHello = 'H', kIdentity = 'I', kAbort = 'A', kCounter = 'C', kNumbers = 'N';

void expectHeader(const std::string& b, char type, size_t size, const std::string& what) {
  if (b.size() != size) malformed(what, "has " + std::to_string(b.size()) + " bytes, not " + std::to_string(size));
  if (b[0] != type) malformed(what, "is of another kind");
}

}  // namespace

MacKey helloKey(const std::string& secret) {
  if (secret.empty()) return {};
  return {hmacSha256(secret, "pipecut rendezvous hello v1")};
}

MacKey runKey(const std::string& secret, const std::vector<std::string>& nonces) {
  if (secret.empty()) return {};
  std::string all = "pipecut rendezvous run v1";
  for (const auto& n : nonces) all += n;
  return {hmacSha256(secret, all)};
}

std::string seal(const MacKey& key, const std::string& name, const std::string& payload) {
  if (key.empty()) return payload;
  return payload + hmacSha256(key.bytes, name + std::string(1, '\0') + payload);
}

std::string unseal(const MacKey& key, const std::string& name, const std::string& sealed) {
  if (key.empty()) return sealed;
  if (sealed.size() < kTagBytes)
    malformed("'" + name + "'", "does not verify under PIPECUT_RDZV_SECRET: it carries no tag (written by someone "
                                "without the secret, or by a rank given none)");
  std::string payload = sealed.substr(0, sealed.size() - kTagBytes);
  if (!equalConstantTime(hmacSha256(key.bytes, name + std::string(1, '\0') + payload), sealed.substr(payload.size())))
    malformed("'" + name + "'",
              "does not verify under PIPECUT_RDZV_SECRET (written by someone without it, or by a rank with another)");
  return payload;
}

std::string encodeHello(const Hello& h) {
  std::string b(1, kHello);
  putU64(b, static_cast<uint64_t>(h.rank));
  putU64(b, static_cast<uint64_t>(h.pid));
  return b + h.nonce;
}

Hello decodeHello(const std::string& b, int expectedRank) {
  const std::string what = "hello of rank " + std::to_string(expectedRank);
  expectHeader(b, kHello, 1 + 16 + kNonceBytes, what);
  Hello h;
  uint64_t rank = getU64(b, 1), pid = getU64(b, 9);
  if (rank != static_cast<uint64_t>(expectedRank)) malformed(what, "names another rank");
  if (pid == 0 || pid > (1u << 30)) malformed(what, "carries no process id");
  h.rank = expectedRank;
  h.pid = static_cast<int64_t>(pid);
  h.nonce = b.substr(17);
  return h;
}

std::string encodeIdentity(const std::vector<std::string>& fieldDigests) {
  std::string b(1, kIdentity);
  putU64(b, fieldDigests.size());
  for (const auto& d : fieldDigests) b += d;
  return b;
}

std::vector<std::string> decodeIdentity(const std::string& b) {
  if (b.size() < 9 || b[0] != kIdentity) malformed("identity", "is not one");
  uint64_t n = getU64(b, 1);
  if (n > 256 || b.size() != 9 + n * 64) malformed("identity", "has the wrong size");
  std::vector<std::string> out;
  for (uint64_t i = 0; i < n; ++i) out.push_back(b.substr(9 + i * 64, 64));
  return out;
}

std::string encodeAbort(const AbortNotice& a) {
  std::string b(1, kAbort);
  b += static_cast<char>(a.code);
  putU64(b, static_cast<uint64_t>(a.rank));
  putU64(b, static_cast<uint64_t>(static_cast<int64_t>(a.peer)));
  b += static_cast<char>(a.kind);
  return b;
}

AbortNotice decodeAbort(const std::string& b, int world) {
  expectHeader(b, kAbort, 19, "abort");
  AbortNotice a;
  auto code = static_cast<uint8_t>(b[1]);
  if (code < 1 || code > 5) malformed("abort", "has an unknown code");
  a.code = static_cast<AbortCode>(code);
  uint64_t rank = getU64(b, 2);
  auto peer = static_cast<int64_t>(getU64(b, 10));
  if (rank >= static_cast<uint64_t>(world)) malformed("abort", "names a rank outside the world");
  if (peer < -1 || peer >= world) malformed("abort", "names a peer outside the world");
  const bool hasPeer = a.code != AbortCode::RankFailed && a.code != AbortCode::BadMessage;
  if (hasPeer != (peer != -1)) malformed("abort", "names a peer where its code has none, or none where it has one");
  a.rank = static_cast<int>(rank);
  a.peer = static_cast<int>(peer);
  a.kind = static_cast<uint8_t>(b[18]);
  if (a.code == AbortCode::RankFailed && (a.kind < 1 || a.kind > 6)) malformed("abort", "has an unknown error class");
  return a;
}

std::string describe(const AbortNotice& a) {
  const std::string by = " (seen by rank " + std::to_string(a.rank) + ")";
  const std::string peer = "rank " + std::to_string(a.peer);
  switch (a.code) {
    case AbortCode::RankFailed: {
      static const char* kinds[] = {"", "a usage error", "invalid input", "an internal error", "", "a failed peer",
                                    "the environment refusing"};
      return "rank " + std::to_string(a.rank) + " failed with " + kinds[a.kind] + " (exit " +
             std::to_string(a.kind) + "; its message is in its own output)";
    }
    case AbortCode::PeerLost: return peer + " failed or is unreachable" + by;
    case AbortCode::PeerSilent: return peer + " is dead or frozen: no heartbeat" + by;
    case AbortCode::PeerTimeout: return peer + " sent nothing within the timeout" + by;
    case AbortCode::BadMessage:
      return "rank " + std::to_string(a.rank) + " read a message in the rendezvous store that does not decode or "
             "verify (written by someone else than the ranks?)";
  }
  return "stopped";
}

std::string encodeCounter(uint64_t n) {
  std::string b(1, kCounter);
  putU64(b, n);
  return b;
}

uint64_t decodeCounter(const std::string& b) {
  expectHeader(b, kCounter, 9, "heartbeat");
  return getU64(b, 1);
}

std::string encodeNumbers(const std::vector<double>& values) {
  std::string b(1, kNumbers);
  putU64(b, values.size());
  for (double v : values) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    putU64(b, bits);
  }
  return b;
}

std::vector<double> decodeNumbers(const std::string& b, size_t maxCount, bool finiteNonNegative, const std::string& what) {
  if (b.size() < 9 || b[0] != kNumbers) malformed(what, "is not a list of numbers");
  uint64_t n = getU64(b, 1);
  if (n > maxCount || b.size() != 9 + n * 8) malformed(what, "has the wrong size");
  std::vector<double> out;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t bits = getU64(b, 9 + i * 8);
    double v;
    std::memcpy(&v, &bits, 8);
    if (finiteNonNegative && (!std::isfinite(v) || v < 0)) malformed(what, "holds a value that cannot be one");
    out.push_back(v);
  }
  return out;
}

}  // namespace pipecut::runtime::control
