#pragma once
// A training checkpoint: a directory written by `pipecut-run --train
// --save-checkpoint CKPT`, read back by `--load-checkpoint` and by
// `pipecut merge`. Torch-free, so that merging needs no LibTorch.
//
// Layout:
//   CKPT/checkpoint.json          this struct (checkpointToJson)
//   CKPT/stage_NNN.safetensors    per stage: its parameters and persistent
//                                 buffers under their original FQNs, and the
//                                 optimizer's state of each parameter under
//                                 "optimizer/<fqn>/<name>" (exp_avg,
//                                 exp_avg_sq, momentum_buffer, step: whatever
//                                 the optimizer keeps). FQNs hold no '/'.
// Invariants: every stage of the split has one file; a tied group's names
// resolve, in each stage listed for it, to one tensor under one of the
// group's names, and those copies are bitwise equal across stages.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "manifest/manifest.h"

namespace pipecut {

constexpr const char* kCheckpointFormat = "pipecut-checkpoint-1";

struct CheckpointStage {
  uint32_t index = 0;
  std::string file;                  // relative to the checkpoint directory
  std::string sha256;                // of that file, lowercase hex
  uint64_t bytes = 0;
  std::vector<std::string> tensors;  // model tensors it holds (FQNs), file order
};

struct Checkpoint {
  std::string format = kCheckpointFormat;
  uint64_t step = 0;                 // optimizer steps taken since the split's weights
  std::string sourceSha256;          // the manifest's source model hash (empty unless split --hash-source)
  std::string sourceDirectorySha256; // the manifest's source_directory_sha256 (empty in older checkpoints)
  std::string splitSpec;             // the manifest's split spec (a checkpoint fits one split)
  std::string optimizer;             // "sgd" or "adamw"
  std::map<std::string, double> hyper;  // lr, momentum, weight_decay, beta1, beta2, eps
  std::vector<CheckpointStage> stages;  // by index
  std::vector<TiedGroup> tiedGroups;    // as in the manifest
};

// Deterministic: fields in a fixed order (format, step, source_sha256,
// source_directory_sha256,
// split_spec, optimizer, hyper, stages [{index, file, sha256, bytes, tensors}],
// tied_groups [{names, stages}]), hyper's keys sorted, two-space indentation,
// a final newline; numbers in their shortest round-trip form, so
// to -> from -> to gives the same bytes. Internal error for a non-finite hyper.
std::string checkpointToJson(const Checkpoint& c);
// Strict: unknown or missing fields, wrong types, a format other than
// kCheckpointFormat, stage indices not 0..n-1 in order, a stage file that is
// not a relative path inside the directory (absolute, ".", ".." or empty
// components, or checkpoint.json) or is listed twice, a sha256 that is not 64
// lowercase hex digits (source_sha256 and source_directory_sha256 may also
// be empty; the latter may be absent), a tensor name that
// is empty, holds '/' or is listed twice in a stage, tied-group stages out of
// range. Throws pipecut::Error (InvalidInput) naming `file` and the offending
// field ("stages[1].sha256").
Checkpoint checkpointFromJson(const std::string& text, const std::string& file);
// One entry of "stages" alone, in the same layout and with the same checks
// (training ranks hand their stages' entries to rank 0 through the store);
// errors name `where` and "stages[<index>]...".
std::string checkpointStageToJson(const CheckpointStage& s);
CheckpointStage checkpointStageFromJson(const std::string& text, uint32_t index, const std::string& where);
// Reads DIR/checkpoint.json; a missing DIR is an InvalidInput error naming it.
Checkpoint readCheckpoint(const std::string& dir);
// For support::Destination::previousOutput: "" when `dir` holds a readable
// checkpoint.json and only the files it lists, else what is in the way.
std::string checkpointDirectoryInTheWay(const std::string& dir);

}  // namespace pipecut
