#pragma once
// `pipecut verify` as a library call.
#include <string>

namespace pipecut::driver {

struct VerifyRequest {
  std::string dir;
  bool progress = false;  // a progress line on stderr while hashing
  unsigned threads = 0;   // files hashed at once (0: the machine's cores)
  bool sha256 = false;    // SHA-256 of every file, not XXH3-128 (manifest/verify.h)
  // Refuse unless manifest.pb's SHA-256 is this (manifest/directory.h).
  std::string expectManifestSha256;
};

struct VerifyResult {
  size_t files = 0;
  std::string digests;  // what was checked: "xxh3_128", "sha256", or "xxh3_128 and sha256"
  std::string manifestSha256;  // of manifest.pb
};

// Both manifests are there and agree (manifest/directory.h), every stage
// file matches the manifest (size, digest), and nothing unlisted lies in the
// directory. Throws pipecut::Error (InvalidInput) naming the directory and
// the file.
VerifyResult verifyDirectory(const VerifyRequest& request);

}  // namespace pipecut::driver
