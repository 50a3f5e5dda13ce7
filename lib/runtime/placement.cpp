#include "runtime/placement.h"

#include <optional>

#include <torch/cuda.h>

#include "support/error.h"

namespace pipecut::runtime {

namespace {

std::string stageName(size_t s) { return "stage " + std::to_string(s); }

}  // namespace

Placement placeStages(const Manifest& m, const SessionOptions& o, int rank, int world, int localRank, int localWorld) {
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
  // A rank's local rank: its own is known; another's follows from torchrun's
  // numbering when LOCAL_WORLD_SIZE is set.
  auto localRankOf = [&](int r) -> std::optional<int> {
    if (r == rank) return world > 1 ? localRank : 0;
    if (localWorld > 0) return r % localWorld;
    return std::nullopt;
  };
  if ((!o.supportedDevice.empty() || !o.fallbackDevice.empty()) && m.supportTarget.empty())
    invalidInput(o.supportedDevice.empty() ? "--fallback-device" : "--supported-device",
                 "the split was not cut by a target's support (pipecut split --support), so no stage is marked "
                 "supported or not");
  pl.allCuda = true;
  std::vector<bool> known(P, true);  // the device index is known (not another rank's unknown "cuda")
  for (size_t s = 0; s < P; ++s) {
    std::string d = o.devices.size() == 1 ? o.devices[0] : o.devices[s];
    std::string option = "--devices";
    if (m.stages[s].supported) {
      const std::string& kind = *m.stages[s].supported ? o.supportedDevice : o.fallbackDevice;
      if (!kind.empty()) d = kind, option = *m.stages[s].supported ? "--supported-device" : "--fallback-device";
    }
    if (d == "cuda") {
      auto lr = localRankOf(pl.stageRank[s]);
      known[s] = lr.has_value();
      d = "cuda:" + std::to_string(lr.value_or(0));
    }
    c10::Device dev(c10::kCPU);
    try {
      dev = c10::Device(d);
    } catch (const c10::Error&) {
      invalidInput(option, "unknown device '" + d + "'");
    }
    if (!dev.is_cpu() && !dev.is_cuda()) invalidInput(option, "only cpu and cuda devices are supported: '" + d + "'");
    if (dev.is_cuda() && !dev.has_index()) dev = c10::Device(c10::kCUDA, 0);
    pl.allCuda &= dev.is_cuda();
    pl.devices.push_back(dev);
  }

  // The backend is checked in one process too: a run that names one is
  // refused alike however many processes it has.
  const std::string& b = o.backend;
  if (b != "auto" && b != "gloo" && b != "gloo-strict" && b != "nccl")
    invalidInput("--backend", "unknown backend '" + b + "' (gloo, gloo-strict, nccl, auto)");
  if (b == "nccl")
    for (size_t s = 0; s < P; ++s)
      if (!pl.devices[s].is_cuda())
        invalidInput("--backend nccl", stageName(s) + " (rank " + std::to_string(pl.stageRank[s]) + ") is on " +
                                           pl.devices[s].str() +
                                           "; NCCL carries only CUDA tensors: put every stage on a GPU, or use "
                                           "--backend gloo");
  if (world > 1) {
    // Two ranks on one machine on one GPU: ranks r1 != r2 with equal
    // r / LOCAL_WORLD_SIZE (torchrun's numbering) and equal cuda:N.
    std::string shared;
    if (localWorld > 0)
      for (size_t a = 0; a < P && shared.empty(); ++a)
        for (size_t c = a + 1; c < P && shared.empty(); ++c) {
          int ra = pl.stageRank[a], rc = pl.stageRank[c];
          if (ra != rc && ra / localWorld == rc / localWorld && known[a] && known[c] && pl.devices[a].is_cuda() &&
              pl.devices[a] == pl.devices[c])
            shared = "ranks " + std::to_string(ra) + " (" + stageName(a) + ") and " + std::to_string(rc) + " (" +
                     stageName(c) + ") of one machine both use " + pl.devices[a].str();
        }
    if (b == "nccl" && !shared.empty())
      invalidInput("--backend nccl", shared + "; NCCL needs a GPU of its own per rank: give each rank its own "
                                              "device (--devices cuda means cuda:LOCAL_RANK), or use --backend gloo");
    pl.backend = b == "auto" ? (pl.allCuda && shared.empty() ? "nccl" : "gloo") : b;
  }

  for (size_t s = 0; s < P; ++s) {
    const c10::Device& dev = pl.devices[s];
    if (!dev.is_cuda() || pl.stageRank[s] != rank) continue;
    std::string d = dev.str();
    if (!torch::cuda::is_available()) invalidInput("--devices", "'" + d + "' requested, but no CUDA device is available");
    if (dev.index() >= static_cast<int>(torch::cuda::device_count()))
      invalidInput("--devices", "'" + d + "' does not exist (" + std::to_string(torch::cuda::device_count()) +
                                    " CUDA devices)");
  }
  return pl;
}

}  // namespace pipecut::runtime
