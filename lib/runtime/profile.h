#pragma once
// `pipecut-run DIR --profile PROFILE.json`: the measured time of every
// top-level node of a one-stage split, keyed by the .pt2 node name, for
// balancing stages by time (`pipecut split --balance time --cost PROFILE.json`).
// The header is torch-free.
#include <string>
#include <vector>

#include "runtime/options.h"
#include "runtime/report.h"

namespace pipecut::runtime {

// Uses of `o`: the session's dir, devices (one), threads, verifyHashes,
// expectManifestSha256 and force; the inputs; iterations and warmup. The whole batch is one
// forward call. Writes the profile to `profilePath` atomically. Throws
// pipecut::Error: InvalidInput for a directory that is not a one-stage split,
// bad inputs or options, WORLD_SIZE > 1, a graph node the interpreter cannot
// run; Internal when forward fails or node-by-node execution does not give
// forward's outputs bit for bit.
ProfileReport runProfile(const InferenceOptions& o, const std::string& profilePath);


}  // namespace pipecut::runtime
