#pragma once
// The messages pipecut's ranks leave for each other in the rendezvous store
// (runtime/distributed.h): their bytes and how they are checked. Torch-free,
// so that the decoders are fuzzed on their own (test/fuzz/control_messages).
//
// Trust model. c10d's TCPStore has no authentication: whoever reaches
// MASTER_ADDR:MASTER_PORT can read, write and delete its keys (torchrun's
// store is the same). So:
// - Every message is typed and fixed-format (counts, rank numbers, codes,
//   raw digests, IEEE doubles), decoded strictly: a malformed one ends the
//   run (exit 5). Nothing read becomes a path, a text shown as it is, or a
//   reason to skip a check: what a rank prints it composes itself from the
//   codes (describe()).
// - With a shared secret (PIPECUT_RDZV_SECRET, the same on every rank and
//   never written to the store), every message is sealed: followed by an
//   HMAC-SHA256 tag over its key name and payload, keyed per run (each rank's
//   hello brings a fresh random nonce; the run's key is derived from the
//   secret and every rank's nonce, so a message recorded in another run does
//   not verify in this one). A message whose tag does not verify ends the
//   run (exit 5): a stranger can make a run fail, never change what it does.
#include <cstdint>
#include <string>
#include <vector>

namespace pipecut::runtime::control {

// Raw bytes of a key: empty when no secret is set (messages go unsealed).
struct MacKey {
  std::string bytes;
  bool empty() const { return bytes.empty(); }
};

inline constexpr size_t kTagBytes = 32;
inline constexpr size_t kNonceBytes = 16;

// The key hellos are sealed with (they carry the nonces the run key needs).
MacKey helloKey(const std::string& secret);
// The run's key: from the secret and every rank's hello nonce, in rank order.
MacKey runKey(const std::string& secret, const std::vector<std::string>& nonces);

// payload, then (with a key) HMAC-SHA256(key, name || '\0' || payload).
std::string seal(const MacKey& key, const std::string& name, const std::string& payload);
// The payload of a sealed message; throws Error (RankFailed) naming `name`
// when the tag is missing or does not verify.
std::string unseal(const MacKey& key, const std::string& name, const std::string& sealed);

// Every decoder throws Error (RankFailed, "rendezvous store", naming the
// message) on bytes that are not exactly one well-formed message.

// At rendezvous: a rank, its process id (rank 0's names the temporary
// directory of a checkpoint: runtime/train/checkpoint.cpp) and its nonce.
struct Hello {
  int rank = 0;
  int64_t pid = 0;
  std::string nonce;  // kNonceBytes random bytes
};
std::string encodeHello(const Hello& h);
Hello decodeHello(const std::string& bytes, int expectedRank);

// What a rank is about to run: one SHA-256 (64 hex digits) per field of a list every
// rank builds in the same order (runtime/run_identity.h). Digests, not
// values: nothing a peer sends is shown.
std::string encodeIdentity(const std::vector<std::string>& fieldDigests);
std::vector<std::string> decodeIdentity(const std::string& bytes);

// Why a run stops. Each rank prints describe() of the notice, never text
// from the store.
enum class AbortCode : uint8_t {
  RankFailed = 1,  // `rank` failed on its own (its error class in `kind`; its message is in its output)
  PeerLost = 2,    // `rank` lost its connection to `peer`
  PeerSilent = 3,  // `rank` saw no heartbeat from `peer` (dead or frozen)
  PeerTimeout = 4, // `rank` waited for `peer` past the timeout
  BadMessage = 5,  // `rank` read a message in the store that does not decode or verify
};
struct AbortNotice {
  AbortCode code = AbortCode::RankFailed;
  int rank = 0;
  int peer = -1;     // -1: none
  uint8_t kind = 0;  // RankFailed: the failing rank's ErrorKind (exit code)
};
std::string encodeAbort(const AbortNotice& a);
AbortNotice decodeAbort(const std::string& bytes, int world);
// "rank 1 is dead or frozen: no heartbeat (seen by rank 0)", ...
std::string describe(const AbortNotice& a);

// A heartbeat's counter; the end-of-run marks carry none.
std::string encodeCounter(uint64_t n);
uint64_t decodeCounter(const std::string& bytes);

// Report values (busy times, peak memory, losses): at most `maxCount`
// doubles, any value (a loss may be NaN) unless `finiteNonNegative`.
std::string encodeNumbers(const std::vector<double>& values);
std::vector<double> decodeNumbers(const std::string& bytes, size_t maxCount, bool finiteNonNegative,
                                  const std::string& what);

}  // namespace pipecut::runtime::control
