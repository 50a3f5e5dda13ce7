#pragma once
// A stage loaded in this process, and the per-device figures its rank reports.
#include <memory>
#include <optional>
#include <vector>

#include <c10/cuda/CUDAStream.h>
#include <torch/script.h>

#include "manifest/manifest.h"
#include "runtime/exchange.h"
#include "runtime/report.h"
#include "runtime/stage_program.h"
#include "runtime/stage_timer.h"

namespace pipecut::runtime {

struct LocalStage {
  const Stage* info = nullptr;
  StageProgram program;
  c10::Device device{c10::kCPU};
  std::unique_ptr<Mailbox> mailbox;
  std::vector<int> slot;  // per forward() argument: mailbox slot, or -1
  std::optional<c10::cuda::CUDAStream> stream, copyStream;
  StageTimer timer;  // busy time: host clock on the CPU, CUDA events on a GPU
};

// Per device the stages use: its bubble over this rank's wall time (see
// DeviceBubble), and its peak memory (CUDA: the caching allocator's peak;
// CPU: the process's peak RSS).
std::vector<DeviceBubble> deviceBubbles(const std::vector<const LocalStage*>& stages, int rank, double wallMs);
std::vector<DeviceMemory> deviceMemory(const std::vector<const LocalStage*>& stages, int rank);

}  // namespace pipecut::runtime
