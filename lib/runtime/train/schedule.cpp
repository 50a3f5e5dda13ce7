// Training schedules (runtime/train/schedule.h). Every kind is planned by one
// discrete-event list scheduler: each rank, whenever it is free, starts one of
// its ready actions, chosen by the kind's policy, and the order in which ranks
// start actions is the plan. Choosing only ready actions keeps every plan
// deadlock-free by construction; the policies only decide which ready action
// goes first (and when a rank would rather wait, to bound memory).
#include "runtime/train/schedule.h"

#include <functional>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>

#include <algorithm>
#include <limits>

#include "support/error.h"

namespace pipecut::runtime {

namespace {

using Producers = std::vector<std::vector<uint32_t>>;

constexpr const char* kWhere = "--schedule";

// Planning durations in ticks: a full backward costs about two forwards and
// splits evenly into its input- and weight-gradient halves. Only relative
// sizes matter; they decide which action is ready first, not correctness.
uint64_t duration(ActionType t) { return t == ActionType::B ? 2 : 1; }

bool splitsBackward(TrainScheduleKind k) { return k == TrainScheduleKind::ZB1P; }

std::vector<std::vector<uint32_t>> consumersOf(const Producers& producers) {
  std::vector<std::vector<uint32_t>> consumers(producers.size());
  for (uint32_t s = 0; s < producers.size(); ++s)
    for (uint32_t p : producers[s]) consumers[p].push_back(s);
  return consumers;
}

// "" or why the stage graph is not one the header allows.
std::string graphProblem(const Producers& producers) {
  for (uint32_t s = 0; s < producers.size(); ++s)
    for (uint32_t p : producers[s])
      if (p >= s)
        return "stage " + std::to_string(s) + " takes input from stage " + std::to_string(p) +
               ", which does not come before it";
  return "";
}

std::vector<int> placeStages(TrainScheduleKind kind, uint32_t stages, uint32_t ranks) {
  std::vector<int> stageRank(stages);
  for (uint32_t s = 0; s < stages; ++s)
    stageRank[s] = static_cast<int>(kind == TrainScheduleKind::Interleaved1F1B
                                        ? s % ranks
                                        : static_cast<uint64_t>(s) * ranks / stages);
  return stageRank;
}

// Megatron's warm-up: forwards rank r runs before its first backward, so that
// the first backward of its last chunk has arrived by then.
uint64_t interleavedWarmup(uint32_t stages, uint32_t ranks, uint32_t rank) {
  uint64_t perRank = stages / ranks;
  return (perRank - 1) * ranks + 2ull * (ranks - 1 - rank);
}

// Micro-batch chunks rank r may hold at once under interleaved-1f1b: its
// warm-up plus the one forward of each steady 1F1B pair.
uint64_t interleavedCap(uint32_t stages, uint32_t ranks, uint32_t rank) {
  return interleavedWarmup(stages, ranks, rank) + 1;
}

// Megatron's chunk order: micro-batches go in groups of `ranks`; each group
// passes through the rank's local stages in turn (backwards: in reverse), so
// that a rank's first chunks feed the next rank while it works on its later ones.
std::vector<Action> chunkOrder(ActionType type, const std::vector<uint32_t>& local, uint32_t ranks,
                               uint32_t microbatches) {
  std::vector<Action> order;
  for (uint32_t first = 0; first < microbatches; first += ranks) {
    uint32_t last = std::min(microbatches, first + ranks);
    for (size_t i = 0; i < local.size(); ++i) {
      uint32_t stage = type == ActionType::F ? local[i] : local[local.size() - 1 - i];
      for (uint32_t m = first; m < last; ++m) order.push_back({type, stage, m});
    }
  }
  return order;
}

class Planner {
 public:
  Planner(TrainScheduleKind kind, const Producers& producers, uint32_t ranks, uint32_t microbatches)
      : kind_(kind), producers_(producers), consumers_(consumersOf(producers)),
        S_(static_cast<uint32_t>(producers.size())), P_(ranks), M_(microbatches),
        back_(splitsBackward(kind) ? ActionType::I : ActionType::B) {
    plan_.kind = kind;
    plan_.splitBackward = splitsBackward(kind);
    plan_.stages = S_;
    plan_.ranks = P_;
    plan_.microbatches = M_;
    plan_.stageRank = placeStages(kind, S_, P_);
    plan_.perRank.assign(P_, {});
    local_.assign(P_, {});
    for (uint32_t s = 0; s < S_; ++s) local_[plan_.stageRank[s]].push_back(s);
    size_t cells = static_cast<size_t>(S_) * M_;
    doneF_.assign(cells, 0);
    doneBack_.assign(cells, 0);
    nextF_.assign(S_, 0);
    nextBack_.assign(S_, 0);
    nextW_.assign(S_, 0);
    held_.assign(S_, 0);
    rankHeld_.assign(P_, 0);
    forwardsStarted_.assign(P_, 0);
    if (kind == TrainScheduleKind::Interleaved1F1B) {
      fseq_.resize(P_);
      bseq_.resize(P_);
      fpos_.assign(P_, 0);
      bpos_.assign(P_, 0);
      for (uint32_t r = 0; r < P_; ++r) {
        fseq_[r] = chunkOrder(ActionType::F, local_[r], P_, M_);
        bseq_[r] = chunkOrder(ActionType::B, local_[r], P_, M_);
      }
    }
  }

  TrainPlan run() {
    const uint64_t none = std::numeric_limits<uint64_t>::max();
    std::vector<std::optional<Action>> running(P_);
    std::vector<uint64_t> endAt(P_, none);
    size_t total = static_cast<size_t>(S_) * M_ * (splitsBackward(kind_) ? 3 : 2), finished = 0;
    uint64_t t = 0;
    while (finished < total) {
      for (uint32_t r = 0; r < P_; ++r)
        if (running[r] && endAt[r] == t) {
          finish(*running[r]);
          running[r].reset();
          ++finished;
        }
      // Starts at one tick cannot affect each other (every action lasts at
      // least a tick), so visiting ranks in index order loses nothing.
      for (uint32_t r = 0; r < P_; ++r)
        if (!running[r])
          if (auto a = choose(r)) {
            start(r, *a);
            running[r] = a;
            endAt[r] = t + duration(a->type);
          }
      uint64_t next = none;
      for (uint32_t r = 0; r < P_; ++r)
        if (running[r]) next = std::min(next, endAt[r]);
      if (next == none) {
        if (finished < total)
          internalError(kWhere, std::string(trainScheduleName(kind_)) + " planner stalled after " +
                                    std::to_string(finished) + " of " + std::to_string(total) +
                                    " actions (a bug in the policy)");
        break;
      }
      t = next;
    }
    return std::move(plan_);
  }

 private:
  size_t cell(uint32_t s, uint32_t m) const { return static_cast<size_t>(s) * M_ + m; }

  bool ready(const Action& a) const {
    switch (a.type) {
      case ActionType::F:
        return std::all_of(producers_[a.stage].begin(), producers_[a.stage].end(),
                           [&](uint32_t p) { return doneF_[cell(p, a.microbatch)]; });
      case ActionType::B:
      case ActionType::I:
        return doneF_[cell(a.stage, a.microbatch)] &&
               std::all_of(consumers_[a.stage].begin(), consumers_[a.stage].end(),
                           [&](uint32_t c) { return doneBack_[cell(c, a.microbatch)]; });
      case ActionType::W:
        return doneBack_[cell(a.stage, a.microbatch)];
    }
    return false;
  }

  // 1F1B's bound: stage s holds at most (stages - s) micro-batches, which is
  // what it takes for the first one to come back from the loss stage.
  bool underStageCap(uint32_t s) const { return held_[s] < S_ - s; }

  // The next forward of the rank's stages that may start. Lower micro-batches
  // first (they are closest to coming back), then earlier stages.
  std::optional<Action> pickForward(uint32_t r, bool capped) const {
    std::optional<Action> best;
    for (uint32_t s : local_[r]) {
      if (nextF_[s] >= M_ || (capped && !underStageCap(s))) continue;
      Action a{ActionType::F, s, nextF_[s]};
      if (ready(a) && (!best || a.microbatch < best->microbatch)) best = a;
    }
    return best;
  }

  // The next ready backward (B, or I under zb1p): lower micro-batches first,
  // then later stages, which is the way gradients flow.
  std::optional<Action> pickBackward(uint32_t r) const {
    std::optional<Action> best;
    for (auto it = local_[r].rbegin(); it != local_[r].rend(); ++it) {
      uint32_t s = *it;
      if (nextBack_[s] >= M_) continue;
      Action a{back_, s, nextBack_[s]};
      if (ready(a) && (!best || a.microbatch < best->microbatch)) best = a;
    }
    return best;
  }

  std::optional<Action> pickWeight(uint32_t r) const {
    std::optional<Action> best;
    for (auto it = local_[r].rbegin(); it != local_[r].rend(); ++it) {
      uint32_t s = *it;
      if (nextW_[s] >= M_) continue;
      Action a{ActionType::W, s, nextW_[s]};
      if (ready(a) && (!best || a.microbatch < best->microbatch)) best = a;
    }
    return best;
  }

  bool forwardsLeft(uint32_t r) const {
    return std::any_of(local_[r].begin(), local_[r].end(), [&](uint32_t s) { return nextF_[s] < M_; });
  }

  std::optional<Action> chooseInterleaved(uint32_t r) const {
    std::optional<Action> f, b;
    if (fpos_[r] < fseq_[r].size() && ready(fseq_[r][fpos_[r]])) f = fseq_[r][fpos_[r]];
    if (bpos_[r] < bseq_[r].size() && ready(bseq_[r][bpos_[r]])) b = bseq_[r][bpos_[r]];
    // Warm-up fills the pipeline; a backward ready that early (few
    // micro-batches) goes rather than leaving the rank idle.
    if (forwardsStarted_[r] < interleavedWarmup(S_, P_, r)) return f ? f : b;
    if (b) return b;
    if (f && rankHeld_[r] < interleavedCap(S_, P_, r)) return f;
    return std::nullopt;
  }

  std::optional<Action> choose(uint32_t r) const {
    switch (kind_) {
      case TrainScheduleKind::GPipe:
        return forwardsLeft(r) ? pickForward(r, false) : pickBackward(r);
      case TrainScheduleKind::OneFOneB:
        if (auto b = pickBackward(r)) return b;
        return pickForward(r, true);
      case TrainScheduleKind::ZB1P:
        // Input gradients are on the critical path; weight gradients only
        // fill time the rank would otherwise spend waiting. W frees the
        // activations, so under the cap a pending W also unblocks the next F.
        if (auto i = pickBackward(r)) return i;
        if (auto f = pickForward(r, true)) return f;
        return pickWeight(r);
      case TrainScheduleKind::Interleaved1F1B:
        return chooseInterleaved(r);
    }
    return std::nullopt;
  }

  void start(uint32_t r, const Action& a) {
    plan_.perRank[r].push_back(a);
    switch (a.type) {
      case ActionType::F:
        ++nextF_[a.stage];
        ++held_[a.stage];
        ++rankHeld_[r];
        ++forwardsStarted_[r];
        if (!fseq_.empty()) ++fpos_[r];
        break;
      case ActionType::B:
      case ActionType::I:
        ++nextBack_[a.stage];
        if (!bseq_.empty()) ++bpos_[r];
        if (a.type == ActionType::B) {
          --held_[a.stage];
          --rankHeld_[r];
        }
        break;
      case ActionType::W:
        ++nextW_[a.stage];
        --held_[a.stage];
        --rankHeld_[r];
        break;
    }
  }

  void finish(const Action& a) {
    if (a.type == ActionType::F) doneF_[cell(a.stage, a.microbatch)] = 1;
    if (a.type == ActionType::B || a.type == ActionType::I) doneBack_[cell(a.stage, a.microbatch)] = 1;
  }

  TrainScheduleKind kind_;
  const Producers& producers_;
  std::vector<std::vector<uint32_t>> consumers_;
  uint32_t S_, P_, M_;
  ActionType back_;
  TrainPlan plan_;
  std::vector<std::vector<uint32_t>> local_;  // per rank: its stages, ascending
  std::vector<uint8_t> doneF_, doneBack_;     // per (stage, micro-batch): finished
  std::vector<uint32_t> nextF_, nextBack_, nextW_, held_;
  std::vector<uint64_t> rankHeld_, forwardsStarted_;
  std::vector<std::vector<Action>> fseq_, bseq_;  // interleaved only: Megatron's order per rank
  std::vector<size_t> fpos_, bpos_;
};

// The actions a must wait for, in a fixed order (producers / own F first).
std::vector<Action> dependencies(const Action& a, ActionType back, const Producers& producers,
                                 const std::vector<std::vector<uint32_t>>& consumers) {
  std::vector<Action> deps;
  switch (a.type) {
    case ActionType::F:
      for (uint32_t p : producers[a.stage]) deps.push_back({ActionType::F, p, a.microbatch});
      break;
    case ActionType::B:
    case ActionType::I:
      deps.push_back({ActionType::F, a.stage, a.microbatch});
      for (uint32_t c : consumers[a.stage]) deps.push_back({back, c, a.microbatch});
      break;
    case ActionType::W:
      deps.push_back({ActionType::I, a.stage, a.microbatch});
      break;
  }
  return deps;
}

size_t typeIndex(ActionType t) { return static_cast<size_t>(t); }

// An action's slot in a table of every (type, stage, micro-batch): 4 * S * M entries.
size_t actionSlot(const Action& a, uint32_t S, uint32_t M) {
  return typeIndex(a.type) * S * M + static_cast<size_t>(a.stage) * M + a.microbatch;
}

}  // namespace

std::optional<TrainScheduleKind> parseTrainSchedule(const std::string& name) {
  for (auto k : {TrainScheduleKind::GPipe, TrainScheduleKind::OneFOneB, TrainScheduleKind::Interleaved1F1B,
                 TrainScheduleKind::ZB1P})
    if (name == trainScheduleName(k)) return k;
  return std::nullopt;
}

const char* trainScheduleName(TrainScheduleKind kind) {
  switch (kind) {
    case TrainScheduleKind::GPipe: return "gpipe";
    case TrainScheduleKind::OneFOneB: return "1f1b";
    case TrainScheduleKind::Interleaved1F1B: return "interleaved-1f1b";
    case TrainScheduleKind::ZB1P: return "zb1p";
    case TrainScheduleKind::File: return "file";
  }
  return "?";
}

std::string actionName(const Action& a) {
  static constexpr char letters[] = {'F', 'B', 'I', 'W'};
  return std::to_string(a.stage) + letters[typeIndex(a.type)] + std::to_string(a.microbatch);
}

TrainPlan planTraining(TrainScheduleKind kind, const Producers& producers, uint32_t ranks, uint32_t microbatches) {
  const std::string name = trainScheduleName(kind);
  const auto stages = static_cast<uint32_t>(producers.size());
  if (kind == TrainScheduleKind::File) internalError(kWhere, "a file's plan is read (planFromCsv), not planned");
  if (stages == 0) invalidInput(kWhere, "the pipeline has no stages to schedule");
  if (ranks == 0) invalidInput(kWhere, name + " needs at least one rank");
  if (microbatches == 0) invalidInput(kWhere, name + " needs at least one micro-batch");
  if (ranks > stages)
    invalidInput(kWhere, name + " cannot place " + std::to_string(stages) + " stages on " + std::to_string(ranks) +
                             " ranks: every rank needs a stage (split into at least " + std::to_string(ranks) +
                             " stages, or run fewer ranks)");
  if (kind == TrainScheduleKind::Interleaved1F1B && (stages % ranks != 0 || stages / ranks < 2))
    invalidInput(kWhere, name + " needs a multiple of " + std::to_string(ranks) +
                             " stages, at least 2 per rank, to place round robin on " + std::to_string(ranks) +
                             " ranks; the split has " + std::to_string(stages) +
                             " (use 1f1b, or split into " + std::to_string(2 * ranks) + " stages)");
  if (auto problem = graphProblem(producers); !problem.empty()) invalidInput(kWhere, problem);
  return Planner(kind, producers, ranks, microbatches).run();
}

std::string validatePlan(const TrainPlan& plan, const Producers& producers) {
  const uint32_t S = plan.stages, P = plan.ranks, M = plan.microbatches;
  const std::string kindName = trainScheduleName(plan.kind);
  if (producers.size() != S)
    return "the plan has " + std::to_string(S) + " stages, the stage graph " + std::to_string(producers.size());
  if (auto problem = graphProblem(producers); !problem.empty()) return problem;
  if (P == 0 || M == 0) return "the plan has no ranks or no micro-batches";
  if (plan.perRank.size() != P) return "the plan lists actions for " + std::to_string(plan.perRank.size()) +
                                       " ranks, not " + std::to_string(P);
  if (plan.stageRank.size() != S) return "the plan places " + std::to_string(plan.stageRank.size()) +
                                         " stages, not " + std::to_string(S);
  for (uint32_t s = 0; s < S; ++s)
    if (plan.stageRank[s] < 0 || static_cast<uint32_t>(plan.stageRank[s]) >= P)
      return "stage " + std::to_string(s) + " is placed on rank " + std::to_string(plan.stageRank[s]) +
             ", outside 0.." + std::to_string(P - 1);
  const bool split = plan.splitBackward;
  const ActionType back = split ? ActionType::I : ActionType::B;

  // Each (type, stage, micro-batch) at most once, on its stage's rank.
  auto cell = [&](const Action& a) { return actionSlot(a, S, M); };
  std::vector<uint8_t> seen(4ull * S * M, 0);
  for (uint32_t r = 0; r < P; ++r)
    for (const Action& a : plan.perRank[r]) {
      const std::string who = "rank " + std::to_string(r) + " runs " + actionName(a);
      if (a.stage >= S) return who + ", but the pipeline has " + std::to_string(S) + " stages";
      if (a.microbatch >= M) return who + ", but the plan has " + std::to_string(M) + " micro-batches";
      if (split && a.type == ActionType::B) return who + ", but " + kindName + " splits every backward into I and W";
      if (!split && a.type != ActionType::F && a.type != ActionType::B)
        return who + ", but " + (plan.kind == TrainScheduleKind::File ? std::string("the file's other backwards are B")
                                                                      : std::string("only zb1p splits backwards into I and W"));
      if (plan.stageRank[a.stage] != static_cast<int>(r))
        return who + ", but stage " + std::to_string(a.stage) + " is on rank " +
               std::to_string(plan.stageRank[a.stage]);
      if (seen[cell(a)]++) return who + " twice";
    }
  std::vector<ActionType> required{ActionType::F};
  if (split) required.insert(required.end(), {ActionType::I, ActionType::W});
  else required.push_back(ActionType::B);
  for (uint32_t s = 0; s < S; ++s)
    for (uint32_t m = 0; m < M; ++m)
      for (ActionType t : required)
        if (Action a{t, s, m}; !seen[cell(a)])
          return "no rank runs " + actionName(a) + " (stage " + std::to_string(s) + " is on rank " +
                 std::to_string(plan.stageRank[s]) + ")";

  // Every rank runs its list strictly in order; an action starts once its
  // dependencies are done, whatever rank ran them. Whether this finishes does
  // not depend on durations, so running to a fixed point decides deadlock.
  const auto consumers = consumersOf(producers);
  std::vector<uint8_t> done(4ull * S * M, 0);
  std::vector<size_t> pos(P, 0);
  auto depsDone = [&](const Action& a) {
    for (const Action& d : dependencies(a, back, producers, consumers))
      if (!done[cell(d)]) return false;
    return true;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (uint32_t r = 0; r < P; ++r)
      while (pos[r] < plan.perRank[r].size() && depsDone(plan.perRank[r][pos[r]])) {
        done[cell(plan.perRank[r][pos[r]++])] = 1;
        progress = true;
      }
  }
  // Report a rank on the wait-for cycle, not one merely queued behind it:
  // follow "waits for an action of rank R" from the first stalled rank until
  // a rank repeats.
  auto firstUnmet = [&](uint32_t r) {
    for (const Action& d : dependencies(plan.perRank[r][pos[r]], back, producers, consumers))
      if (!done[cell(d)]) return d;
    return plan.perRank[r][pos[r]];  // unreachable: a stalled action has an unmet dependency
  };
  for (uint32_t first = 0; first < P; ++first) {
    if (pos[first] == plan.perRank[first].size()) continue;
    std::vector<uint8_t> visited(P, 0);
    uint32_t r = first;
    // Every action is listed once, so the rank of an unmet dependency has
    // not reached it yet: it is stalled too.
    while (!visited[r]) {
      visited[r] = 1;
      r = static_cast<uint32_t>(plan.stageRank[firstUnmet(r).stage]);
    }
    const Action& stalled = plan.perRank[r][pos[r]];
    const Action d = firstUnmet(r);
    const int owner = plan.stageRank[d.stage];
    const Action& ownerAt = plan.perRank[owner][pos[owner]];
    std::string msg = "rank " + std::to_string(r) + " stalls at " + actionName(stalled) + ": it waits for " +
                      actionName(d);
    if (ownerAt == d) return msg + ", where rank " + std::to_string(owner) + " stalls";
    return msg + ", which rank " + std::to_string(owner) + " runs after " + actionName(ownerAt);
  }

  // Memory, counted along each rank's own order (which fixes every stage's).
  if (plan.kind == TrainScheduleKind::OneFOneB || plan.kind == TrainScheduleKind::ZB1P) {
    std::vector<uint32_t> held(S, 0);
    for (uint32_t r = 0; r < P; ++r)
      for (const Action& a : plan.perRank[r]) {
        if (a.type == ActionType::F && ++held[a.stage] > S - a.stage)
          return "stage " + std::to_string(a.stage) + " holds " + std::to_string(held[a.stage]) +
                 " micro-batches after rank " + std::to_string(r) + "'s " + actionName(a) + "; " + kindName +
                 " allows at most " + std::to_string(S - a.stage) + " (stages - stage)";
        if (a.type == ActionType::B || a.type == ActionType::W) --held[a.stage];
      }
  }
  if (plan.kind == TrainScheduleKind::Interleaved1F1B) {
    if (S % P != 0 || S / P < 2)
      return kindName + " needs a multiple of " + std::to_string(P) + " stages, at least 2 per rank";
    for (uint32_t r = 0; r < P; ++r) {
      uint64_t held = 0, cap = interleavedCap(S, P, r);
      for (const Action& a : plan.perRank[r]) {
        if (a.type == ActionType::F && ++held > cap)
          return "rank " + std::to_string(r) + " holds " + std::to_string(held) + " micro-batch chunks after " +
                 actionName(a) + "; " + kindName + " allows at most " + std::to_string(cap) + " on rank " +
                 std::to_string(r);
        if (a.type == ActionType::B) --held;
      }
    }
  }
  return "";
}

std::vector<std::vector<uint64_t>> nominalEndTicks(const TrainPlan& plan, const Producers& producers) {
  const uint32_t S = plan.stages, M = plan.microbatches;
  const ActionType back = plan.splitBackward ? ActionType::I : ActionType::B;
  const auto consumers = consumersOf(producers);
  constexpr uint64_t kNotYet = 0;  // every action ends at tick 1 or later
  auto cell = [&](const Action& a) { return actionSlot(a, S, M); };
  std::vector<uint64_t> endOf(4ull * S * M, kNotYet);
  std::vector<std::vector<uint64_t>> ends(plan.perRank.size());
  std::vector<uint64_t> free(plan.perRank.size(), 0);
  size_t left = 0;
  for (const auto& list : plan.perRank) left += list.size();
  while (left > 0) {
    bool moved = false;
    for (size_t r = 0; r < plan.perRank.size(); ++r)
      while (ends[r].size() < plan.perRank[r].size()) {
        const Action& a = plan.perRank[r][ends[r].size()];
        uint64_t start = free[r];
        bool ready = true;
        for (const Action& d : dependencies(a, back, producers, consumers)) {
          ready = ready && endOf[cell(d)] != kNotYet;
          start = std::max(start, endOf[cell(d)]);
        }
        if (!ready) break;
        free[r] = endOf[cell(a)] = start + duration(a.type);
        ends[r].push_back(free[r]);
        --left;
        moved = true;
      }
    if (!moved) internalError(kWhere, "the plan stalls: no rank can start its next action");
  }
  return ends;
}

std::vector<uint32_t> peakActivations(const TrainPlan& plan) {
  std::vector<int64_t> held(plan.stages, 0);
  std::vector<uint32_t> peak(plan.stages, 0);
  for (const auto& actions : plan.perRank)
    for (const Action& a : actions) {
      if (a.stage >= plan.stages) continue;
      if (a.type == ActionType::F) ++held[a.stage];
      if (a.type == ActionType::B || a.type == ActionType::W) --held[a.stage];
      peak[a.stage] = std::max<uint32_t>(peak[a.stage], static_cast<uint32_t>(std::max<int64_t>(0, held[a.stage])));
    }
  return peak;
}

std::vector<std::string> planText(const TrainPlan& plan) {
  std::vector<std::string> lines;
  for (size_t r = 0; r < plan.perRank.size(); ++r) {
    std::string line = "rank " + std::to_string(r) + ":";
    for (const Action& a : plan.perRank[r]) line += " " + actionName(a);
    lines.push_back(std::move(line));
  }
  return lines;
}

namespace {

// One CSV cell: "{stage}{F|B|I|W}{microbatch}", spaces around allowed;
// nullopt for an empty cell; throws `bad` otherwise.
std::optional<Action> parseCell(std::string_view cell, const std::function<void(const std::string&)>& bad) {
  while (!cell.empty() && (cell.front() == ' ' || cell.front() == '\t')) cell.remove_prefix(1);
  while (!cell.empty() && (cell.back() == ' ' || cell.back() == '\t' || cell.back() == '\r')) cell.remove_suffix(1);
  if (cell.empty()) return std::nullopt;
  size_t i = 0;
  auto number = [&](uint32_t& out) {
    const size_t start = i;
    uint64_t v = 0;
    while (i < cell.size() && cell[i] >= '0' && cell[i] <= '9' && i - start < 9) v = v * 10 + static_cast<uint64_t>(cell[i++] - '0');
    if (i == start || (i < cell.size() && cell[i] >= '0' && cell[i] <= '9')) return false;
    out = static_cast<uint32_t>(v);
    return true;
  };
  Action a;
  if (!number(a.stage) || i >= cell.size()) bad("'" + std::string(cell) + "' is not an action ({stage}{F|B|I|W}{microbatch})");
  switch (cell[i++]) {
    case 'F': a.type = ActionType::F; break;
    case 'B': a.type = ActionType::B; break;
    case 'I': a.type = ActionType::I; break;
    case 'W': a.type = ActionType::W; break;
    default:
      bad("'" + std::string(cell) + "' is not a compute action: the compute-only format has F, B, I and W");
  }
  if (!number(a.microbatch) || i != cell.size())
    bad("'" + std::string(cell) + "' is not an action ({stage}{F|B|I|W}{microbatch})");
  return a;
}

std::vector<std::vector<std::string_view>> csvCells(const std::string& text) {
  std::vector<std::vector<std::string_view>> rows;
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    std::vector<std::string_view> cells;
    for (size_t start = 0;;) {
      const size_t comma = line.find(',', start);
      cells.push_back(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    rows.push_back(std::move(cells));
  }
  return rows;
}

}  // namespace

TrainPlan planFromCsv(const std::string& text, const std::string& file, const Producers& producers,
                      uint32_t microbatches) {
  TrainPlan plan;
  plan.kind = TrainScheduleKind::File;
  plan.stages = static_cast<uint32_t>(producers.size());
  plan.microbatches = microbatches;
  plan.stageRank.assign(plan.stages, -1);
  bool anyB = false, anySplit = false;
  const auto rows = csvCells(text);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<Action> list;
    for (size_t c = 0; c < rows[r].size(); ++c) {
      const std::string where = "row " + std::to_string(r + 1) + ", cell " + std::to_string(c + 1);
      auto bad = [&](const std::string& why) { throw Error(ErrorKind::InvalidInput, file, where, why); };
      std::optional<Action> a = parseCell(rows[r][c], bad);
      if (!a) continue;
      if (a->stage >= plan.stages)
        bad(actionName(*a) + ": the pipeline has " + std::to_string(plan.stages) + " stages");
      if (a->microbatch >= microbatches)
        bad(actionName(*a) + ": the run has " + std::to_string(microbatches) + " micro-batches (-m)");
      int& owner = plan.stageRank[a->stage];
      if (owner >= 0 && owner != static_cast<int>(r))
        bad(actionName(*a) + ": stage " + std::to_string(a->stage) + " already runs on rank " + std::to_string(owner) +
            " (row " + std::to_string(owner + 1) + "); a stage runs on one rank");
      owner = static_cast<int>(r);
      anyB |= a->type == ActionType::B;
      anySplit |= a->type == ActionType::I || a->type == ActionType::W;
      if (anyB && anySplit)
        bad(actionName(*a) + ": the file mixes full backwards (B) with split ones (I, W); use one or the other");
      list.push_back(*a);
    }
    plan.perRank.push_back(std::move(list));
  }
  plan.ranks = static_cast<uint32_t>(plan.perRank.size());
  if (plan.ranks == 0) throw Error(ErrorKind::InvalidInput, file, "", "no actions: one row of actions per rank");
  for (uint32_t s = 0; s < plan.stages; ++s)
    if (plan.stageRank[s] < 0)
      throw Error(ErrorKind::InvalidInput, file, "stage " + std::to_string(s),
                  "no row runs it: the pipeline has " + std::to_string(plan.stages) + " stages");
  plan.splitBackward = anySplit;
  if (std::string why = validatePlan(plan, producers); !why.empty())
    throw Error(ErrorKind::InvalidInput, file, "", "not a schedule this pipeline can run: " + why);
  return plan;
}

std::string planCsv(const TrainPlan& plan) {
  std::string out;
  for (const auto& list : plan.perRank) {
    for (size_t i = 0; i < list.size(); ++i) out += (i ? "," : "") + actionName(list[i]);
    out += "\n";
  }
  return out;
}

bool looksLikePlanCsv(const std::string& text) {
  try {
    for (const auto& row : csvCells(text))
      for (std::string_view cell : row) parseCell(cell, [](const std::string& why) { throw std::runtime_error(why); });
  } catch (const std::runtime_error&) {
    return false;
  }
  return true;
}

support::Destination scheduleDestination(const std::string& path, const SessionOptions& o,
                                         const std::vector<std::string>& inputs) {
  support::Destination d;
  d.path = path;
  d.kind = support::StagedKind::File;
  d.what = "schedule";
  d.inputs.assign(inputs.begin(), inputs.end());
  d.force = o.force;
  d.previousOutput = [](const std::filesystem::path& p) -> std::string {
    const std::string notOurs = "is a file pipecut did not write (not an action CSV)";
    std::error_code ec;
    const auto size = std::filesystem::file_size(p, ec);
    if (ec || size > (1u << 24)) return notOurs;
    std::ifstream in(p, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return in.bad() || !looksLikePlanCsv(text) ? notOurs : "";
  };
  return d;
}

}  // namespace pipecut::runtime
