#pragma once
// pipecut-run's engine: loads a split directory's TorchScript stages onto
// devices and streams micro-batches through them, one worker thread per
// stage, in one process or across processes (c10d Gloo/NCCL).
// The header is torch-free; drivers stay cheap to compile.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/stage_format.h"

namespace pipecut::runtime {

enum class Schedule {
  GPipe,     // fill-drain: every micro-batch admitted at once
  OneFOneB,  // 1F1B's forward order: at most (number of stages) micro-batches in flight
};

struct RunOptions {
  std::string dir;
  std::vector<std::string> devices = {"cpu"};  // one for all stages, or one per stage
  int microbatches = 1;
  Schedule schedule = Schedule::GPipe;
  std::string inputsPath;                  // .safetensors or torch.save'd tuple/dict
  bool randomInputs = false;
  uint64_t seed = 0;
  int64_t batch = 0;                       // random inputs: micro-batch size where dimensions are symbolic
  int64_t intHigh = 2;                     // random integer inputs lie in [0, intHigh)
  std::string checkPath;                   // reference outputs to compare with
  std::optional<double> atol, rtol;        // unset: per-dtype defaults (see runtime/compare.h)
  bool exact = false;                      // --check demands bitwise equality
  int iterations = 1, warmup = 0;
  int queueDepth = 2;                      // micro-batches a stage may hold ahead of time
  std::string tracePath;
  std::string outputPath;                  // merged outputs, .safetensors
  std::vector<int> stageRanks;             // empty: stage i on rank i mod world
  double timeoutSeconds = 300;
  std::string backend = "auto";            // gloo, nccl, auto (nccl when stages are on CUDA)
  int threads = 0;                         // intra-op threads per stage; 0: cores / (local stages x LOCAL_WORLD_SIZE)
  bool progress = false;
  bool verifyHashes = true;
  std::string expectManifestSha256;        // refuse a split whose manifest.pb hashes otherwise (manifest/directory.h)
  bool force = false;                      // outputs may replace what pipecut did not write (runtime/outputs.h)
  StageFormat stageFormat = StageFormat::TorchScript;  // which files run: .pt, or .pt2 through NativeRT
};

struct StageStats {
  uint32_t stage = 0;
  int rank = 0;
  std::string device;
  double busyMs = 0;
  double busyFraction = 0;
};

// How idle a device was: 1 - busy / wall, on the rank's own wall clock. A
// GPU's busy time is the union of its stages' event-timed spans (stages that
// share a GPU overlap on it); the CPU's is its stages' mean busy time (each
// stage computes on its own thread).
struct DeviceBubble {
  int rank = 0;
  std::string device;
  double busyMs = 0;
  double bubble = 0;
};

struct DeviceMemory {
  int rank = 0;
  std::string device;
  uint64_t peakBytes = 0;
};

struct RunReport {
  int rank = 0, world = 1;
  std::string backend;
  uint32_t stages = 0;
  int microbatches = 0;
  std::string schedule;
  uint64_t samples = 0;                    // batch elements processed in measured iterations
  double wallMs = 0;
  double samplesPerSecond = 0;
  double latencyP50Ms = -1, latencyP99Ms = -1;   // per micro-batch, admission to last output
  double bubbleMeasured = 0;               // 1 - sum(busy) / (stages * wall)
  double bubbleTheoretical = 0;            // (p - 1) / (m + p - 1)
  std::vector<StageStats> stageStats;
  std::vector<DeviceBubble> deviceBubbles;
  std::vector<DeviceMemory> memory;
  // This rank's pre-load check of its stage files against the manifest's
  // digests (xxh3_128, or sha256 in older manifests; -1: skipped with
  // --no-verify), and the bytes it hashed.
  double verifyMs = -1;
  uint64_t verifiedBytes = 0;
  bool checked = false, checkOk = false;
  double maxAbsError = 0;
  std::string checkMessage;
};

// Throws pipecut::Error: InvalidInput for bad directories, inputs or options;
// Internal for failures while running. In a multi-process run, a failure on
// any rank ends every rank (see DistContext::abort).
RunReport runPipeline(const RunOptions& options);

std::string reportJson(const RunReport& r);
std::string reportText(const RunReport& r);

}  // namespace pipecut::runtime
