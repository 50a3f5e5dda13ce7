#pragma once
// `pipecut verify` as a library call.
#include <string>

namespace pipecut::driver {

struct VerifyRequest {
  std::string dir;
  bool progress = false;  // a progress line on stderr while hashing
  unsigned threads = 0;   // files hashed at once (0: the machine's cores)
};

// Every stage file matches the manifest (size, SHA-256), nothing unlisted lies
// in the directory, and manifest.json agrees with manifest.pb. Returns the
// number of stage files checked; throws pipecut::Error (InvalidInput) naming
// the directory and the file.
size_t verifyDirectory(const VerifyRequest& request);

}  // namespace pipecut::driver
