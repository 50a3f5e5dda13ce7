// The message order of multi-process runs (runtime/comm_schedule.h): both ends
// of every pair of ranks see one sequence, keys respect data dependencies, and
// a simulation of the runner's blocking rules (one communication thread per
// rank, workers with bounded local mailboxes, the 1F1B gate) always finishes.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <tuple>

#include "runtime/comm_schedule.h"

using namespace pipecut;
using namespace pipecut::runtime;

namespace {

// P stages in a chain (output 0 of stage s feeds stage s + 1), plus:
// - a skip connection: stage 0's output 1 feeds stage 2 and the last stage
//   (one output, two consumers);
// - final outputs: the last stage's output 0 and stage 1's output 1 (so a
//   final output leaves a rank other than the last stage's).
Manifest chain(uint32_t P) {
  Manifest m;
  m.stages.resize(P);
  for (uint32_t s = 0; s < P; ++s) m.stages[s].index = s;
  auto connect = [&](uint32_t from, uint32_t out, uint32_t to) {
    Stage& src = m.stages[from];
    if (src.outputs.size() <= out) src.outputs.resize(out + 1);
    StageInput in;
    in.source.kind = ValueSource::Kind::StageOutput;
    in.source.stage = from;
    in.source.output = out;
    m.stages[to].inputs.push_back(in);
    Consumer c;
    c.kind = Consumer::Kind::StageInput;
    c.stage = to;
    c.input = static_cast<uint32_t>(m.stages[to].inputs.size() - 1);
    src.outputs[out].consumers.push_back(c);
  };
  auto finalOutput = [&](uint32_t from, uint32_t out) {
    Stage& src = m.stages[from];
    if (src.outputs.size() <= out) src.outputs.resize(out + 1);
    Consumer c;
    c.kind = Consumer::Kind::UserOutput;
    c.userOutput = static_cast<uint32_t>(m.outputs.size());
    src.outputs[out].consumers.push_back(c);
    UserValue u;
    u.source = ValueSource{ValueSource::Kind::StageOutput, 0, from, out};
    m.outputs.push_back(u);
  };
  for (uint32_t s = 0; s + 1 < P; ++s) connect(s, 0, s + 1);
  if (P >= 3) {
    connect(0, 1, 2);
    connect(0, 1, P - 1);
  }
  finalOutput(P - 1, 0);
  finalOutput(1, 1);
  return m;
}

using Msg = std::pair<int64_t, int>;  // (micro-batch, edge)

std::vector<CommOp> opsOf(const std::vector<CommEdge>& edges, int rank, int64_t total) {
  CommSchedule sched(edges, rank, total);
  std::vector<CommOp> ops;
  for (CommOp op; sched.next(op);) ops.push_back(op);
  return ops;
}

std::pair<int64_t, int> key(const std::vector<CommEdge>& edges, int64_t g, int e) {
  return {g + edges[static_cast<size_t>(e)].producer, e};
}

// Runs the runner's blocking rules to a fixed point; true when every stage ran
// every micro-batch and every message arrived. A worker computes micro-batch
// g once it has g - 1 done, every input of g (local: put in its mailbox;
// remote: delivered by its rank's communication thread) and, for stage 0
// under 1F1B, every final output of g - P; it then routes its outputs one
// consumer at a time in edge order: a local put waits while the consumer has
// not taken g - window, a remote one is handed to the communication thread.
// That thread walks its operations in order: a send waits for its hand-off, a
// receive for the peer's send, and a delivery never waits.
bool simulate(const Manifest& m, const std::vector<int>& stageRank, int world, int64_t total, int64_t window,
              bool oneFOneB) {
  auto edges = commEdges(m, stageRank);
  const size_t P = m.stages.size();
  std::vector<std::vector<int>> outEdges(P);
  for (const auto& e : edges) outEdges[e.producer].push_back(e.id);
  std::vector<int64_t> taken(P, 0);          // micro-batches a stage has started
  std::vector<int64_t> routed(P, 0);         // edges routed of the current micro-batch
  std::vector<bool> computing(P, false);
  std::set<Msg> arrived, handed, sent;       // arrived: in the consumer's mailbox or rank 0's sink
  std::vector<std::vector<CommOp>> ops(static_cast<size_t>(world));
  std::vector<size_t> pc(static_cast<size_t>(world), 0);
  for (int r = 0; r < world; ++r) ops[static_cast<size_t>(r)] = opsOf(edges, r, total);
  auto finalsDone = [&](int64_t g) {
    for (const auto& e : edges)
      if (e.consumer.kind == Consumer::Kind::UserOutput && !arrived.count({g, e.id})) return false;
    return true;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t s = 0; s < P; ++s) {
      int64_t g = taken[s] - (computing[s] ? 1 : 0);
      if (!computing[s]) {
        if (g >= total) continue;
        bool ready = true;
        for (const auto& e : edges)
          if (e.consumer.kind == Consumer::Kind::StageInput && e.consumer.stage == s) ready &= arrived.count({g, e.id}) > 0;
        if (s == 0 && oneFOneB && g >= static_cast<int64_t>(P)) ready &= finalsDone(g - static_cast<int64_t>(P));
        if (!ready) continue;
        taken[s]++;
        computing[s] = true;
        routed[s] = 0;
        progress = true;
      }
      while (routed[s] < static_cast<int64_t>(outEdges[s].size())) {
        const CommEdge& e = edges[static_cast<size_t>(outEdges[s][static_cast<size_t>(routed[s])])];
        if (e.crossesRanks()) {
          handed.insert({g, e.id});
        } else if (e.consumer.kind == Consumer::Kind::StageInput) {
          if (taken[e.consumer.stage] < g - window + 1) break;  // the mailbox is full
          arrived.insert({g, e.id});
        } else {
          arrived.insert({g, e.id});
        }
        routed[s]++;
        progress = true;
      }
      if (routed[s] == static_cast<int64_t>(outEdges[s].size())) computing[s] = false;
    }
    for (int r = 0; r < world; ++r) {
      auto& i = pc[static_cast<size_t>(r)];
      while (i < ops[static_cast<size_t>(r)].size()) {
        const CommOp& op = ops[static_cast<size_t>(r)][i];
        Msg msg{op.microbatch, op.channel};
        if (op.send) {
          if (!handed.count(msg)) break;
          sent.insert(msg);
        } else {
          if (!sent.count(msg)) break;
          arrived.insert(msg);
        }
        ++i;
        progress = true;
      }
    }
  }
  for (size_t s = 0; s < P; ++s)
    if (taken[s] != total || computing[s]) return false;
  for (int r = 0; r < world; ++r)
    if (pc[static_cast<size_t>(r)] != ops[static_cast<size_t>(r)].size()) return false;
  return true;
}

}  // namespace

TEST_CASE("comm schedule: both ends of every pair see one sequence; keys follow dependencies", "[comm]") {
  for (uint32_t P : {2u, 3u, 4u}) {
    Manifest m = chain(P);
    // One stage per rank; several per rank (contiguous and interleaved); a
    // placement whose stage 0 is not on rank 0.
    std::vector<std::pair<int, std::vector<int>>> placements;
    std::vector<int> one, two, alternate, shifted;
    for (uint32_t s = 0; s < P; ++s) {
      one.push_back(static_cast<int>(s));
      two.push_back(static_cast<int>(s * 2 / P));
      alternate.push_back(static_cast<int>(s % 2));
      shifted.push_back(static_cast<int>((s + 1) % P));
    }
    placements = {{static_cast<int>(P), one}, {2, two}, {2, alternate}, {static_cast<int>(P), shifted}};
    for (const auto& [world, stageRank] : placements)
      for (int64_t M : {1, 4, 8}) {
        INFO("P=" << P << " M=" << M << " world=" << world << " placement " << stageRank[0] << stageRank[P - 1]);
        auto edges = commEdges(m, stageRank);
        for (size_t i = 0; i < edges.size(); ++i) {
          CHECK(edges[i].id == static_cast<int>(i));
          if (i > 0)
            CHECK(std::tie(edges[i - 1].producer, edges[i - 1].output, edges[i - 1].consumerIndex) <
                  std::tie(edges[i].producer, edges[i].output, edges[i].consumerIndex));
        }
        std::map<std::pair<int, int>, std::vector<Msg>> sends, recvs;  // (from, to) -> messages in issue order
        std::set<Msg> all;
        for (int r = 0; r < world; ++r) {
          auto ops = opsOf(edges, r, M);
          for (size_t i = 0; i < ops.size(); ++i) {
            const CommOp& op = ops[i];
            const CommEdge& e = edges[static_cast<size_t>(op.channel)];
            CHECK(e.crossesRanks());
            CHECK((op.send ? e.srcRank : e.dstRank) == r);
            CHECK(op.wave == key(edges, op.microbatch, op.channel).first);
            if (i > 0) CHECK(key(edges, ops[i - 1].microbatch, ops[i - 1].channel) < key(edges, op.microbatch, op.channel));
            if (op.send) sends[{r, op.peer}].push_back({op.microbatch, op.channel});
            else recvs[{op.peer, r}].push_back({op.microbatch, op.channel});
            all.insert({op.microbatch, op.channel});
          }
        }
        CHECK(sends == recvs);
        size_t crossing = 0;
        for (const auto& e : edges) crossing += e.crossesRanks();
        CHECK(all.size() == crossing * static_cast<size_t>(M));
        // A message's key is above the keys of everything its producer waits
        // for: its inputs of this micro-batch, its own previous micro-batch,
        // and (stage 0, 1F1B) the final outputs of micro-batch g - P.
        for (int64_t g = 0; g < M; ++g)
          for (const auto& e : edges) {
            auto k = key(edges, g, e.id);
            for (const auto& d : edges) {
              if (d.consumer.kind == Consumer::Kind::StageInput && d.consumer.stage == e.producer)
                CHECK(key(edges, g, d.id) < k);
              if (d.producer == e.producer && g > 0) CHECK(key(edges, g - 1, d.id) < k);
              if (e.producer == 0 && d.consumer.kind == Consumer::Kind::UserOutput && g >= P)
                CHECK(key(edges, g - P, d.id) < k);
            }
          }
      }
  }
}

TEST_CASE("comm schedule: the runner's blocking rules never deadlock", "[comm]") {
  for (uint32_t P : {2u, 3u, 4u, 6u}) {
    Manifest m = chain(P);
    std::vector<std::vector<int>> placements(3);
    for (uint32_t s = 0; s < P; ++s) {
      placements[0].push_back(static_cast<int>(s));
      placements[1].push_back(static_cast<int>(s * 2 / P));
      // Stage 0 and the last stage share rank 0, the rest on rank 1: the skip
      // connection into the last stage is local, the chain's input to it remote.
      placements[2].push_back(s == 0 || s == P - 1 ? 0 : 1);
    }
    for (const auto& stageRank : placements) {
      int world = *std::max_element(stageRank.begin(), stageRank.end()) + 1;
      for (int64_t M : {1, 4, 8})
        for (bool oneFOneB : {false, true}) {
          INFO("P=" << P << " M=" << M << " world=" << world << " 1f1b=" << oneFOneB);
          // The runner's local mailboxes hold at least P micro-batches in a
          // multi-process run (Engine::mailboxWindow).
          CHECK(simulate(m, stageRank, world, M, static_cast<int64_t>(P), oneFOneB));
        }
    }
  }
  // Why at least P: with one stage between a local skip connection's two ends
  // on rank 0 and a window of 1, stage 0 blocks on the full mailbox of the last
  // stage, which waits for a message that comes after stage 0's next send.
  Manifest m = chain(4);
  CHECK_FALSE(simulate(m, {0, 1, 1, 0}, 2, 8, 1, false));
}
