// A training step's message order (runtime/train/transport.h's
// stepCommOrder): for every schedule on every shape the planner accepts,
// ranks whose communication thread issues it in order and whose worker runs
// its plan in order all finish, and every pair of ranks agrees on the order
// of the messages between them.
//
// Before Catch: c10's logging header defines a CHECK of its own, which
// Catch's then replaces.
#include "runtime/train/transport.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "train_shapes.h"

using namespace pipecut;
using namespace pipecut::runtime;
using test::kAllKinds;
using test::Producers;

namespace {

// Edges of a producer graph, input k of stage s from producers[s][k]; every
// third one carries no gradient (an integer value: no message goes back).
std::vector<TrainEdge> edgesOf(const Producers& producers) {
  std::vector<TrainEdge> edges;
  for (uint32_t s = 0; s < producers.size(); ++s)
    for (uint32_t k = 0; k < producers[s].size(); ++k) {
      TrainEdge e;
      e.id = static_cast<int>(edges.size());
      e.producer = producers[s][k];
      e.consumer = s;
      e.input = k;
      e.carriesGradient = e.id % 3 != 2;
      edges.push_back(e);
    }
  return edges;
}

// Runs every rank as the multi-process trainer does: a worker taking its
// actions in order, each once the messages it receives have arrived, and a
// communication thread taking stepCommOrder's operations in order, a send
// once the worker has made the message, a receive once the peer's thread has
// sent it. "" when both finish on every rank; else where they stall.
std::string runWithCommThreads(const TrainPlan& plan, const std::vector<TrainEdge>& edges) {
  using Msg = std::pair<uint32_t, int>;  // micro-batch, channel
  const size_t R = plan.perRank.size();
  auto channelOf = [&](const TrainMessage& m) { return trainChannel(m, edges.size()); };
  std::vector<std::vector<CommOp>> ops(R);
  for (size_t r = 0; r < R; ++r) ops[r] = stepCommOrder(plan, edges, static_cast<int>(r));
  std::vector<size_t> worker(R, 0), comm(R, 0);
  std::vector<std::set<Msg>> made(R), arrived(R);
  std::set<std::pair<int, Msg>> onWire;  // sent by a rank's thread: (destination, message)
  auto needs = [&](const Action& a) {
    std::vector<Msg> in;
    const int self = plan.stageRank[a.stage];
    for (const auto& e : edges) {
      if (a.type == ActionType::F && e.consumer == a.stage && plan.stageRank[e.producer] != self)
        in.push_back({a.microbatch, channelOf({TrainMessage::Kind::Activation, e.id, a.microbatch})});
      if ((a.type == ActionType::B || a.type == ActionType::I) && e.producer == a.stage && e.carriesGradient &&
          plan.stageRank[e.consumer] != self)
        in.push_back({a.microbatch, channelOf({TrainMessage::Kind::Gradient, e.id, a.microbatch})});
    }
    return in;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < R; ++r) {
      while (worker[r] < plan.perRank[r].size()) {
        const Action& a = plan.perRank[r][worker[r]];
        auto in = needs(a);
        if (!std::all_of(in.begin(), in.end(), [&](const Msg& m) { return arrived[r].count(m) > 0; })) break;
        for (const auto& [m, dst] : messagesSent(a, edges, plan.stageRank)) made[r].insert({m.microbatch, channelOf(m)});
        ++worker[r];
        moved = true;
      }
      while (comm[r] < ops[r].size()) {
        const CommOp& op = ops[r][comm[r]];
        Msg m{static_cast<uint32_t>(op.microbatch), op.channel};
        if (op.send) {
          if (!made[r].count(m)) break;
          onWire.insert({op.peer, m});
        } else {
          if (!onWire.count({static_cast<int>(r), m})) break;
          arrived[r].insert(m);
        }
        ++comm[r];
        moved = true;
      }
    }
  }
  for (size_t r = 0; r < R; ++r)
    if (worker[r] < plan.perRank[r].size() || comm[r] < ops[r].size())
      return "rank " + std::to_string(r) + " stalls at action " + std::to_string(worker[r]) + ", operation " +
             std::to_string(comm[r]);
  return "";
}

}  // namespace

TEST_CASE("a step's message order serves every plan without deadlock", "[train_schedule]") {
  for (uint32_t ranks = 2; ranks <= 4; ++ranks)
    for (uint32_t stages = ranks; stages <= 3 * ranks; ++stages)
      for (uint32_t microbatches : {1u, 3u, 4u, 8u})
        for (int graph = 0; graph < 3; ++graph) {
          const Producers producers = test::graphOf(stages, graph);
          const auto edges = edgesOf(producers);
          for (TrainScheduleKind kind : kAllKinds) {
            if (!test::plannable(kind, stages, ranks)) continue;
            TrainPlan plan = planTraining(kind, producers, ranks, microbatches);
            INFO(trainScheduleName(kind) << " ranks " << ranks << " stages " << stages << " micro-batches "
                                         << microbatches << " graph " << graph);
            REQUIRE(runWithCommThreads(plan, edges) == "");
            // Between two ranks, the sender's sends and the receiver's
            // receives list the same messages in the same order.
            std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int>>> sends, recvs;
            size_t total = 0;
            for (uint32_t r = 0; r < ranks; ++r)
              for (const CommOp& op : stepCommOrder(plan, edges, static_cast<int>(r))) {
                auto& list = op.send ? sends[{static_cast<int>(r), op.peer}] : recvs[{op.peer, static_cast<int>(r)}];
                list.push_back({op.microbatch, op.channel});
                total += op.send;
              }
            CHECK(sends == recvs);
            size_t expected = 0;
            for (const auto& list : plan.perRank)
              for (const Action& a : list) expected += messagesSent(a, edges, plan.stageRank).size();
            CHECK(total == expected);
          }
        }
}
