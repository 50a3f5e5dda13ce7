#pragma once
// `pipecut merge` as a library call: a training checkpoint (one safetensors
// file per stage, manifest/checkpoint.h) into one state dict (one safetensors
// file, every model tensor under its FQN), with no torch.
#include <cstdint>
#include <string>

namespace pipecut::driver {

struct MergeRequest {
  std::string checkpoint;  // the checkpoint directory
  std::string output;      // the .safetensors to write (replaced atomically)
  unsigned threads = 0;    // stage files hashed at once (0: the machine's cores)
  bool force = false;      // replace a file pipecut did not write (support/staging.h)
};

struct MergeResult {
  size_t tensors = 0;      // tensors written (tied names counted once each)
  size_t stages = 0;       // stage files read
  uint64_t bytes = 0;      // size of the output file
  uint64_t step = 0;       // the checkpoint's step
  std::string sha256;      // of the output file
};

// Checks every stage file against checkpoint.json (size, SHA-256, the model
// tensors it lists), takes every model tensor (keys not under "optimizer/"),
// requires copies of one FQN in several stages (tied weights) to be bitwise
// equal, writes every name of every tied group, and writes the output with
// keys sorted and metadata {format: "pipecut-merge-1", step, source_sha256}.
// Throws pipecut::Error (InvalidInput) naming the file and field, or the FQN
// and the stages that disagree; nothing is written then. The output replaces
// only a previous merge output (support/staging.h), and the check comes first.
MergeResult mergeCheckpoint(const MergeRequest& request);

constexpr const char* kMergeFormat = "pipecut-merge-1";

}  // namespace pipecut::driver
