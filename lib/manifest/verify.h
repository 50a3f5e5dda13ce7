#pragma once
// Checking stage files against their manifest: `pipecut verify` (every file)
// and pipecut-run before it loads its stages (only those). One implementation,
// hashing files on several threads.
#include <functional>
#include <string>

#include "manifest/manifest.h"
#include "support/digest.h"

namespace pipecut {

struct StageFileCheck {
  // Which files to check (all when empty).
  std::function<bool(const Stage&, const StageFile&)> select;
  // Which digest: by default XXH3-128 where the manifest has it (SHA-256
  // where it does not, in manifests from before it was recorded); with
  // `sha256`, SHA-256 for every file (support/digest.h).
  bool sha256 = false;
  unsigned threads = 0;                       // 0: the machine's cores
  std::function<void(size_t bytes)> progress; // bytes hashed, from any thread
};

// Each selected file exists in `dir` with the manifest's size and digest.
struct StageFilesVerified {
  size_t files = 0;
  // Which digests were compared (a directory can mix them: a manifest from
  // before xxh3_128 was recorded checks by sha256).
  bool xxh3_128 = false, sha256 = false;
};

// Throws pipecut::Error (InvalidInput) with file = dir and where = "stage N
// file 'NAME'".
StageFilesVerified verifyStageFiles(const std::string& dir, const Manifest& m, const StageFileCheck& check = {});

// Bytes of the files verifyStageFiles would hash.
uint64_t stageFileBytes(const Manifest& m, const StageFileCheck& check = {});

}  // namespace pipecut
