#pragma once
// What pipecut-run is asked to do, by mode: one set of option types for the
// command line (tools/pipecut-run/options.h), the library's callers and
// every mode. Torch-free and engine-free.
//   SessionOptions    what every mode has: the split, where its stages run,
//                     how ranks meet, what is checked and what is written
//   InputOptions      where the inputs of a forward pass come from
//   InferenceOptions  micro-batched forward passes (runInference), and the
//                     node-by-node profile of a one-stage split (runProfile)
//   TrainOptions      optimizer steps (runTraining)
//   GenerateOptions   token-by-token generation with a KV cache (runGeneration)
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/cpu_matmul.h"
#include "runtime/stage_format.h"
#include "weights/options.h"

namespace pipecut::runtime {

// The built-in training schedules (runtime/train/schedule.h plans them);
// File: a plan read from an action CSV (planFromCsv), not a policy.
enum class TrainScheduleKind { GPipe, OneFOneB, Interleaved1F1B, ZB1P, File };

struct SessionOptions {
  std::string dir;                              // the split directory
  std::vector<std::string> devices = {"cpu"};   // one for all stages, or one per stage
  // A split with --support (the manifest's support_target): where its
  // supported and its other stages run, over --devices ("" keeps it).
  std::string supportedDevice, fallbackDevice;
  int microbatches = 1;                         // per batch (the batch splits along dimension 0)
  std::vector<int> stageRanks;                  // empty: stage i on rank i * world / stages
  double timeoutSeconds = 300;                  // a silent peer counts as failed after this
  std::string backend = "auto";                 // gloo, gloo-strict, nccl, auto (nccl when stages are on CUDA)
  int threads = 0;                              // intra-op threads; 0: the thread policy's (runtime/rank_session.h)
  StageFormat stageFormat = StageFormat::TorchScript;  // which files run: .pt, or .pt2 through NativeRT
  CpuMatmul cpuMatmul = CpuMatmul::Auto;        // TorchScript stages on a CPU, not training (runtime/cpu_matmul.h)
  bool verifyHashes = true;                     // check stage files against the manifest before loading
  std::string expectManifestSha256;             // refuse a split whose manifest.pb hashes otherwise (manifest/directory.h)
  std::string tracePath;                        // a Chrome trace (per rank across processes)
  bool force = false;                           // outputs may replace what pipecut did not write (runtime/outputs.h)
  bool progress = false;                        // a progress line on stderr
  // A weightless split's tensors, bound from the model's checkpoint as each
  // rank loads its own stages (runtime/stage_weights.h).
  weights::BindOptions weights;
};

struct InputOptions {
  std::string inputsPath;   // .safetensors or a torch.save'd tuple/dict
  bool randomInputs = false;
  bool decodeStep = false;  // --profile: one decode step of a KV-cache program (runtime/inputs.h)
  uint64_t seed = 0;
  int64_t batch = 0;        // random inputs: micro-batch size where dimensions are symbolic
  int64_t intHigh = 2;      // random integer inputs lie in [0, intHigh)
};

enum class Schedule {
  GPipe,     // fill-drain: every micro-batch admitted at once
  OneFOneB,  // 1F1B's forward order: at most (number of stages) micro-batches in flight
};

struct InferenceOptions {
  SessionOptions session;
  InputOptions inputs;
  Schedule schedule = Schedule::GPipe;
  std::string checkPath;                   // reference outputs to compare with
  std::optional<double> atol, rtol;        // unset: per-dtype defaults (see runtime/compare.h)
  bool exact = false;                      // --check demands bitwise equality
  int iterations = 1, warmup = 0;
  int queueDepth = 2;                      // micro-batches a stage may hold ahead of time
  std::string outputPath;                  // merged outputs, .safetensors
};

struct OptimizerOptions {
  std::string name = "sgd";        // sgd or adamw
  double lr = 0.01;
  double momentum = 0;             // sgd
  double weightDecay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
};

struct TrainOptions {
  SessionOptions session;
  std::string dataPath;            // input.<i>: dimension 0 holds the steps' batches one after another
  int steps = 0;                   // 0: every step the data holds after the checkpoint's
  TrainScheduleKind schedule = TrainScheduleKind::OneFOneB;
  // --schedule-file: torch.distributed.pipelining's action CSV
  // (runtime/train/schedule.h planFromCsv) instead of `schedule`;
  // --dump-schedule: the plan run, written in that format (rank 0).
  std::string scheduleFile, dumpSchedule;
  OptimizerOptions optimizer;
  std::string saveCheckpoint, loadCheckpoint;
  // --stage-format aoti: random ops (dropout) draw from (seed, step, stage,
  // micro-batch) only (runtime/train/microbatch_seed.h).
  uint64_t seed = 0;
};

enum class Sampling { Greedy, TopP };

struct GenerateOptions {
  SessionOptions session;
  std::string promptsPath;           // JSONL: {"id": ..., "prompt": [token ids]} per line
  int maxNewTokens = 16;             // per sequence
  std::optional<int64_t> eos;        // a sequence ends when it samples this token
  Sampling sampling = Sampling::Greedy;
  double temperature = 1.0, topP = 1.0;  // TopP
  uint64_t seed = 0;                 // TopP: the draws depend on (seed, prompt id, position) only
  int slots = 0;                     // sequence groups in flight (one exported batch each); 0: stages + 1 (1 for one stage)
  int64_t prefillChunk = 0;          // most prompt tokens per step; 0: as many as the program takes
  std::string outputPath;            // JSONL: {"id": ..., "tokens": [...], "finish": "eos"|"length"}
  std::string checkTokensPath;       // JSONL as written: exit 4 on the first token that differs
};

}  // namespace pipecut::runtime
