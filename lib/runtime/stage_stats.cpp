#include "runtime/stage_stats.h"

#include <algorithm>

#include "runtime/control_messages.h"
#include "runtime/distributed.h"
#include "support/error.h"

namespace pipecut::runtime {

std::vector<StageStats> gatherStageStats(DistContext* dist, int rank, const std::string& key,
                                         const std::map<uint32_t, double>& localBusy, const std::vector<int>& stageRank,
                                         const std::vector<c10::Device>& devices, double wallMs,
                                         const std::map<uint32_t, HeldBytes>& localHeld) {
  std::map<uint32_t, double> busy = localBusy;
  std::map<uint32_t, HeldBytes> held = localHeld;
  if (dist) {
    // Bytes + 1, 0 where unknown: the store's numbers are non-negative (exact below 2^53).
    auto encode = [](int64_t bytes) { return static_cast<double>(bytes) + 1; };
    auto decode = [](double v) { return v > 0 ? static_cast<int64_t>(v) - 1 : int64_t{-1}; };
    for (const auto& [s, b] : localBusy) {
      const HeldBytes h = held.count(s) ? held[s] : HeldBytes{};
      dist->put(key + "/" + std::to_string(s), control::encodeNumbers({b, encode(h.saved), encode(h.forWeights)}));
    }
    if (rank == 0)
      for (uint32_t s = 0; s < stageRank.size(); ++s) {
        auto v = control::decodeNumbers(dist->get(key + "/" + std::to_string(s)), 3, true,
                                        "busy time of stage " + std::to_string(s));
        if (v.size() != 3)
          throw Error(ErrorKind::RankFailed, "", "rendezvous store", "the busy time of stage " + std::to_string(s) + " is missing");
        busy[s] = v[0];
        held[s] = {decode(v[1]), decode(v[2])};
      }
  }
  std::vector<StageStats> out;
  for (uint32_t s = 0; s < stageRank.size(); ++s) {
    StageStats ss;
    ss.stage = s;
    ss.rank = stageRank[s];
    ss.device = devices[s].str();
    ss.busyMs = busy.count(s) ? busy[s] : 0;
    ss.busyFraction = wallMs > 0 ? ss.busyMs / wallMs : 0;
    if (held.count(s)) ss.savedActivationBytes = held[s].saved, ss.heldForWeightsBytes = held[s].forWeights;
    out.push_back(ss);
  }
  return out;
}

double measuredBubble(const std::vector<StageStats>& stages, size_t lanes, double wallMs) {
  double sum = 0;
  for (const auto& s : stages) sum += s.busyMs;
  return wallMs > 0 && lanes > 0 ? std::max(0.0, 1.0 - sum / (static_cast<double>(lanes) * wallMs)) : 0;
}

}  // namespace pipecut::runtime
