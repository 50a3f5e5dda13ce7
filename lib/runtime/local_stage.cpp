#include "runtime/local_stage.h"

#include <sys/resource.h>

#include <map>
#include <set>

#include <c10/cuda/CUDACachingAllocator.h>

namespace pipecut::runtime {

std::vector<DeviceBubble> deviceBubbles(const std::vector<const LocalStage*>& stages, int rank, double wallMs) {
  std::map<std::string, std::vector<const LocalStage*>> byDevice;
  for (const LocalStage* ls : stages) byDevice[ls->device.str()].push_back(ls);
  std::vector<DeviceBubble> out;
  for (const auto& [d, on] : byDevice) {
    DeviceBubble b;
    b.rank = rank;
    b.device = d;
    std::vector<const StageTimer*> timers;
    for (const LocalStage* ls : on) timers.push_back(&ls->timer);
    b.busyMs = on[0]->device.is_cuda() ? StageTimer::unionMs(timers) : StageTimer::meanMs(timers);
    b.bubble = wallMs > 0 ? std::max(0.0, 1.0 - b.busyMs / wallMs) : 0;
    out.push_back(b);
  }
  return out;
}

std::vector<DeviceMemory> deviceMemory(const std::vector<const LocalStage*>& stages, int rank) {
  std::vector<DeviceMemory> out;
  std::set<std::string> seen;
  for (const LocalStage* ls : stages) {
    std::string d = ls->device.str();
    if (!seen.insert(d).second) continue;
    DeviceMemory dm;
    dm.rank = rank;
    dm.device = d;
    if (ls->device.is_cuda()) {
      auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(ls->device.index());
      dm.peakBytes = static_cast<uint64_t>(stats.allocated_bytes[0].peak);
    } else {
      struct rusage ru {};
      getrusage(RUSAGE_SELF, &ru);
      dm.peakBytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // process peak RSS
    }
    out.push_back(dm);
  }
  return out;
}

}  // namespace pipecut::runtime
