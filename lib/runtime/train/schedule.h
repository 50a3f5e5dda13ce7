#pragma once
// Training schedules as data: which compute action each rank runs, in which
// order. Pure (no tensors, no torch), so every schedule is checked by
// simulation in unit tests before a tensor moves.
//
// The pipeline is the manifest's stage graph, not a chain: a stage may feed
// several later stages (skip connections) and take inputs from several earlier
// ones. Dependencies of the actions of micro-batch m:
//   F(s,m)  forward:      after F(p,m) for every producer p of s.
//   B(s,m)  full backward: after F(s,m) and the input gradients of every
//           consumer c of s: B(c,m) or I(c,m). The loss stage (no consumers)
//           needs only its own F.
//   I(s,m)  input-gradient backward (zero bubble): as B.
//   W(s,m)  weight-gradient backward: after I(s,m).
// Communication is implied: a value crosses ranks when producer and consumer
// stages live on different ranks; the runner sends right after the action
// that makes it and receives right before the action that needs it, so a
// plan that passes validatePlan() cannot deadlock (the validator runs every
// rank's list in order, each action waiting only for its dependencies).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/options.h"
#include "support/staging.h"

namespace pipecut::runtime {

// "gpipe", "1f1b", "interleaved-1f1b", "zb1p" ("file" is named, never
// parsed); nullopt for anything else.
std::optional<TrainScheduleKind> parseTrainSchedule(const std::string& name);
const char* trainScheduleName(TrainScheduleKind kind);

enum class ActionType : uint8_t { F, B, I, W };

struct Action {
  ActionType type = ActionType::F;
  uint32_t stage = 0;
  uint32_t microbatch = 0;
  bool operator==(const Action&) const = default;
};

// "2F0": stage 2, forward, micro-batch 0 (torch.distributed.pipelining's spelling).
std::string actionName(const Action& a);

struct TrainPlan {
  TrainScheduleKind kind = TrainScheduleKind::GPipe;
  uint32_t stages = 0, ranks = 0, microbatches = 0;
  std::vector<int> stageRank;                  // per stage: the rank that runs it
  std::vector<std::vector<Action>> perRank;    // per rank: its compute actions in order
  // Backwards split into I and W (zb1p; a file that lists I and W), else
  // one B each.
  bool splitBackward = false;
};

// producers[s]: the stages s receives values from (each < s: stages are in
// topological order). Stage placement:
// - gpipe, 1f1b, zb1p: stage s on rank s * ranks / stages (contiguous blocks,
//   as inference places them; ranks <= stages);
// - interleaved-1f1b: stage s on rank s % ranks (round robin); stages must be
//   a multiple of ranks, at least 2 per rank.
// Orders (each rank, when free, starts a ready action its kind's policy picks,
// simulated with F = 1, B = 2, I = W = 1 ticks; the order of starts is the
// plan, so it is deterministic and never waits on an action that cannot come):
// - gpipe: every forward, then every backward, on every rank.
// - 1f1b: warm-up forwards, then one forward / one backward, then cool-down
//   backwards (a ready B goes first; an F only while its stage holds fewer
//   than stages - s); stage s holds at most (stages - s) micro-batches'
//   activations.
// - interleaved-1f1b: Megatron's order of chunks (forwards of micro-batch
//   groups of `ranks` per local stage in turn; backwards with the local
//   stages reversed), Megatron's warm-up of (stages/ranks - 1) * ranks +
//   2 * (ranks - 1 - r) forwards on rank r (a B only if the next F is not
//   ready), then a ready B first, else an F while the rank holds fewer than
//   warm-up + 1 chunks. So rank r holds at
//   most (stages/ranks - 1) * ranks + 2 * (ranks - 1 - r) + 1 micro-batch
//   chunks: stages + ranks - 1 on rank 0.
// - zb1p: 1F1B with B split into I (input gradients, on the critical path)
//   and W (weight gradients): a ready I first, then an F under 1F1B's cap,
//   else a W. Activations stay until W, so with 1F1B's (stages - s) bound a W
//   is deferred only while its stage is under the cap: the gain is I's
//   shorter critical path (the first gradient reaches stage 0 sooner) and
//   W's filling the cool-down waits.
// Each stage runs its forwards, and its backwards (B, I, W), in micro-batch
// order.
// Throws pipecut::Error (InvalidInput, where "--schedule") when the schedule
// cannot run on this shape: no stages, ranks == 0, ranks > stages,
// microbatches == 0, interleaved without a multiple of ranks stages (at least
// 2 per rank), or a producer that does not come before its consumer.
TrainPlan planTraining(TrainScheduleKind kind, const std::vector<std::vector<uint32_t>>& producers, uint32_t ranks,
                       uint32_t microbatches);

// "" when the plan is valid; else the first violation, e.g. "rank 1 stalls at
// 3B0: it waits for 4B0, which rank 0 runs after 2F5" (rank 0 stalls at 2F5;
// the rank named is one on the wait-for cycle, not one queued behind it).
// Checks: every stage and micro-batch gets exactly one F and either one B or,
// for zb1p only, one I and one W, each on the stage's rank (plan.stageRank);
// every rank's list runs to the end when each action waits for its
// dependencies (no deadlock; this does not depend on durations); under 1f1b
// and zb1p, stage s never holds more than (stages - s) micro-batches between
// F and B / W, and under interleaved-1f1b rank r never holds more than
// (stages/ranks - 1) * ranks + 2 * (ranks - 1 - r) + 1 micro-batch chunks.
std::string validatePlan(const TrainPlan& plan, const std::vector<std::vector<uint32_t>>& producers);

// When each action of a valid plan ends when every rank runs its list in
// order, an action taking the planner's nominal ticks (F 1, B 2, I 1, W 1)
// and starting once the rank's previous action and its dependencies (as
// above) have ended: per rank, per action of its list. Throws Internal for a
// plan that stalls.
std::vector<std::vector<uint64_t>> nominalEndTicks(const TrainPlan& plan,
                                                   const std::vector<std::vector<uint32_t>>& producers);

// The largest number of micro-batches stage s holds at once (F done, B or W
// not yet), when each rank runs its list in order.
std::vector<uint32_t> peakActivations(const TrainPlan& plan);

// One line per rank, e.g. "rank 0: 0F0 0F1 1F0 ...", for the trace and --json.
std::vector<std::string> planText(const TrainPlan& plan);

// torch.distributed.pipelining's action CSV in its compute-only format (what
// _PipelineScheduleRuntime._dump_csv writes and _load_csv reads, and
// torchtitan's pipeline_parallel_schedule_csv): one row per rank, one cell
// per action, "{stage}{F|B|I|W}{microbatch}"; an empty cell is an idle step.
// A stage runs on the rank whose row lists it. Backwards are all B, or all I
// and W. Checked as validatePlan checks a built-in plan (no memory caps:
// the file says what it holds). Throws pipecut::Error (InvalidInput) naming
// `file` and the row and cell, or the first bad action and why.
TrainPlan planFromCsv(const std::string& text, const std::string& file,
                      const std::vector<std::vector<uint32_t>>& producers, uint32_t microbatches);
// The plan in that format (a row per rank, a newline after each).
std::string planCsv(const TrainPlan& plan);
// Whether every cell of `text` is an action or empty: a file planCsv could
// have written (what --dump-schedule may replace).
bool looksLikePlanCsv(const std::string& text);

// --dump-schedule's CSV: replaces only a file whose every cell is an action
// (`inputs`: what the run reads, never replaced).
support::Destination scheduleDestination(const std::string& path, const SessionOptions& o,
                                         const std::vector<std::string>& inputs);

}  // namespace pipecut::runtime
