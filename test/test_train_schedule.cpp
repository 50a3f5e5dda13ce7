// Training schedules (runtime/train/schedule.h): every kind on every shape it
// accepts yields a plan the validator passes (all actions present once, on the
// right rank, no deadlock, memory within the documented bound), 1F1B matches
// the textbook order, zero bubble idles less than 1F1B, and the validator
// names the first thing wrong with hand-broken plans.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "runtime/train/microbatch_seed.h"
#include "runtime/train/schedule.h"
#include "support/error.h"
#include "train_shapes.h"

using namespace pipecut;
using namespace pipecut::runtime;
using test::chainOf;
using test::kAllKinds;
using test::Producers;

namespace {

Action F(uint32_t s, uint32_t m) { return {ActionType::F, s, m}; }
Action B(uint32_t s, uint32_t m) { return {ActionType::B, s, m}; }

std::string orderOf(const std::vector<Action>& actions) {
  std::string text;
  for (const Action& a : actions) text += (text.empty() ? "" : " ") + actionName(a);
  return text;
}

// Idle ticks per rank when each rank runs its list in order and an action
// starts once its dependencies are done (F = 1, B = 2, I = W = 1 ticks, as the
// planner assumes): a rank's finish time minus its busy time.
std::vector<uint64_t> idleTicks(const TrainPlan& plan, const Producers& producers) {
  const uint32_t S = plan.stages;
  Producers consumers(S);
  for (uint32_t s = 0; s < S; ++s)
    for (uint32_t p : producers[s]) consumers[p].push_back(s);
  std::map<std::tuple<int, uint32_t, uint32_t>, uint64_t> end;  // (type, stage, mb) -> finish time
  auto key = [](ActionType t, uint32_t s, uint32_t m) { return std::make_tuple(static_cast<int>(t), s, m); };
  ActionType back = plan.kind == TrainScheduleKind::ZB1P ? ActionType::I : ActionType::B;
  std::vector<size_t> pos(plan.ranks, 0);
  std::vector<uint64_t> clock(plan.ranks, 0), busy(plan.ranks, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (uint32_t r = 0; r < plan.ranks; ++r)
      while (pos[r] < plan.perRank[r].size()) {
        const Action& a = plan.perRank[r][pos[r]];
        std::vector<std::tuple<int, uint32_t, uint32_t>> deps;
        if (a.type == ActionType::F)
          for (uint32_t p : producers[a.stage]) deps.push_back(key(ActionType::F, p, a.microbatch));
        if (a.type == ActionType::B || a.type == ActionType::I) {
          deps.push_back(key(ActionType::F, a.stage, a.microbatch));
          for (uint32_t c : consumers[a.stage]) deps.push_back(key(back, c, a.microbatch));
        }
        if (a.type == ActionType::W) deps.push_back(key(ActionType::I, a.stage, a.microbatch));
        uint64_t startAt = clock[r];
        bool ready = true;
        for (const auto& d : deps) {
          auto it = end.find(d);
          if (it == end.end()) ready = false;
          else startAt = std::max(startAt, it->second);
        }
        if (!ready) break;
        uint64_t length = a.type == ActionType::B ? 2 : 1;
        clock[r] = startAt + length;
        busy[r] += length;
        end[key(a.type, a.stage, a.microbatch)] = clock[r];
        ++pos[r];
        progress = true;
      }
  }
  std::vector<uint64_t> idle(plan.ranks);
  for (uint32_t r = 0; r < plan.ranks; ++r) {
    REQUIRE(pos[r] == plan.perRank[r].size());
    idle[r] = clock[r] - busy[r];
  }
  return idle;
}

// Per kind, the counts and shape facts validatePlan does not restate.
void checkPlan(const TrainPlan& plan, const Producers& producers) {
  INFO(trainScheduleName(plan.kind) << " on " << plan.ranks << " ranks, " << plan.stages << " stages, "
                                    << plan.microbatches << " micro-batches");
  std::string text;
  for (const auto& line : planText(plan)) text += line + "\n";
  INFO(text);
  REQUIRE(validatePlan(plan, producers) == "");
  const uint32_t S = plan.stages, P = plan.ranks, M = plan.microbatches;
  const bool split = plan.kind == TrainScheduleKind::ZB1P;

  // Placement as the header documents it.
  for (uint32_t s = 0; s < S; ++s)
    CHECK(plan.stageRank[s] == static_cast<int>(plan.kind == TrainScheduleKind::Interleaved1F1B
                                                    ? s % P
                                                    : static_cast<uint64_t>(s) * P / S));

  std::map<std::pair<int, uint32_t>, uint32_t> perTypeStage;
  size_t total = 0;
  for (uint32_t r = 0; r < P; ++r) {
    total += plan.perRank[r].size();
    for (const Action& a : plan.perRank[r]) ++perTypeStage[{static_cast<int>(a.type), a.stage}];
  }
  CHECK(total == static_cast<size_t>(S) * M * (split ? 3 : 2));
  for (uint32_t s = 0; s < S; ++s) {
    CHECK(perTypeStage[{static_cast<int>(ActionType::F), s}] == M);
    CHECK(perTypeStage[{static_cast<int>(ActionType::B), s}] == (split ? 0 : M));
    CHECK(perTypeStage[{static_cast<int>(ActionType::I), s}] == (split ? M : 0));
    CHECK(perTypeStage[{static_cast<int>(ActionType::W), s}] == (split ? M : 0));
  }

  // Each stage's forwards, and its backwards, go in micro-batch order.
  std::map<std::pair<int, uint32_t>, uint32_t> next;
  for (const auto& actions : plan.perRank)
    for (const Action& a : actions) CHECK(next[{static_cast<int>(a.type), a.stage}]++ == a.microbatch);

  auto peak = peakActivations(plan);
  if (plan.kind == TrainScheduleKind::OneFOneB || plan.kind == TrainScheduleKind::ZB1P)
    for (uint32_t s = 0; s < S; ++s) CHECK(peak[s] <= S - s);
  if (plan.kind == TrainScheduleKind::GPipe) {
    for (uint32_t s = 0; s < S; ++s) CHECK(peak[s] == M);
    for (const auto& actions : plan.perRank) {
      auto firstBackward = std::find_if(actions.begin(), actions.end(),
                                        [](const Action& a) { return a.type != ActionType::F; });
      CHECK(std::all_of(firstBackward, actions.end(), [](const Action& a) { return a.type == ActionType::B; }));
    }
  }
  if (plan.kind == TrainScheduleKind::Interleaved1F1B)
    for (uint32_t r = 0; r < P; ++r) {
      // Chunks held at once on rank r, along its own order.
      int64_t held = 0, most = 0;
      for (const Action& a : plan.perRank[r]) {
        held += a.type == ActionType::F ? 1 : -1;
        most = std::max(most, held);
      }
      CHECK(most <= static_cast<int64_t>((S / P - 1) * P + 2 * (P - 1 - r) + 1));
      CHECK(most <= static_cast<int64_t>(S + P - 1));
    }
  CHECK(planTraining(plan.kind, producers, P, M).perRank == plan.perRank);  // deterministic
}


}  // namespace

TEST_CASE("every schedule kind plans a valid order on 2 and 4 ranks", "[train_schedule]") {
  const uint32_t ranks = GENERATE(2u, 4u);
  const uint32_t microbatches = GENERATE(1u, 4u, 8u);
  const uint32_t perRank = GENERATE(1u, 2u);
  const uint32_t stages = ranks * perRank;
  const Producers producers = chainOf(stages);
  for (TrainScheduleKind kind : kAllKinds) {
    if (kind == TrainScheduleKind::Interleaved1F1B && perRank < 2) continue;
    checkPlan(planTraining(kind, producers, ranks, microbatches), producers);
  }
}

TEST_CASE("a skip connection from stage 0 to stage 3 plans valid orders", "[train_schedule]") {
  // Stage 0 feeds stages 1 and 3: F(3, m) needs F(0, m) as well, and B(0, m)
  // both B(1, m) and B(3, m). (Stage 3 is downstream of 0 anyway, so the edge
  // changes when actions are ready, not which orders deadlock: see the
  // diamond below for a graph the validator must follow edge by edge.)
  const Producers producers{{}, {0}, {1}, {2, 0}};
  const uint32_t ranks = GENERATE(1u, 2u, 4u);
  const uint32_t microbatches = GENERATE(1u, 3u, 8u);
  for (TrainScheduleKind kind : kAllKinds) {
    if (kind == TrainScheduleKind::Interleaved1F1B && ranks > 2) continue;
    checkPlan(planTraining(kind, producers, ranks, microbatches), producers);
  }
}

TEST_CASE("validatePlan follows the stage graph, not stage numbers", "[train_schedule]") {
  // A diamond: stages 1 and 2 both read stage 0 and feed stage 3, so 2F0 may
  // run before 1F0 on their shared rank; in a chain it would wait for 1F0.
  const Producers diamond{{}, {0}, {0}, {1, 2}};
  TrainPlan plan;
  plan.kind = TrainScheduleKind::GPipe;
  plan.stages = 4;
  plan.ranks = 3;
  plan.microbatches = 1;
  plan.stageRank = {0, 1, 1, 2};
  plan.perRank = {{F(0, 0), B(0, 0)}, {F(2, 0), F(1, 0), B(2, 0), B(1, 0)}, {F(3, 0), B(3, 0)}};
  CHECK(validatePlan(plan, diamond) == "");
  CHECK(validatePlan(plan, chainOf(4)) == "rank 1 stalls at 2F0: it waits for 1F0, which rank 1 runs after 2F0");
  checkPlan(planTraining(TrainScheduleKind::OneFOneB, diamond, 2, 5), diamond);
  checkPlan(planTraining(TrainScheduleKind::ZB1P, diamond, 4, 5), diamond);
}

TEST_CASE("one rank runs every stage", "[train_schedule]") {
  const uint32_t stages = GENERATE(1u, 2u, 4u);
  const uint32_t microbatches = GENERATE(1u, 5u);
  const Producers producers = chainOf(stages);
  for (TrainScheduleKind kind : kAllKinds) {
    if (kind == TrainScheduleKind::Interleaved1F1B && stages < 2) continue;
    TrainPlan plan = planTraining(kind, producers, 1, microbatches);
    CHECK(plan.perRank.size() == 1);
    checkPlan(plan, producers);
  }
}

TEST_CASE("a wide sweep of shapes and graphs plans valid orders", "[train_schedule]") {
  // Odd micro-batch counts (not multiples of the ranks), uneven contiguous
  // blocks and dense graphs: the policies must never stall or overrun memory.
  for (uint32_t ranks = 1; ranks <= 5; ++ranks)
    for (uint32_t stages = ranks; stages <= 3 * ranks; ++stages)
      for (uint32_t microbatches : {1u, 2u, 3u, 5u, 7u, 12u})
        for (int graph = 0; graph < 3; ++graph) {
          const Producers producers = test::graphOf(stages, graph);
          for (TrainScheduleKind kind : kAllKinds) {
            if (!test::plannable(kind, stages, ranks)) continue;
            TrainPlan plan = planTraining(kind, producers, ranks, microbatches);
            INFO(trainScheduleName(kind) << " ranks " << ranks << " stages " << stages << " micro-batches "
                                         << microbatches << " graph " << graph);
            REQUIRE(validatePlan(plan, producers) == "");
          }
        }
}

TEST_CASE("1f1b on 4 ranks with 8 micro-batches is the textbook order", "[train_schedule]") {
  TrainPlan plan = planTraining(TrainScheduleKind::OneFOneB, chainOf(4), 4, 8);
  CHECK(orderOf(plan.perRank[0]) == "0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0F6 0B3 0F7 0B4 0B5 0B6 0B7");
  CHECK(orderOf(plan.perRank[1]) == "1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1F5 1B3 1F6 1B4 1F7 1B5 1B6 1B7");
  CHECK(orderOf(plan.perRank[3]) == "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5 3F6 3B6 3F7 3B7");
  CHECK(peakActivations(plan) == std::vector<uint32_t>{4, 3, 2, 1});
  CHECK(planText(plan)[3] == "rank 3: 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5 3F6 3B6 3F7 3B7");
}

TEST_CASE("gpipe runs every forward, then every backward", "[train_schedule]") {
  TrainPlan plan = planTraining(TrainScheduleKind::GPipe, chainOf(2), 2, 3);
  CHECK(planText(plan) == std::vector<std::string>{"rank 0: 0F0 0F1 0F2 0B0 0B1 0B2", "rank 1: 1F0 1F1 1F2 1B0 1B1 1B2"});
}

TEST_CASE("interleaved 1f1b follows Megatron's chunk order", "[train_schedule]") {
  TrainPlan plan = planTraining(TrainScheduleKind::Interleaved1F1B, chainOf(8), 4, 8);
  CHECK(plan.stageRank == std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3});
  // Warm-up on rank 0: (2 - 1) * 4 + 2 * 3 = 10 forwards, groups of 4
  // micro-batches through stage 0, then stage 4, then stage 0 again.
  std::vector<Action> warmup(plan.perRank[0].begin(), plan.perRank[0].begin() + 10);
  CHECK(orderOf(warmup) == "0F0 0F1 0F2 0F3 4F0 4F1 4F2 4F3 0F4 0F5");
  // The last rank warms up through its first chunk only, then alternates on its last.
  std::vector<Action> last(plan.perRank[3].begin(), plan.perRank[3].begin() + 8);
  CHECK(orderOf(last) == "3F0 3F1 3F2 3F3 7F0 7B0 7F1 7B1");
  // Backwards of a group leave the later chunk first.
  auto firstB = [&](uint32_t r) {
    return *std::find_if(plan.perRank[r].begin(), plan.perRank[r].end(),
                         [](const Action& a) { return a.type == ActionType::B; });
  };
  CHECK(firstB(0) == B(4, 0));
  CHECK(firstB(3) == B(7, 0));
}

TEST_CASE("zb1p splits backwards and idles less than 1f1b", "[train_schedule]") {
  const Producers producers = chainOf(4);
  TrainPlan onef = planTraining(TrainScheduleKind::OneFOneB, producers, 4, 8);
  TrainPlan zb = planTraining(TrainScheduleKind::ZB1P, producers, 4, 8);
  // The same F / backward skeleton as 1F1B, with each B split into I then W.
  CHECK(orderOf(zb.perRank[0]).rfind("0F0 0F1 0F2 0F3 0I0 0W0 0F4 0I1", 0) == 0);
  std::vector<Action> skeleton;
  for (const Action& a : zb.perRank[0])
    if (a.type != ActionType::W) skeleton.push_back(a.type == ActionType::I ? B(a.stage, a.microbatch) : a);
  CHECK(skeleton == onef.perRank[0]);
  // Each weight gradient comes no earlier in rank 0's list than 1F1B's B:
  // W only runs after its I, off the critical path.
  for (uint32_t m = 0; m < 8; ++m) {
    auto at = [](const std::vector<Action>& v, Action a) { return std::find(v.begin(), v.end(), a) - v.begin(); };
    CHECK(at(zb.perRank[0], {ActionType::W, 0, m}) > at(onef.perRank[0], B(0, m)));
  }
  // With I on the critical path the first gradient reaches rank 0 sooner.
  auto idleOneF = idleTicks(onef, producers), idleZb = idleTicks(zb, producers);
  INFO("1f1b idle " << idleOneF[0] << ", zb1p idle " << idleZb[0]);
  CHECK(idleZb[0] < idleOneF[0]);
  uint64_t sumOneF = 0, sumZb = 0;
  for (uint32_t r = 0; r < 4; ++r) {
    sumOneF += idleOneF[r];
    sumZb += idleZb[r];
  }
  CHECK(sumZb < sumOneF);
  CHECK(peakActivations(zb) == std::vector<uint32_t>{4, 3, 2, 1});
}

TEST_CASE("validatePlan names a deadlock's stalled action", "[train_schedule]") {
  // Rank 0 waits on rank 1's 1B0 before it sends 0F1; rank 1 waits on 0F1
  // before it reaches 1B0.
  TrainPlan plan;
  plan.kind = TrainScheduleKind::GPipe;
  plan.stages = 2;
  plan.ranks = 2;
  plan.microbatches = 2;
  plan.stageRank = {0, 1};
  plan.perRank = {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {F(1, 1), F(1, 0), B(1, 0), B(1, 1)}};
  CHECK(validatePlan(plan, chainOf(2)) == "rank 0 stalls at 0B0: it waits for 1B0, which rank 1 runs after 1F1");
  // The dependency is the very action its rank stalls at (waiting for its
  // own later 1F0).
  plan.perRank = {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {B(1, 0), F(1, 0), F(1, 1), B(1, 1)}};
  CHECK(validatePlan(plan, chainOf(2)) == "rank 1 stalls at 1B0: it waits for 1F0, which rank 1 runs after 1B0");
  // Orders need not follow micro-batch order to be valid.
  plan.perRank = {{F(0, 1), F(0, 0), B(0, 0), B(0, 1)}, {F(1, 0), F(1, 1), B(1, 1), B(1, 0)}};
  CHECK(validatePlan(plan, chainOf(2)) == "");

  // Rank 0 runs stages 0 and 2: 0B0 waits for 1B0, which waits for 2B0,
  // queued behind 0B0 on rank 0.
  plan.stages = 3;
  plan.microbatches = 1;
  plan.stageRank = {0, 1, 0};
  plan.perRank = {{F(0, 0), B(0, 0), F(2, 0), B(2, 0)}, {F(1, 0), B(1, 0)}};
  CHECK(validatePlan(plan, chainOf(3)) == "rank 0 stalls at 0B0: it waits for 1B0, where rank 1 stalls");
  // A rank merely queued behind the cycle (rank 0, at 0B0) is not the one named.
  plan.stages = 4;
  plan.ranks = 3;
  plan.stageRank = {0, 1, 2, 1};
  plan.perRank = {{F(0, 0), B(0, 0)}, {F(1, 0), B(1, 0), F(3, 0), B(3, 0)}, {F(2, 0), B(2, 0)}};
  CHECK(validatePlan(plan, chainOf(4)) == "rank 1 stalls at 1B0: it waits for 2B0, where rank 2 stalls");
}

TEST_CASE("validatePlan names missing, duplicate and misplaced actions", "[train_schedule]") {
  const Producers producers = chainOf(4);
  const TrainPlan good = planTraining(TrainScheduleKind::OneFOneB, producers, 2, 4);
  REQUIRE(validatePlan(good, producers) == "");

  TrainPlan missing = good;
  auto& r1 = missing.perRank[1];
  r1.erase(std::find(r1.begin(), r1.end(), B(3, 2)));
  CHECK(validatePlan(missing, producers) == "no rank runs 3B2 (stage 3 is on rank 1)");

  TrainPlan twice = good;
  twice.perRank[0].push_back(F(1, 3));
  CHECK(validatePlan(twice, producers) == "rank 0 runs 1F3 twice");

  TrainPlan misplaced = good;
  auto& r0 = misplaced.perRank[0];
  r0.erase(std::find(r0.begin(), r0.end(), F(0, 1)));
  misplaced.perRank[1].insert(misplaced.perRank[1].begin(), F(0, 1));
  CHECK(validatePlan(misplaced, producers) == "rank 1 runs 0F1, but stage 0 is on rank 0");

  TrainPlan wrongKind = good;
  wrongKind.kind = TrainScheduleKind::ZB1P;
  wrongKind.splitBackward = true;
  CHECK(validatePlan(wrongKind, producers).find(", but zb1p splits every backward into I and W") != std::string::npos);

  TrainPlan outOfRange = good;
  outOfRange.perRank[0].push_back(F(0, 4));
  CHECK(validatePlan(outOfRange, producers) == "rank 0 runs 0F4, but the plan has 4 micro-batches");

  CHECK(validatePlan(good, chainOf(3)) == "the plan has 4 stages, the stage graph 3");
}

TEST_CASE("validatePlan holds 1f1b and interleaved plans to their memory bounds", "[train_schedule]") {
  const Producers producers = chainOf(2);
  // GPipe's order is a valid order, but labelled 1f1b it keeps 4 micro-batches
  // on stage 1, which 1F1B bounds by 1.
  TrainPlan plan = planTraining(TrainScheduleKind::GPipe, producers, 2, 4);
  REQUIRE(validatePlan(plan, producers) == "");
  plan.kind = TrainScheduleKind::OneFOneB;
  CHECK(validatePlan(plan, producers) ==
        "stage 0 holds 3 micro-batches after rank 0's 0F2; 1f1b allows at most 2 (stages - stage)");

  // Round robin on 2 ranks x 2 chunks with GPipe's order (every forward, then
  // every backward): valid, but rank 0 may hold (2 - 1) * 2 + 2 * 1 + 1 = 5 chunks.
  const Producers four = chainOf(4);
  TrainPlan inter;
  inter.kind = TrainScheduleKind::Interleaved1F1B;
  inter.stages = 4;
  inter.ranks = 2;
  inter.microbatches = 4;
  inter.stageRank = {0, 1, 0, 1};
  inter.perRank.resize(2);
  for (uint32_t r = 0; r < 2; ++r) {
    for (uint32_t m = 0; m < 4; ++m)
      for (uint32_t s : {r, r + 2}) inter.perRank[r].push_back(F(s, m));
    for (uint32_t m = 0; m < 4; ++m)
      for (uint32_t s : {r + 2, r}) inter.perRank[r].push_back(B(s, m));
  }
  CHECK(validatePlan(inter, four) ==
        "rank 0 holds 6 micro-batch chunks after 2F2; interleaved-1f1b allows at most 5 on rank 0");
  inter.kind = TrainScheduleKind::GPipe;
  CHECK(validatePlan(inter, four) == "");
}

TEST_CASE("planTraining refuses shapes a schedule cannot run", "[train_schedule]") {
  auto refusal = [](TrainScheduleKind kind, uint32_t stages, uint32_t ranks, uint32_t microbatches) {
    try {
      planTraining(kind, chainOf(stages), ranks, microbatches);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidInput);
      CHECK(e.where() == "--schedule");
      return e.message();
    }
    FAIL("no error");
    return std::string();
  };
  CHECK(refusal(TrainScheduleKind::Interleaved1F1B, 4, 4, 8).find("at least 2 per rank") != std::string::npos);
  CHECK(refusal(TrainScheduleKind::Interleaved1F1B, 6, 4, 8).find("multiple of 4 stages") != std::string::npos);
  CHECK(refusal(TrainScheduleKind::Interleaved1F1B, 1, 1, 8).find("at least 2 per rank") != std::string::npos);
  CHECK(refusal(TrainScheduleKind::OneFOneB, 2, 4, 8).find("cannot place 2 stages on 4 ranks") != std::string::npos);
  CHECK(refusal(TrainScheduleKind::GPipe, 4, 2, 0).find("at least one micro-batch") != std::string::npos);
  CHECK(refusal(TrainScheduleKind::ZB1P, 4, 0, 8).find("at least one rank") != std::string::npos);
  CHECK(refusal(TrainScheduleKind::GPipe, 0, 1, 8).find("no stages") != std::string::npos);
  CHECK_THROWS_AS(planTraining(TrainScheduleKind::GPipe, Producers{{}, {1}}, 1, 1), Error);
}

TEST_CASE("schedule names and action names", "[train_schedule]") {
  for (TrainScheduleKind kind : kAllKinds) CHECK(parseTrainSchedule(trainScheduleName(kind)) == kind);
  CHECK(parseTrainSchedule("1f1b") == TrainScheduleKind::OneFOneB);
  CHECK(parseTrainSchedule("interleaved-1f1b") == TrainScheduleKind::Interleaved1F1B);
  CHECK_FALSE(parseTrainSchedule("1F1B"));
  CHECK_FALSE(parseTrainSchedule(""));
  CHECK_FALSE(parseTrainSchedule("interleaved"));
  CHECK(actionName(F(2, 0)) == "2F0");
  CHECK(actionName({ActionType::B, 12, 7}) == "12B7");
  CHECK(actionName({ActionType::I, 0, 3}) == "0I3");
  CHECK(actionName({ActionType::W, 1, 10}) == "1W10");
}

namespace {

// planFromCsv's refusal of `text` for `producers` and 2 micro-batches.
std::string csvRefusal(const std::string& text, const std::vector<std::vector<uint32_t>>& producers) {
  try {
    planFromCsv(text, "s.csv", producers, 2);
  } catch (const pipecut::Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    CHECK(e.file() == "s.csv");
    return e.what();
  }
  FAIL("accepted: " << text);
  return "";
}

}  // namespace

TEST_CASE("schedules as action CSVs: every built-in plan reads back as itself", "[train_schedule]") {
  for (auto kind : {TrainScheduleKind::GPipe, TrainScheduleKind::OneFOneB, TrainScheduleKind::Interleaved1F1B,
                    TrainScheduleKind::ZB1P})
    for (uint32_t ranks : {1u, 2u, 4u}) {
      const auto producers = chainOf(kind == TrainScheduleKind::Interleaved1F1B ? 2 * ranks : 4);
      TrainPlan plan = planTraining(kind, producers, ranks, 6);
      const std::string csv = planCsv(plan);
      INFO(trainScheduleName(kind) << " on " << ranks << " ranks:\n" << csv);
      CHECK(looksLikePlanCsv(csv));
      TrainPlan back = planFromCsv(csv, "s.csv", producers, 6);
      CHECK(back.kind == TrainScheduleKind::File);
      CHECK(back.perRank == plan.perRank);
      CHECK(back.stageRank == plan.stageRank);
      CHECK(back.splitBackward == plan.splitBackward);
      CHECK(nominalEndTicks(back, producers) == nominalEndTicks(plan, producers));
    }
}

TEST_CASE("schedules as action CSVs: torch's spelling, and refusals naming the action", "[train_schedule]") {
  const auto two = chainOf(2);
  // torch's csv.writer: CRLF, empty cells for idle steps, no final newline needed.
  TrainPlan p = planFromCsv("0F0,0F1,,0B0,0B1\r\n1F0,1B0,1F1,,1B1\r\n", "s.csv", two, 2);
  CHECK(p.ranks == 2);
  CHECK(p.stageRank == std::vector<int>{0, 1});
  CHECK(planText(p)[1] == "rank 1: 1F0 1B0 1F1 1B1");
  CHECK(planFromCsv("0F0, 0I0 ,0W0", "s.csv", chainOf(1), 1).splitBackward);

  CHECK_THAT(csvRefusal("0F0,0X0", two), Catch::Contains("row 1, cell 2: '0X0' is not a compute action"));
  CHECK_THAT(csvRefusal("0F0,0SEND_F0", two), Catch::Contains("is not a compute action"));
  CHECK_THAT(csvRefusal("0F0,F", two), Catch::Contains("row 1, cell 2: 'F' is not an action"));
  CHECK_THAT(csvRefusal("0F0,2F0", two), Catch::Contains("2F0: the pipeline has 2 stages"));
  CHECK_THAT(csvRefusal("0F5", two), Catch::Contains("0F5: the run has 2 micro-batches"));
  CHECK_THAT(csvRefusal("0F0,1F0\n1B0", two), Catch::Contains("row 2, cell 1: 1B0: stage 1 already runs on rank 0"));
  CHECK_THAT(csvRefusal("0F0,0B0,0I1", chainOf(1)), Catch::Contains("mixes full backwards (B) with split ones"));
  CHECK_THAT(csvRefusal("0F0,0F1,0B0,0B1", two), Catch::Contains("stage 1: no row runs it"));
  CHECK_THAT(csvRefusal("", two), Catch::Contains("no actions"));
  // A backward before its forward.
  CHECK_THAT(csvRefusal("0B0,0F0,0F1,0B1\n1F0,1B0,1F1,1B1", two),
             Catch::Contains("not a schedule this pipeline can run: rank 0 stalls at 0B0"));
  // A micro-batch twice.
  CHECK_THAT(csvRefusal("0F0,0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1", two), Catch::Contains("rank 0 runs 0F0 twice"));
  // A deadlock across ranks: rank 0 waits for 1B0, which rank 1 runs after
  // 1F1, which waits for rank 0's 0F1.
  CHECK_THAT(csvRefusal("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0", two), Catch::Contains("stalls at"));
  // One missing.
  CHECK_THAT(csvRefusal("0F0,0F1,0B0\n1F0,1B0,1F1,1B1", two), Catch::Contains("no rank runs 0B1"));
  CHECK_FALSE(looksLikePlanCsv("stage,action\n"));
  CHECK(looksLikePlanCsv("0F0,,1B2\r\n"));
}

TEST_CASE("microbatchSeed: a pure function of (seed, step, stage, micro-batch), 32 bits", "[train_schedule]") {
  // Pinned: these values decide every dropout mask of compiled training, so
  // a change here changes what a resumed run of an older checkpoint draws.
  CHECK(microbatchSeed(0, 0, 0, 0) == 1245563851);
  CHECK(microbatchSeed(0, 1, 0, 0) == 1350726402);
  CHECK(microbatchSeed(7, 3, 1, 2) == 3162938725);
  std::set<int64_t> seen;
  for (uint64_t seed : {0ull, 1ull})
    for (uint64_t step = 0; step < 16; ++step)
      for (uint32_t stage = 0; stage < 4; ++stage)
        for (uint32_t mb = 0; mb < 16; ++mb) {
          const int64_t s = microbatchSeed(seed, step, stage, mb);
          REQUIRE(s >= 0);
          REQUIRE(s < (int64_t{1} << 32));
          seen.insert(s);
        }
  CHECK(seen.size() == 2 * 16 * 4 * 16);  // no two coordinates share a seed
  // Swapped coordinates differ too (a plain sum or xor would not).
  CHECK(microbatchSeed(0, 1, 2, 3) != microbatchSeed(0, 3, 2, 1));
  CHECK(microbatchSeed(0, 0, 1, 0) != microbatchSeed(0, 0, 0, 1));
}
