#pragma once
// Training checkpoints on disk (layout: manifest/checkpoint.h), written by
// every rank for its own stages and put in place atomically by rank 0.
#include <cstdint>
#include <map>
#include <string>

#include "manifest/manifest.h"
#include "runtime/distributed.h"
#include "runtime/train/state.h"
#include "support/staging.h"

namespace pipecut::runtime {

// `local`: this process's stages. With `dist`, every rank calls this; the
// checkpoint appears (renamed into place) only once every rank wrote its
// files, and what stands at `dst` is replaced in one step when it may be
// (support/staging.h: a previous checkpoint). The other ranks write into
// rank 0's temporary directory, named from their own `dst` and rank 0's
// process id: nothing the store says becomes a path.
void saveTrainCheckpoint(const support::Destination& dst, const Manifest& m, uint64_t step, const OptimizerOptions& o,
                         const std::map<uint32_t, TrainableStage*>& local, DistContext* dist);

// Restores this process's stages; returns the checkpoint's step. Throws
// pipecut::Error (InvalidInput) naming the file and field for a checkpoint of
// another model or split, another optimizer, a damaged file (hash), or a
// tensor that does not fit.
uint64_t loadTrainCheckpoint(const std::string& path, const Manifest& m, const OptimizerOptions& o,
                             std::map<uint32_t, TrainableStage*>& local);

}  // namespace pipecut::runtime
