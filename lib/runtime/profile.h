#pragma once
// `pipecut-run DIR --profile PROFILE.json`: the measured time of every
// top-level node of a one-stage split, keyed by the .pt2 node name, for
// balancing stages by time (`pipecut split --balance time --cost PROFILE.json`).
// The header is torch-free, like pipeline.h.
#include <string>
#include <vector>

#include "runtime/pipeline.h"
#include "runtime/transfer_probe.h"

namespace pipecut::runtime {

struct NodeTime {
  std::string name;    // the program node's name (ir::Node::label())
  std::string module;  // its innermost module ("" at top level)
  double ms = 0;       // median over the measured iterations
};

struct ProfileReport {
  std::string path;    // the profile written
  std::string sourceModel, sourceSha256, sourceDirectorySha256;
  std::string device;
  int threads = 0, iterations = 0, warmup = 0;
  double totalMs = 0;    // sum of the node medians
  double forwardMs = 0;  // median of module.forward over the same iterations
  std::vector<NodeTime> nodes;  // every top-level node, program order
  // CPU stages: what a loopback transfer costs each side's CPU. Left empty
  // (method "") for CUDA stages, whose transfers run beside compute.
  TransferRate transfer;
};

// Uses of `o`: dir, devices (one), inputsPath / randomInputs (seed, batch,
// intHigh), threads, iterations, warmup, verifyHashes. The whole batch is one
// forward call. Writes the profile to `profilePath` atomically. Throws
// pipecut::Error: InvalidInput for a directory that is not a one-stage split,
// bad inputs or options, WORLD_SIZE > 1, a graph node the interpreter cannot
// run; Internal when forward fails or node-by-node execution does not give
// forward's outputs bit for bit.
ProfileReport runProfile(const RunOptions& o, const std::string& profilePath);

std::string profileJson(const ProfileReport& r);         // the file's contents
std::string profileSummaryJson(const ProfileReport& r);  // one line, for --json
std::string profileText(const ProfileReport& r);         // top nodes, total vs forward

}  // namespace pipecut::runtime
