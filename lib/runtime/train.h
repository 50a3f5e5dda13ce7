#pragma once
// pipecut-run --train: trains a split whose program ends in its loss (the
// single user output is a scalar), one optimizer per stage, micro-batched
// under a training schedule (runtime/train_schedule.h), in one process or
// across processes over c10d. Torch-free header.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/pipeline.h"
#include "runtime/train_schedule.h"

namespace pipecut::runtime {

struct OptimizerOptions {
  std::string name = "sgd";        // sgd or adamw
  double lr = 0.01;
  double momentum = 0;             // sgd
  double weightDecay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
};

struct TrainOptions {
  RunOptions run;                  // dir, devices, microbatches, backend, timeout, threads, trace, verify
  std::string dataPath;            // input.<i>: dimension 0 holds the steps' batches one after another
  int steps = 0;                   // 0: every step the data holds after the checkpoint's
  TrainScheduleKind schedule = TrainScheduleKind::OneFOneB;
  OptimizerOptions optimizer;
  std::string saveCheckpoint, loadCheckpoint;
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

// Throws pipecut::Error: InvalidInput for a program that is not a loss, bad
// data, options or checkpoints; Internal for failures while running. A
// failure on any rank ends every rank with exit 5 (as for inference).
TrainReport runTraining(const TrainOptions& options);

std::string trainReportJson(const TrainReport& r);
std::string trainReportText(const TrainReport& r);

}  // namespace pipecut::runtime
