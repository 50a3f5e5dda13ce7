#pragma once
// What a rank is about to run, as the list of fields ranks compare at
// rendezvous (runtime/distributed.h): a run whose ranks were given different
// split directories or options fails at once, naming the field, instead of
// at a time-out or with wrong numbers. Only what must agree is listed: paths
// (a shared file system may mount at different places), devices (each rank
// resolves "cuda" to its own GPU) and a rank's own outputs may differ.
// Torch-free.
#include <string>
#include <utility>
#include <vector>

#include "runtime/options.h"

namespace pipecut::runtime {

using RunIdentity = std::vector<std::pair<std::string, std::string>>;

// The fields every mode has: pipecut's version and the message protocol,
// the mode, the split (manifest.pb's SHA-256), the stage format, where each
// stage runs and the backend.
RunIdentity commonIdentity(const std::string& mode, const SessionOptions& o, const std::string& manifestSha256,
                           const std::vector<int>& stageRank, const std::string& backend);
// Inference: micro-batches, schedule, passes, and what the inputs are (the
// random draw's parameters, or the --inputs file's XXH3-128).
RunIdentity inferenceIdentity(const InferenceOptions& o, const std::string& manifestSha256, const std::vector<int>& stageRank,
                              const std::string& backend);
// Training: micro-batches, schedule, steps, the optimizer and each of its
// settings, the data file's XXH3-128, the checkpoint resumed (its
// checkpoint.json's), and whether one is saved.
RunIdentity trainingIdentity(const TrainOptions& o, const std::string& manifestSha256, const std::vector<int>& stageRank,
                             const std::string& backend, const std::string& schedule);

}  // namespace pipecut::runtime
