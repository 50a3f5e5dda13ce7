#pragma once
// What a run reports, by mode, and how it is printed: one set of report
// types, torch-free and engine-free (runtime/options.h has the options).
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/transfer_probe.h"

namespace pipecut::runtime {

struct StageStats {
  uint32_t stage = 0;
  int rank = 0;
  std::string device;
  std::string format;   // what ran it: torchscript, pt2 or aoti (--stage-format auto resolved)
  double busyMs = 0;
  double busyFraction = 0;
  // Training with compiled programs, per micro-batch, -1 where not known:
  // the most bytes held from its F to its backward (what F saves for I/W or
  // B, stage inputs included: what --recompute trades), and from its I to
  // its W (the values W reads: zero bubble's price, also paid, briefly,
  // where W follows I at once; 0 for a stage with one B).
  int64_t savedActivationBytes = -1;
  int64_t heldForWeightsBytes = -1;
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

struct TrainReport {
  int rank = 0, world = 1;
  std::string backend;
  uint32_t stages = 0, workers = 0;
  int microbatches = 0;
  std::string schedule, optimizer;
  uint64_t firstStep = 0;          // steps taken before this run (from --load-checkpoint)
  std::vector<double> losses;      // per step: mean of the micro-batch losses
  uint64_t samples = 0;
  double wallMs = 0, samplesPerSecond = 0, stepsPerSecond = 0;
  std::vector<double> stepMs;            // rank 0's wall time of each step
  double steadySamplesPerSecond = 0;     // over the steps after the first (which also warms up)
  std::vector<StageStats> stageStats;   // busy: compute time of its actions (waits for peers excluded)
  double bubbleMeasured = 0;       // 1 - sum(worker busy) / (workers * wall)
  std::vector<uint32_t> peakActivations;  // per stage, from the plan
  std::vector<std::string> plan;   // per worker: its actions in order
  std::string checkpoint;          // where --save-checkpoint wrote
};

struct NodeTime {
  std::string name;    // the program node's name (ir::Node::label())
  std::string module;  // its innermost module ("" at top level)
  double ms = 0;       // median over the measured iterations
};

struct ProfileReport {
  std::string path;    // the profile written
  std::string sourceModel, sourceSha256, sourceDirectorySha256;
  std::string device;
  int threads = 0, iterations = 0, warmup = 0;
  double totalMs = 0;    // sum of the node medians
  double forwardMs = 0;  // median of module.forward over the same iterations
  std::vector<NodeTime> nodes;  // every top-level node, program order
  // CPU stages: what a loopback transfer costs each side's CPU. Left empty
  // (method "") for CUDA stages, whose transfers run beside compute.
  TransferRate transfer;
};

struct GenerateReport {
  int rank = 0, world = 1;
  std::string backend;
  uint32_t stages = 0;
  int slots = 0;
  int64_t rowsPerSlot = 0;         // the exported batch
  std::string sampling;
  size_t sequences = 0;
  uint64_t promptTokens = 0, generatedTokens = 0;
  uint64_t steps = 0;              // items run through the pipeline (prefill chunks and decode steps)
  double wallMs = 0;
  // Prompt tokens and generated tokens over the run's wall time (as serving
  // benchmarks count input and output throughput).
  double prefillTokensPerSecond = 0, decodeTokensPerSecond = 0;
  // Time to first token: from a sequence's first prefill step entering the
  // pipeline to its first token; inter-token latency: between a sequence's
  // consecutive tokens. Milliseconds; -1 when there are none.
  double ttftP50Ms = -1, ttftP99Ms = -1, itlP50Ms = -1, itlP99Ms = -1;
  std::vector<StageStats> stageStats;
  double bubbleMeasured = 0;       // 1 - sum(busy) / (stages * wall)
  uint64_t stateBytesPerSlot = 0;  // every stage's state, one slot's
  // State bytes copied per generated token: slots run on their own state,
  // passed by reference; only a new sequence's state is reset (zeroed:
  // stateBytesZeroed, or copied from a stored initial value: counted here).
  double stateBytesCopiedPerToken = 0;
  uint64_t stateBytesZeroed = 0;
  bool checked = false, checkOk = false;
  std::string checkMessage;
};

std::string reportJson(const RunReport& r);
std::string reportText(const RunReport& r);
std::string trainReportJson(const TrainReport& r);
std::string trainReportText(const TrainReport& r);
std::string profileJson(const ProfileReport& r);         // the profile file's contents
std::string profileSummaryJson(const ProfileReport& r);  // one line, for --json
std::string profileText(const ProfileReport& r);         // top nodes, total vs forward
std::string generateReportJson(const GenerateReport& r);
std::string generateReportText(const GenerateReport& r);

}  // namespace pipecut::runtime
