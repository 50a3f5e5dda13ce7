#pragma once
// Where each stage runs: which rank, and which device on that rank; and which
// c10d backend carries the values between ranks.
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "manifest/manifest.h"
#include "runtime/options.h"

namespace pipecut::runtime {

struct Placement {
  std::vector<int> stageRank;          // per stage
  std::vector<c10::Device> devices;    // per stage, as the stage's own rank resolves "cuda"
  bool allCuda = false;                // every stage on CUDA
  std::string backend;                 // gloo, gloo-strict or nccl ("auto" resolved); empty in one process
};

// Stage i goes to rank i*world/stages unless --stage-ranks says otherwise;
// "cuda" means the stage's rank's LOCAL_RANK device. localWorld: processes
// per machine (LOCAL_WORLD_SIZE; 0 when unknown), with ranks numbered machine
// by machine as torchrun does. Checks, in this order, before any rendezvous,
// so that a build without NCCL still names the placement first:
// - --backend nccl with a stage on the CPU (NCCL carries only CUDA tensors);
// - --backend nccl with two ranks of one machine on one cuda:N (NCCL refuses
//   two ranks on one device);
// - CUDA devices of this rank's stages exist.
// "auto" picks NCCL when every stage is on CUDA and no two ranks share a GPU,
// else Gloo. Throws pipecut::Error (InvalidInput) naming the option.
Placement placeStages(const Manifest& m, const SessionOptions& o, int rank, int world, int localRank, int localWorld = 0);

}  // namespace pipecut::runtime
