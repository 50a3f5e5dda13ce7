#include "runtime/placement.h"

#include <torch/cuda.h>

#include "support/error.h"

namespace pipecut::runtime {

Placement placeStages(const Manifest& m, const RunOptions& o, int rank, int world, int localRank) {
  const size_t P = m.stages.size();
  Placement pl;
  pl.stageRank.resize(P);
  if (!o.stageRanks.empty()) {
    if (o.stageRanks.size() != P)
      invalidInput("--stage-ranks", "gives " + std::to_string(o.stageRanks.size()) + " ranks for " + std::to_string(P) +
                                        " stages");
    for (size_t s = 0; s < P; ++s) {
      if (o.stageRanks[s] < 0 || o.stageRanks[s] >= world)
        invalidInput("--stage-ranks", "rank " + std::to_string(o.stageRanks[s]) + " is outside the world of " +
                                          std::to_string(world));
      pl.stageRank[s] = o.stageRanks[s];
    }
  } else {
    for (size_t s = 0; s < P; ++s) pl.stageRank[s] = static_cast<int>(s * static_cast<size_t>(world) / P);
  }

  if (o.devices.size() != 1 && o.devices.size() != P)
    invalidInput("--devices", "gives " + std::to_string(o.devices.size()) + " devices for " + std::to_string(P) +
                                  " stages (give one for all, or one per stage)");
  pl.allCuda = true;
  for (size_t s = 0; s < P; ++s) {
    std::string d = o.devices.size() == 1 ? o.devices[0] : o.devices[s];
    if (d == "cuda") d = "cuda:" + std::to_string(world > 1 ? localRank : 0);
    c10::Device dev(c10::kCPU);
    try {
      dev = c10::Device(d);
    } catch (const c10::Error&) {
      invalidInput("--devices", "unknown device '" + d + "'");
    }
    if (!dev.is_cpu() && !dev.is_cuda()) invalidInput("--devices", "only cpu and cuda devices are supported: '" + d + "'");
    if (dev.is_cuda() && pl.stageRank[s] == rank) {
      if (!torch::cuda::is_available()) invalidInput("--devices", "'" + d + "' requested, but no CUDA device is available");
      if (dev.index() >= static_cast<int>(torch::cuda::device_count()))
        invalidInput("--devices", "'" + d + "' does not exist (" + std::to_string(torch::cuda::device_count()) +
                                      " CUDA devices)");
    }
    pl.allCuda &= dev.is_cuda();
    pl.devices.push_back(dev);
  }
  return pl;
}

}  // namespace pipecut::runtime
