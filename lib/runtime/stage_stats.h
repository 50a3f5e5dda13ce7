#pragma once
// The per-stage part of a run's report, shared by inference (runInference)
// and training (runTraining): each rank measures the busy time of the stages
// it runs; rank 0 reports every stage's.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "runtime/report.h"

namespace pipecut::runtime {

class DistContext;

// Every stage's StageStats, in stage order. `localBusy`: this rank's stages'
// busy milliseconds. Across processes (`dist` set) every rank publishes its
// stages' under `key` in the store and rank 0 reads all of them (the others
// report their own stages only, the rest as 0). `stageRank` and `devices`:
// per stage, as reported. `localHeld`: this rank's stages'
// savedActivationBytes and heldForWeightsBytes where known (training with
// compiled programs), gathered the same way.
struct HeldBytes {
  int64_t saved = -1;
  int64_t forWeights = -1;
};
std::vector<StageStats> gatherStageStats(DistContext* dist, int rank, const std::string& key,
                                         const std::map<uint32_t, double>& localBusy, const std::vector<int>& stageRank,
                                         const std::vector<c10::Device>& devices, double wallMs,
                                         const std::map<uint32_t, HeldBytes>& localHeld = {});

// 1 - (sum of busy) / (lanes * wall): the share of `lanes` (stages, or
// workers) that sat idle.
double measuredBubble(const std::vector<StageStats>& stages, size_t lanes, double wallMs);

}  // namespace pipecut::runtime
