#pragma once
// Where each stage runs: which rank, and which device on that rank.
#include <vector>

#include <c10/core/Device.h>

#include "manifest/manifest.h"
#include "runtime/pipeline.h"

namespace pipecut::runtime {

struct Placement {
  std::vector<int> stageRank;          // per stage
  std::vector<c10::Device> devices;    // per stage
  bool allCuda = false;                // every stage on CUDA: NCCL can carry everything
};

// Stage i goes to rank i*world/stages unless --stage-ranks says otherwise;
// "cuda" means this process's LOCAL_RANK device. CUDA devices of this rank's
// stages must exist. Throws pipecut::Error (InvalidInput) naming the option.
Placement placeStages(const Manifest& m, const RunOptions& o, int rank, int world, int localRank);

}  // namespace pipecut::runtime
