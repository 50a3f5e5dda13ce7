#pragma once
// What pipecut-run writes and what each output may replace
// (support/staging.h): --output replaces only a previous --output (its
// safetensors metadata says pipecut-run-1), --trace only a trace pipecut-run
// wrote, --profile only a profile, --save-checkpoint only a checkpoint (its
// checkpoint.json and the files it lists); never an input of the run (the
// split directory, --inputs, --check, --data, --load-checkpoint, --prompts)
// or a directory holding one. --force lifts the "only what pipecut wrote"
// part. Every rank checks the outputs it will write before it loads
// anything, so a refusal comes before the run, not after it. Torch-free.
#include <string>
#include <vector>

#include "runtime/options.h"
#include "support/staging.h"

namespace pipecut::runtime {

inline constexpr const char* kRunOutputFormat = "pipecut-run-1";  // --output's safetensors metadata
inline constexpr const char* kTraceFormat = "pipecut-trace";       // --trace's otherData.format
inline constexpr const char* kProfileFormat = "pipecut-profile";   // --profile's format

// The paths a run reads: the split directory and `extra` (inputs, a
// reference, training data, a checkpoint, prompts; empty ones skipped).
std::vector<std::string> readPaths(const SessionOptions& s, const std::vector<std::string>& extra);
std::vector<std::string> readPaths(const InferenceOptions& o);
std::vector<std::string> readPaths(const TrainOptions& o);

// Each takes the run's readPaths (never replaced) and its --force.
support::Destination runOutputDestination(const std::string& path, const SessionOptions& s,
                                          const std::vector<std::string>& inputs);
// `path`: this rank's trace file (rankTracePath).
support::Destination traceDestination(const std::string& path, const SessionOptions& s,
                                      const std::vector<std::string>& inputs);
support::Destination profileDestination(const std::string& path, const SessionOptions& s,
                                        const std::vector<std::string>& inputs);
support::Destination checkpointDestination(const std::string& dir, const SessionOptions& s,
                                           const std::vector<std::string>& inputs);

}  // namespace pipecut::runtime
