#pragma once
// `pipecut verify` as a library call.
#include <string>

namespace pipecut::driver {

struct VerifyRequest {
  std::string dir;
  bool progress = false;  // a progress line on stderr while hashing
  unsigned threads = 0;   // files hashed at once (0: the machine's cores)
  bool sha256 = false;    // SHA-256 of every file, not XXH3-128 (manifest/verify.h)
};

struct VerifyResult {
  size_t files = 0;
  std::string digests;  // what was checked: "xxh3_128", "sha256", or "xxh3_128 and sha256"
};

// Every stage file matches the manifest (size, digest), nothing unlisted lies
// in the directory, and manifest.json agrees with manifest.pb. Throws
// pipecut::Error (InvalidInput) naming the directory and the file.
VerifyResult verifyDirectory(const VerifyRequest& request);

}  // namespace pipecut::driver
