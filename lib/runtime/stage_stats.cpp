#include "runtime/stage_stats.h"

#include <algorithm>

#include "runtime/control_messages.h"
#include "runtime/distributed.h"
#include "support/error.h"

namespace pipecut::runtime {

std::vector<StageStats> gatherStageStats(DistContext* dist, int rank, const std::string& key,
                                         const std::map<uint32_t, double>& localBusy, const std::vector<int>& stageRank,
                                         const std::vector<c10::Device>& devices, double wallMs,
                                         const std::map<uint32_t, int64_t>& localSaved) {
  std::map<uint32_t, double> busy = localBusy;
  std::map<uint32_t, int64_t> saved = localSaved;
  if (dist) {
    for (const auto& [s, b] : localBusy) {
      // Bytes + 1, 0 where unknown: the store's numbers are non-negative (exact below 2^53).
      const double bytes = saved.count(s) ? static_cast<double>(saved[s]) + 1 : 0.0;
      dist->put(key + "/" + std::to_string(s), control::encodeNumbers({b, bytes}));
    }
    if (rank == 0)
      for (uint32_t s = 0; s < stageRank.size(); ++s) {
        auto v = control::decodeNumbers(dist->get(key + "/" + std::to_string(s)), 2, true,
                                        "busy time of stage " + std::to_string(s));
        if (v.size() != 2)
          throw Error(ErrorKind::RankFailed, "", "rendezvous store", "the busy time of stage " + std::to_string(s) + " is missing");
        busy[s] = v[0];
        if (v[1] > 0) saved[s] = static_cast<int64_t>(v[1]) - 1;
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
    if (saved.count(s)) ss.savedActivationBytes = saved[s];
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
