#pragma once
// Checking stage files against their manifest: `pipecut verify` (every file)
// and pipecut-run before it loads its stages (only those). One implementation,
// hashing files on several threads.
#include <functional>
#include <string>

#include "manifest/manifest.h"

namespace pipecut {

struct StageFileCheck {
  // Which files to check (all when empty).
  std::function<bool(const Stage&, const StageFile&)> select;
  unsigned threads = 0;                       // 0: the machine's cores
  std::function<void(size_t bytes)> progress; // bytes hashed, from any thread
};

// Each selected file exists in `dir` with the manifest's size and SHA-256.
// Throws pipecut::Error (InvalidInput) with file = dir and where = "stage N
// file 'NAME'"; returns the number of files checked.
size_t verifyStageFiles(const std::string& dir, const Manifest& m, const StageFileCheck& check = {});

// Bytes of the files verifyStageFiles would hash.
uint64_t stageFileBytes(const Manifest& m, const StageFileCheck& check = {});

}  // namespace pipecut
