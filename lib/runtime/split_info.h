#pragma once
// Opening a split directory, for programs that embed the runtime
// (libpipecut, docs/embedding.md): the manifests read and held to the rules
// every reader of a split follows (manifest/directory.h), the stage files
// checked against the manifest's digests (manifest/verify.h), and what the
// directory holds as plain data. Torch-free; the manifest's own types stay
// inside the library.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pipecut::runtime {

struct SplitFileInfo {
  std::string path;    // relative to the split directory
  std::string format;  // "torchscript", "pt2" or "aoti"
  uint64_t bytes = 0;
};

struct SplitStageInfo {
  uint32_t index = 0;
  std::vector<SplitFileInfo> files;
  std::vector<std::string> modules;  // top-level modules whose nodes the stage runs
  uint64_t parameterBytes = 0;
  uint32_t nodeCount = 0;
  size_t inputs = 0, outputs = 0;    // values the stage receives and sends
  size_t stateTensors = 0;           // in-place updated tensors (a KV cache): a split for runGeneration
};

struct SplitInfo {
  std::string dir;
  std::string manifestSha256;        // of manifest.pb: what `pipecut split` prints, what a run can pin
  std::string sourceModel, torchVersion, pipecutVersion;  // as the manifest records them
  std::vector<std::string> inputs, outputs;  // the program's flat user inputs and outputs, by name
  std::vector<SplitStageInfo> stages;
  // The stage files checked (0 with verifyFiles off), their bytes, and the
  // digests compared: "xxh3_128", "sha256", "xxh3_128 and sha256", or "".
  size_t verifiedFiles = 0;
  uint64_t verifiedBytes = 0;
  std::string digests;
};

struct OpenSplitOptions {
  bool verifyFiles = true;            // every stage file's size and digest against the manifest
  bool sha256 = false;                // compare SHA-256 (split --sha256) rather than XXH3-128
  unsigned threads = 0;               // files hashed at once; 0: the machine's cores
  std::string expectManifestSha256;   // refuse a manifest.pb that hashes otherwise (hex, any case)
};

// Throws pipecut::Error (support/error.h), kind InvalidInput, naming the
// directory (Error::file) and the file at fault (Error::where): no such
// directory, a missing or malformed manifest, manifest.json disagreeing with
// manifest.pb, another manifest than the pinned one, a stage file missing or
// not matching its digest. Environment when the OS refuses a read.
SplitInfo openSplit(const std::string& dir, const OpenSplitOptions& options = {});

}  // namespace pipecut::runtime
