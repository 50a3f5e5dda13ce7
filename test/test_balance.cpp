// Automatic balancing: the exact partitioner against brute force, and the
// balancer's costs against what carving actually places in each stage.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <random>

#include "driver/load.h"
#include "ir/module_tree.h"
#include "partition/assign.h"
#include "partition/balance.h"
#include "partition/carve.h"
#include "partition/flops.h"
#include "partition/min_max.h"
#include "support/error.h"
#include "test_util.h"

using namespace pipecut;

namespace {

// Every way to cut K units into P ranges: the least heaviest range, then,
// among those within it times 1 + slack, the least cut weight, then the
// lexicographically smallest cuts.
partition::Partition bruteForce(size_t K, size_t P, const partition::RangeCost& cost, const std::vector<double>& w,
                                double slack = 0) {
  std::vector<partition::Partition> all;
  std::vector<size_t> cuts;
  std::function<void(size_t)> rec = [&](size_t from) {
    if (cuts.size() == P - 1) {
      double mx = 0, weight = 0;
      size_t a = 0;
      for (size_t c : cuts) {
        mx = std::max(mx, cost(a, c));
        weight += w[c];
        a = c;
      }
      all.push_back({cuts, std::max(mx, cost(a, K)), weight});
      return;
    }
    for (size_t c = from; c < K; ++c) {
      cuts.push_back(c);
      rec(c + 1);
      cuts.pop_back();
    }
  };
  rec(1);
  double opt = all.front().maxCost;
  for (const auto& p : all) opt = std::min(opt, p.maxCost);
  const partition::Partition* best = nullptr;
  for (const auto& p : all) {
    if (p.maxCost > opt * (1 + slack)) continue;
    if (!best || p.cutWeight < best->cutWeight || (p.cutWeight == best->cutWeight && p.cuts < best->cuts)) best = &p;
  }
  return *best;
}

void requireSame(const partition::Partition& got, const partition::Partition& want) {
  REQUIRE(got.maxCost == want.maxCost);
  REQUIRE(got.cutWeight == want.cutWeight);
  REQUIRE(got.cuts == want.cuts);
}

}  // namespace

TEST_CASE("the min-max partitioner finds what brute force finds", "[balance]") {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 3000; ++trial) {
    size_t K = 1 + rng() % 10, P = 1 + rng() % K;
    // Small integers: many ties, in the maximum and in the cut weights.
    std::vector<double> unit(K), w(K, 0);
    for (auto& c : unit) c = static_cast<double>(rng() % 12);
    for (size_t c = 1; c < K; ++c) w[c] = static_cast<double>(rng() % 5);
    // Half the trials add a "tied tensor": a weight read by two units that
    // counts once in each range holding either, as a union cost does.
    bool tied = trial % 2 == 1;
    size_t t1 = rng() % K, t2 = rng() % K;
    double tiedBytes = static_cast<double>(rng() % 20);
    partition::RangeCost cost = [&](size_t a, size_t b) {
      double s = 0;
      for (size_t u = a; u < b; ++u) s += unit[u];
      if (tied && ((t1 >= a && t1 < b) || (t2 >= a && t2 < b))) s += tiedBytes;
      return s;
    };
    // A third of the trials widen the tie to partitions within 25% of the
    // optimum: the cut weight then decides among unequal heaviest ranges.
    const double slack = trial % 3 == 2 ? 0.25 : 0;
    INFO("trial " << trial << " K=" << K << " P=" << P << " slack=" << slack);
    requireSame(partition::partitionMinMax(K, P, cost, w, slack), bruteForce(K, P, cost, w, slack));
  }
}

TEST_CASE("the any-cost partitioner finds what brute force finds when ends cost", "[balance]") {
  std::mt19937 rng(4321);
  for (int trial = 0; trial < 3000; ++trial) {
    size_t K = 1 + rng() % 10, P = 1 + rng() % K;
    std::vector<double> unit(K), w(K, 0), edge(K + 1, 0);
    for (auto& c : unit) c = static_cast<double>(rng() % 12);
    for (size_t c = 1; c < K; ++c) w[c] = static_cast<double>(rng() % 5);
    // A range pays for what crosses each of its inner ends, so a longer range
    // can cost less (not monotone): the first range also pays for the last
    // range's outputs it receives, as stage 0 does for the final outputs.
    for (size_t c = 1; c < K; ++c) edge[c] = static_cast<double>(rng() % 9);
    double outputs = static_cast<double>(rng() % 6);
    partition::RangeCost cost = [&](size_t a, size_t b) {
      double s = 0;
      for (size_t u = a; u < b; ++u) s += unit[u];
      if (a > 0) s += edge[a] + outputs;
      if (b < K) s += edge[b] + (a == 0 ? outputs : 0);
      return s;
    };
    const double slack = trial % 3 == 2 ? 0.25 : 0;
    INFO("trial " << trial << " K=" << K << " P=" << P << " slack=" << slack);
    requireSame(partition::partitionMinMaxAnyCost(K, P, cost, w, slack), bruteForce(K, P, cost, w, slack));
  }
}

namespace {

struct Loaded {
  pt2::Package pkg;
  ir::ModuleTree tree;
};

Loaded load(const std::string& name) {
  driver::LoadOptions o;
  o.moduleContiguous = true;
  Loaded l{driver::loadNormalized(test::fixture(name), o), {}};
  l.tree = ir::ModuleTree::build(l.pkg.program, l.pkg.liftedTensorBytes());
  return l;
}

partition::BalanceResult balanced(const Loaded& l, int stages, partition::BalanceBy by) {
  partition::BalanceRequest r;
  r.stages = stages;
  r.by = by;
  return partition::balance(l.pkg, l.tree, r);
}

// The manifest carving writes for `spec`, no recomputed copies, no programs.
partition::Carving carveAsPlaced(const Loaded& l, const partition::SplitSpec& spec) {
  partition::CarveOptions co;
  co.recompute = false;
  co.programs = false;
  return partition::carve(l.pkg, partition::assignStages(l.pkg.program, spec, l.tree), co);
}

// Parameter bytes per stage as carving places them.
std::vector<uint64_t> carvedBytes(const Loaded& l, const partition::SplitSpec& spec) {
  std::vector<uint64_t> out;
  for (const auto& st : carveAsPlaced(l, spec).manifest.stages) out.push_back(st.parameterBytes);
  return out;
}

// Bytes per sample the stages send each other, as carving places them.
uint64_t bytesSent(const Loaded& l, const partition::SplitSpec& spec) {
  uint64_t total = 0;
  for (const auto& st : carveAsPlaced(l, spec).manifest.stages) total += st.boundaryBytesPerSample;
  return total;
}

}  // namespace

TEST_CASE("balancing: params costs what carving places, tied weights in every stage", "[balance]") {
  for (const char* name : {"llama_tiny", "gpt2_tied", "cnn_bn"}) {
    Loaded l = load(name);
    for (int stages : {2, 3}) {
      partition::BalanceResult b = balanced(l, stages, partition::BalanceBy::Params);
      INFO(name << " into " << stages << ": " << b.spec.canonical);
      REQUIRE(b.stages.size() == static_cast<size_t>(stages));
      // Read back like a user's spec, it cuts where the balancer chose.
      REQUIRE(b.cutPositions.size() == static_cast<size_t>(stages - 1));
      partition::checkReproduces(b, partition::assignStages(l.pkg.program, b.spec, l.tree));
      std::vector<uint64_t> carved = carvedBytes(l, b.spec);
      for (size_t s = 0; s < carved.size(); ++s) CHECK(b.stages[s].cost == static_cast<double>(carved[s]));
    }
  }
}

TEST_CASE("balancing: params is optimal over every pair of cut candidates", "[balance]") {
  // An oracle independent of the balancer's cost model: carve every 3-stage
  // cut among the candidates the balancer reports, and take the least
  // heaviest stage carving reports. It can only match that, and it must
  // never be worse than the best cut between whole layers.
  Loaded l = load("llama_tiny");
  partition::BalanceResult b = balanced(l, 3, partition::BalanceBy::Params);
  double heaviest = 0;
  for (const auto& s : b.stages) heaviest = std::max(heaviest, s.cost);
  auto bestOver = [&](const std::vector<partition::SplitPoint>& cands) {
    uint64_t best = UINT64_MAX;
    auto str = [](const partition::SplitPoint& p) {
      return "\"" + p.module + "\": \"" + (p.where == partition::SplitWhere::Beginning ? "BEGINNING" : "END") + "\"";
    };
    for (size_t i = 0; i < cands.size(); ++i)
      for (size_t j = i + 1; j < cands.size(); ++j) {
        if (cands[i].module == cands[j].module) continue;
        partition::SplitSpec spec =
            partition::parseSplitSpec("{\"split_points\": {" + str(cands[i]) + ", " + str(cands[j]) + "}}", "t");
        std::vector<uint64_t> carved;
        try {
          carved = carvedBytes(l, spec);
        } catch (const Error&) {
          continue;  // same position twice
        }
        best = std::min(best, *std::max_element(carved.begin(), carved.end()));
      }
    return static_cast<double>(best);
  };
  REQUIRE(b.candidates.size() >= 6);
  CHECK(heaviest == bestOver(b.candidates));
  std::vector<partition::SplitPoint> layers;
  for (const char* m : {"model.layers.0", "model.layers.1", "model.layers.2", "model.layers.3", "model.norm", "lm_head"})
    layers.push_back({m, partition::SplitWhere::Beginning});
  CHECK(heaviest <= bestOver(layers));
}

TEST_CASE("balancing: flops cuts inside a layer where whole layers leave a stage heavier, sending the least near the optimum", "[balance]") {
  // Oracles independent of the balancer's ranges: each stage's FLOPs summed
  // over the nodes assignStages gives it, and the bytes carving sends. Among
  // every single cut the balancer could name, its pick must be within 0.1%
  // of the lightest heaviest stage, send the fewest bytes of those that are,
  // and beat the best cut between whole layers by more than 1% (with 4 layers
  // and a head, no layer boundary halves the model).
  for (const char* name : {"llama_tiny", "gpt2_tied"}) {
    Loaded l = load(name);
    partition::BalanceResult b = balanced(l, 2, partition::BalanceBy::Flops);
    INFO(name << ": " << b.spec.canonical);
    const auto& nodes = l.pkg.program.graph.nodes;
    auto heaviest = [&](const partition::SplitSpec& spec) {
      partition::Assignment a = partition::assignStages(l.pkg.program, spec, l.tree);
      double f[2] = {0, 0};
      for (size_t i = 0; i < nodes.size(); ++i) f[a.stageOf[i]] += partition::nodeFlops(*nodes[i]);
      return std::max(f[0], f[1]);
    };
    auto specOf = [](const partition::SplitPoint& p) {
      return partition::parseSplitSpec("{\"split_points\": {\"" + p.module + "\": \"" +
                                           (p.where == partition::SplitWhere::Beginning ? "BEGINNING" : "END") + "\"}}",
                                       "t");
    };
    std::vector<std::pair<double, uint64_t>> each;  // per candidate: heaviest stage, bytes sent
    double opt = INFINITY, layers = INFINITY;
    for (const partition::SplitPoint& c : b.candidates) {
      partition::SplitSpec spec = specOf(c);
      each.push_back({heaviest(spec), bytesSent(l, spec)});
      opt = std::min(opt, each.back().first);
      // Between whole layers: no numbered segment with more path after it
      // ("model.layers.2", "lm_head"; not "model.layers.2.mlp").
      const std::string m = c.module + ".";
      bool inside = false;
      for (size_t at = 0, dot; (dot = m.find('.', at)) != std::string::npos; at = dot + 1)
        inside |= dot > at && dot + 1 < m.size() &&
                  std::all_of(m.begin() + at, m.begin() + dot, [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
      if (!inside) layers = std::min(layers, each.back().first);
    }
    REQUIRE(b.candidates.size() > 20);  // refined into the layers' children
    const double got = heaviest(b.spec);
    CHECK(got == Approx(std::max(b.stages[0].cost, b.stages[1].cost)).epsilon(1e-9));
    CHECK(got <= opt * 1.001);
    uint64_t fewest = UINT64_MAX;
    for (const auto& [h, bytes] : each)
      if (h <= opt * 1.001) fewest = std::min(fewest, bytes);
    CHECK(bytesSent(l, b.spec) == fewest);
    REQUIRE(layers < INFINITY);
    CHECK(got < layers * 0.99);
  }
}

TEST_CASE("balancing: flops trades a thousandth of the optimum for fewer bytes crossing the cuts", "[balance]") {
  // llama_dynamic into 4: the exact optimum cuts after three MLPs (the
  // residual and the MLP's output cross each cut); within 0.1% of it, cuts
  // before whole layers send the residual alone. Bytes as carving sends them.
  Loaded l = load("llama_dynamic");
  partition::BalanceRequest r;
  r.stages = 4;
  r.by = partition::BalanceBy::Flops;
  partition::BalanceResult loose = partition::balance(l.pkg, l.tree, r);
  r.slack = 0;
  partition::BalanceResult exact = partition::balance(l.pkg, l.tree, r);
  INFO("exact " << exact.spec.canonical << ", within 0.1% " << loose.spec.canonical);
  auto heaviest = [](const partition::BalanceResult& b) {
    double h = 0;
    for (const auto& s : b.stages) h = std::max(h, s.cost);
    return h;
  };
  CHECK(heaviest(loose) >= heaviest(exact));
  CHECK(heaviest(loose) <= heaviest(exact) * 1.001);
  CHECK(bytesSent(l, loose.spec) < bytesSent(l, exact.spec));
  // Params are exact bytes: no slack unless asked.
  partition::BalanceRequest p;
  p.stages = 4;
  partition::BalanceResult params = partition::balance(l.pkg, l.tree, p);
  p.slack = 0;
  CHECK(partition::balance(l.pkg, l.tree, p).spec.canonical == params.spec.canonical);
}

TEST_CASE("balancing: refines level by level where a coarser level cannot help", "[balance]") {
  // llama_tiny timed so that every projection takes 1 ms and the head 3.6:
  // a layer is 7 ms (attention 4, MLP 3). Between whole layers the best of 2
  // stages is 14 | 17.6 ms. A cut at the attention's or the MLP's ends
  // cannot help (moving layer 2's attention over makes 18 | 13.6), but one
  // inside layer 2's attention, after two projections, makes 16 | 15.6.
  Loaded l = load("llama_tiny");
  partition::CostProfile prof;
  prof.file = "synthetic";
  auto endsWith = [](const std::string& s, std::string_view tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  for (const auto& n : l.pkg.program.graph.nodes) {
    const bool linear = n->target == "torch.ops.aten.linear.default";
    double ms = 0.001;
    if (linear && n->modulePath() == "lm_head") ms = 3.6;
    else if (linear && endsWith(n->modulePath(), "_proj")) ms = 1;
    prof.ms[n->label()] = ms;
  }
  partition::BalanceRequest r;
  r.stages = 2;
  r.by = partition::BalanceBy::Time;
  r.profile = &prof;
  partition::BalanceResult b = partition::balance(l.pkg, l.tree, r);
  INFO(b.spec.canonical);
  const double heaviest = std::max(b.stages[0].cost, b.stages[1].cost);
  CHECK(heaviest == Approx(16).margin(0.2));
  CHECK(b.spec.canonical.find("model.layers.2.self_attn.") != std::string::npos);
}

TEST_CASE("balancing: flops counts matmuls from the shapes", "[balance]") {
  Loaded l = load("mlp");
  partition::BalanceResult b = balanced(l, 1, partition::BalanceBy::Flops);
  // Recount the linears by hand: 2 * batch * in * out (+ batch * out for the bias).
  double want = 0;
  for (const auto& n : l.pkg.program.graph.nodes) {
    if (n->target != "torch.ops.aten.linear.default") continue;
    const ir::Value* x = n->inputs[0].arg.value();
    const ir::Value* w = n->inputs[1].arg.value();
    double batch = static_cast<double>(x->meta->sizes[0].value), in = static_cast<double>(w->meta->sizes[1].value),
           out = static_cast<double>(w->meta->sizes[0].value);
    want += 2 * batch * in * out + (n->inputs.size() > 2 ? batch * out : 0);
  }
  REQUIRE(want > 0);
  // Elementwise ops add their output sizes on top; the linears dominate.
  CHECK(b.stages[0].cost >= want);
  CHECK(b.stages[0].cost < want * 1.1);
}

TEST_CASE("balancing: refuses what it cannot do, naming why", "[balance]") {
  Loaded l = load("mlp");
  partition::BalanceRequest r;
  r.by = partition::BalanceBy::Params;
  r.stages = 0;
  CHECK_THROWS_WITH(partition::balance(l.pkg, l.tree, r), Catch::Contains("needs at least 1 stage"));
  r.stages = 1000;
  CHECK_THROWS_WITH(partition::balance(l.pkg, l.tree, r), Catch::Contains("1000 stages need 999 cuts, but the model has only"));
  partition::CostProfile profile;
  profile.file = "p.json";
  r.stages = 2;
  r.by = partition::BalanceBy::Time;
  r.profile = &profile;
  try {
    partition::balance(l.pkg, l.tree, r);
    FAIL("an empty profile was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    CHECK(e.file() == "p.json");
    CHECK_THAT(e.what(), Catch::Contains("no time for node '") && Catch::Contains("profile the one-stage split"));
  }
}
