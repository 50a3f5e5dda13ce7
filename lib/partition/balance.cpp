#include "partition/balance.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "partition/assign.h"
#include "partition/flops.h"
#include "partition/min_max.h"
#include "ir/schedule.h"
#include "support/error.h"
#include "support/dtypes.h"

namespace pipecut::partition {

namespace {

using ir::pathIn;

// "a.b.c" -> "a", "a.b", "a.b.c" (the root "" excluded).
template <class F> void forEachPrefix(const std::string& path, F&& f) {
  if (path.empty()) return;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1)) f(path.substr(0, dot));
  f(path);
}

void collectBodyPaths(const ir::Graph& g, std::vector<const std::string*>& out) {
  for (const auto& n : g.nodes) {
    if (n->isHigherOrder()) {
      for (const ir::Graph* sub : n->subgraphs()) collectBodyPaths(*sub, out);
    } else {
      out.push_back(&n->modulePath());
    }
  }
}

// Where each module's nodes start and end among the top-level nodes (as
// `nodeInModule` sees them, so that BEGINNING/END land exactly there), and
// which modules a cut may not name because a higher-order op's body holds
// only part of them.
struct ModuleSpans {
  std::unordered_map<std::string, std::pair<size_t, size_t>> span;  // first, last node
  std::set<std::string> uncuttable;
  // The cuttable modules, shallowest first, then by name: the order in which
  // they are offered to spell a cut.
  std::vector<std::pair<std::string, std::pair<size_t, size_t>>> spellingOrder;

  explicit ModuleSpans(const ir::Graph& g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = *g.nodes[i];
      std::set<std::string> paths;
      forEachPrefix(n.modulePath(), [&](std::string p) { paths.insert(std::move(p)); });
      if (n.isHigherOrder()) {
        std::vector<const std::string*> body;
        for (const ir::Graph* sub : n.subgraphs()) collectBodyPaths(*sub, body);
        std::map<std::string, size_t> inside;
        for (const std::string* p : body) forEachPrefix(*p, [&](std::string m) { inside[std::move(m)]++; });
        for (const auto& [m, count] : inside) {
          paths.insert(m);
          if (count < body.size() && !pathIn(n.modulePath(), m)) uncuttable.insert(m);
        }
      }
      for (const std::string& p : paths) {
        auto [it, fresh] = span.try_emplace(p, i, i);
        if (!fresh) it->second.second = i;
      }
    }
    for (const auto& entry : span)
      if (!uncuttable.count(entry.first)) spellingOrder.push_back(entry);
    std::sort(spellingOrder.begin(), spellingOrder.end(), [](const auto& a, const auto& b) {
      size_t da = std::count(a.first.begin(), a.first.end(), '.'), db = std::count(b.first.begin(), b.first.end(), '.');
      return da != db ? da < db : a.first < b.first;
    });
  }
};

bool isNumbered(const std::string& path) {
  size_t dot = path.rfind('.');
  std::string last = dot == std::string::npos ? path : path.substr(dot + 1);
  return !last.empty() && std::all_of(last.begin(), last.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The starting granularity: the children of the largest list of numbered
// modules, and the siblings of every module on the path to it.
std::vector<std::string> repeatingGranularity(const ir::ModuleTree& tree) {
  const ir::ModuleInfo* list = nullptr;
  for (const auto& [m, depth] : tree.preorder()) {
    if (m->children.size() < 2 || !std::all_of(m->children.begin(), m->children.end(), isNumbered)) continue;
    if (!list || m->children.size() > list->children.size()) list = m;
  }
  std::set<std::string> spine{""};
  if (list)
    for (std::string p = list->path; !p.empty(); p = ir::parentPath(p)) spine.insert(p);
  std::vector<std::string> units;
  for (const auto& [m, depth] : tree.preorder()) {
    if (!spine.count(m->path)) continue;
    for (const std::string& c : m->children)
      if (!spine.count(c)) units.push_back(c);
  }
  return units;
}

// Per-node costs, and range costs over node positions.
class NodeCosts {
 public:
  NodeCosts(const pt2::Package& pkg, const BalanceRequest& r) : n_(pkg.program.graph.nodes.size()) {
    const ir::Graph& g = pkg.program.graph;
    prefix_.assign(n_ + 1, 0);
    if (r.by == BalanceBy::Params) {
      // A lifted tensor read by one node adds to that node; one read by
      // several (tied weights, shared constants) counts once per range that
      // reads it, as every stage holding it stores a copy.
      std::unordered_map<const ir::Value*, uint64_t> bytes;
      const pt2::TensorIndex tensors(pkg);
      for (const auto& s : pkg.program.inputSpecs)
        if (s.kind == ir::InputKind::Parameter || s.kind == ir::InputKind::Buffer ||
            s.kind == ir::InputKind::TensorConstant)
          if (const ir::Value* v = s.arg.value()) bytes[v] = tensors.bytes(s.target);
      std::unordered_map<const ir::Value*, std::vector<size_t>> readers;
      for (size_t i = 0; i < n_; ++i)
        g.nodes[i]->forEachInputValue([&](const ir::Value* v) {
          if (!bytes.count(v)) return;
          auto& list = readers[v];
          if (list.empty() || list.back() != i) list.push_back(i);
        });
      std::vector<double> own(n_, 0);
      for (auto& [v, list] : readers) {
        if (list.size() == 1) own[list[0]] += static_cast<double>(bytes[v]);
        else shared_.push_back({static_cast<double>(bytes[v]), std::move(list)});
      }
      std::sort(shared_.begin(), shared_.end(), [](const Shared& a, const Shared& b) { return a.readers < b.readers; });
      for (size_t i = 0; i < n_; ++i) prefix_[i + 1] = prefix_[i] + own[i];
      return;
    }
    for (size_t i = 0; i < n_; ++i) {
      const ir::Node& node = *g.nodes[i];
      double c = 0;
      if (r.by == BalanceBy::Flops) {
        try {
          c = nodeFlops(node);
        } catch (const Error& e) {
          invalidInput("node '" + node.label() + "'", e.message());
        }
      } else {
        auto it = r.profile->ms.find(node.label());
        if (it == r.profile->ms.end())
          throw Error(ErrorKind::InvalidInput, r.profile->file, "nodes",
                      "no time for node '" + node.label() + "' (module " +
                          (node.modulePath().empty() ? std::string("(root)") : node.modulePath()) +
                          "); profile the one-stage split of this very model (pipecut-run DIR --profile)");
        c = it->second;
      }
      prefix_[i + 1] = prefix_[i] + c;
    }
  }

  // Cost of nodes [a, b).
  double range(size_t a, size_t b) const {
    double c = prefix_[b] - prefix_[a];
    for (const Shared& s : shared_) {
      auto it = std::lower_bound(s.readers.begin(), s.readers.end(), a);
      if (it != s.readers.end() && *it < b) c += s.bytes;
    }
    return c;
  }

 private:
  struct Shared {
    double bytes;
    std::vector<size_t> readers;  // ascending node positions
  };
  size_t n_;
  std::vector<double> prefix_;
  std::vector<Shared> shared_;
};

// Bytes of a tensor at the example shapes; per sample leaves out dimension 0.
uint64_t valueBytes(const ir::Value* v, bool perSample) {
  if (!v->meta) return 0;
  const support::DType* d = support::dtypeFromCode(v->meta->dtype);
  uint64_t bytes = d ? static_cast<uint64_t>(d->itemSize) : 0;
  for (size_t k = perSample ? 1 : 0; k < v->meta->sizes.size(); ++k)
    bytes *= static_cast<uint64_t>(std::max<int64_t>(v->meta->sizes[k].example().value_or(1), 0));
  return bytes;
}

// Bytes (per sample, or whole at the example shapes) of the values live
// across each position: produced before it and read at or after it.
std::vector<uint64_t> liveBytes(const ir::Graph& g, bool perSample = true) {
  const size_t n = g.nodes.size();
  std::unordered_map<const ir::Value*, size_t> lastUse;
  for (size_t i = 0; i < n; ++i) g.nodes[i]->forEachInputValue([&](const ir::Value* v) { lastUse[v] = i; });
  std::vector<int64_t> diff(n + 2, 0);
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = *g.nodes[i];
    node.forEachOutputValue([&](const ir::Value* v) {
      auto it = lastUse.find(v);
      if (it == lastUse.end() || it->second <= i) return;
      const auto bytes = static_cast<int64_t>(valueBytes(v, perSample));
      diff[i + 1] += bytes;
      diff[it->second + 1] -= bytes;
    });
  }
  std::vector<uint64_t> live(n + 1, 0);
  int64_t run = 0;
  for (size_t p = 0; p <= n; ++p) {
    run += diff[p];
    live[p] = static_cast<uint64_t>(run);
  }
  return live;
}

// What moving values between ranks costs the stages' CPUs under --balance
// time (the profile's "transfer"; zero rates turn it off). A stage receives
// what is live across its start and sends what is live across its end, as if
// every crossing value were relayed stage to stage (the runner sends a value
// straight from its producer to each consumer: a skip connection over several
// stages is charged to the stages between too, an overestimate only there).
// Final outputs go to rank 0, which runs stage 0: the stage that produces one
// sends it and stage 0 receives it. Bytes are at the exported shapes, the
// micro-batch the profile timed.
class TransferCosts {
 public:
  TransferCosts(const ir::Graph& g, const BalanceRequest& r) : n_(g.nodes.size()) {
    if (r.by != BalanceBy::Time || !r.profile) return;
    send_ = r.profile->sendMsPerMiB / (1 << 20);
    recv_ = r.profile->recvMsPerMiB / (1 << 20);
    if (send_ == 0 && recv_ == 0) return;
    live_ = liveBytes(g, false);
    ir::numberNodes(g);
    std::vector<uint64_t> producedAt(n_ + 1, 0);
    std::unordered_set<const ir::Value*> seen;
    for (const auto& out : g.outputs)
      out.forEachValue([&](const ir::Value* v) {
        if (!v->producer || !seen.insert(v).second) return;
        if (auto pos = ir::positionIn(g, v->producer)) producedAt[*pos] += valueBytes(v, false);
      });
    outputsFrom_.assign(n_ + 1, 0);
    for (size_t p = n_; p-- > 0;) outputsFrom_[p] = outputsFrom_[p + 1] + producedAt[p];
  }
  bool active() const { return !live_.empty(); }

  // Transfer cost of the stage holding nodes [a, b).
  double range(size_t a, size_t b) const {
    if (!active()) return 0;
    double c = 0;
    auto bytes = [](uint64_t v) { return static_cast<double>(v); };
    if (a > 0) c += recv_ * bytes(live_[a]) + send_ * bytes(outputsFrom_[a] - outputsFrom_[b]);
    if (b < n_) c += send_ * bytes(live_[b]);
    if (a == 0 && b < n_) c += recv_ * bytes(outputsFrom_[b]);
    return c;
  }

 private:
  size_t n_;
  double send_ = 0, recv_ = 0;  // ms per byte
  std::vector<uint64_t> live_, outputsFrom_;
};

// A candidate cut position and the split points that name it.
struct Candidate {
  size_t position;
  std::vector<SplitPoint> spellings;  // BEGINNING spellings first
};

std::vector<Candidate> candidatesFor(const std::vector<std::string>& units, const ModuleSpans& spans, size_t n) {
  std::set<size_t> positions;
  for (const std::string& m : units) {
    auto it = spans.span.find(m);
    if (it == spans.span.end() || spans.uncuttable.count(m)) continue;
    for (size_t p : {it->second.first, it->second.second + 1})
      if (p > 0 && p < n) positions.insert(p);
  }
  // Every module that names a position spells it, the shallowest first
  // ("model.layers.3": BEGINNING rather than its first child's), BEGINNING
  // before END.
  std::map<size_t, Candidate> at;
  for (size_t p : positions) at[p].position = p;
  for (SplitWhere where : {SplitWhere::Beginning, SplitWhere::End})
    for (const auto& [m, span] : spans.spellingOrder) {
      auto it = at.find(where == SplitWhere::Beginning ? span.first : span.second + 1);
      if (it != at.end()) it->second.spellings.push_back({m, where});
    }
  std::vector<Candidate> out;
  for (auto& [p, c] : at) out.push_back(std::move(c));
  return out;
}

// The unit module a node position belongs to, for reports.
std::string unitLabel(const ir::Node& node, const std::vector<std::string>& units) {
  for (const std::string& u : units)
    if (pathIn(node.modulePath(), u)) return u;
  return node.modulePath().empty() ? "(root)" : node.modulePath();
}

// Split points for the chosen cut positions; split_after_nodes when two cuts
// would need the same module as a key.
SplitSpec specFor(const std::vector<const Candidate*>& cuts, const ir::Graph& g) {
  nlohmann::ordered_json points = nlohmann::ordered_json::object();
  bool clash = false;
  for (const Candidate* c : cuts) {
    const SplitPoint* pick = nullptr;
    for (const SplitPoint& sp : c->spellings)
      if (!points.contains(sp.module)) {
        pick = &sp;
        break;
      }
    if (!pick) {
      clash = true;
      break;
    }
    points[pick->module] = pick->where == SplitWhere::Beginning ? "BEGINNING" : "END";
  }
  nlohmann::ordered_json spec = nlohmann::ordered_json::object();
  if (!clash) {
    spec["split_points"] = points;
  } else {
    spec["split_after_nodes"] = nlohmann::ordered_json::array();
    for (const Candidate* c : cuts) spec["split_after_nodes"].push_back(g.nodes[c->position - 1]->label());
  }
  return parseSplitSpec(spec.dump(), "--balance");
}

}  // namespace

BalanceBy parseBalanceBy(const std::string& text) {
  if (text == "params") return BalanceBy::Params;
  if (text == "flops") return BalanceBy::Flops;
  if (text == "time") return BalanceBy::Time;
  throw Error(ErrorKind::Usage, "", "--balance", "unknown cost '" + text + "' (params, flops, time)");
}

const char* balanceByName(BalanceBy by) {
  switch (by) {
    case BalanceBy::Params: return "params";
    case BalanceBy::Flops: return "flops";
    case BalanceBy::Time: return "time";
  }
  return "";
}

BalanceResult balance(const pt2::Package& pkg, const ir::ModuleTree& tree, const BalanceRequest& r) {
  const ir::Graph& g = pkg.program.graph;
  const size_t n = g.nodes.size();
  if (r.stages < 1) invalidInput("--stages", "needs at least 1 stage, got " + std::to_string(r.stages));
  if (r.by == BalanceBy::Time && !r.profile) invalidInput("--cost", "--balance time needs a profile (--cost FILE)");
  if (n == 0) invalidInput("graph", "the program has no nodes to split");
  const size_t P = static_cast<size_t>(r.stages);

  ModuleSpans spans(g);
  NodeCosts costs(pkg, r);
  TransferCosts transfers(g, r);
  auto stageCost = [&](size_t a, size_t b) { return costs.range(a, b) + transfers.range(a, b); };
  const double fair = costs.range(0, n) / static_cast<double>(P);

  // Refine: a unit heavier than a fair stage, or every unit while there are
  // too few candidates, gives way to its children.
  std::vector<std::string> units = repeatingGranularity(tree);
  auto refine = [&](const std::vector<std::string>& from, const std::function<bool(const std::string&, double)>& split) {
    std::vector<std::string> next;
    for (const std::string& u : from) {
      const ir::ModuleInfo* info = tree.find(u);
      auto it = spans.span.find(u);
      double cost = it == spans.span.end() ? 0 : costs.range(it->second.first, it->second.second + 1);
      bool hasChildren = info && std::any_of(info->children.begin(), info->children.end(),
                                             [&](const std::string& c) { return spans.span.count(c) > 0; });
      if (hasChildren && !spans.uncuttable.count(u) && split(u, cost))
        next.insert(next.end(), info->children.begin(), info->children.end());
      else
        next.push_back(u);
    }
    return next;
  };
  std::vector<Candidate> cands;
  for (;;) {
    cands = candidatesFor(units, spans, n);
    bool tooFew = cands.size() + 1 < P;
    auto next = refine(units, [&](const std::string&, double cost) { return tooFew || cost > fair; });
    if (next == units) break;
    units = std::move(next);
  }
  if (cands.size() + 1 < P)
    invalidInput("--stages", std::to_string(P) + " stages need " + std::to_string(P - 1) +
                                 " cuts, but the model has only " + std::to_string(cands.size()) +
                                 " cut candidates (module-call boundaries, down to single modules)");

  // Units are the node ranges between candidate positions.
  std::vector<uint64_t> live = liveBytes(g);
  // FLOPs and measured times are estimates: a cut within 0.1% of the lightest
  // heaviest stage that sends fewer bytes is the better one (a residual add
  // left on the other side of a cut inside a layer doubles what crosses it,
  // for a thousandth of a layer's FLOPs). Bytes of parameters are exact.
  const double slack = r.slack.value_or(r.by == BalanceBy::Params ? 0 : 1e-3);
  if (!(slack >= 0)) internalError("--balance", "a negative slack");
  struct Plan {
    std::vector<Candidate> cands;
    std::vector<size_t> start;  // node position where each unit starts
    Partition best;
  };
  auto plan = [&](std::vector<Candidate> cs) {
    Plan pl;
    pl.start.push_back(0);
    for (const Candidate& c : cs) pl.start.push_back(c.position);
    const size_t K = pl.start.size();
    std::vector<double> cutWeight(K, 0);
    for (size_t u = 1; u < K; ++u) cutWeight[u] = static_cast<double>(live[pl.start[u]]);
    RangeCost unitCost = [&](size_t a, size_t b) { return stageCost(pl.start[a], b < K ? pl.start[b] : n); };
    // Transfer terms charge a range for its ends, so a longer range can cost
    // less: only the exhaustive program is exact then.
    pl.best = transfers.active() ? partitionMinMaxAnyCost(K, P, unitCost, cutWeight, slack)
                                 : partitionMinMax(K, P, unitCost, cutWeight, slack);
    pl.cands = std::move(cs);
    return pl;
  };
  Plan chosen = plan(std::move(cands));
  // Cuts land on unit boundaries, so the heaviest stage can sit up to a unit
  // above fair: units of half a fair stage or more (few layers per stage, a
  // head worth several layers), and, while the optimum is more than 1% above
  // fair, every unit heavier than that excess (a layer when whole layers
  // leave one stage a part of a layer heavier: the head's share of a short
  // model), are where a finer cut can gain. Their children are tried, level
  // by level down to single modules (a layer's attention and MLP can both be
  // too coarse where a projection inside the MLP is not), and a level is
  // kept where it lowers the heaviest stage by more than 1% below the
  // coarsest kept; where whole layers balance within 1%, cuts stay between
  // layers.
  for (std::vector<std::string> level = units;;) {
    const double excess = chosen.best.maxCost - fair;
    auto next = refine(level, [&](const std::string&, double cost) {
      return cost > fair / 2 || (excess > fair * 0.01 && cost > excess);
    });
    if (next == level) break;
    level = std::move(next);
    Plan finer = plan(candidatesFor(level, spans, n));
    if (finer.best.maxCost < chosen.best.maxCost * 0.99) {
      units = level;
      chosen = std::move(finer);
    }
  }
  const std::vector<Candidate>& cands2 = chosen.cands;
  const std::vector<size_t>& start = chosen.start;
  const Partition& best = chosen.best;
  const size_t K = start.size();
  auto unitEnd = [&](size_t u) { return u + 1 < K ? start[u + 1] : n; };

  BalanceResult out;
  out.by = r.by;
  out.unit = r.by == BalanceBy::Params ? "bytes" : r.by == BalanceBy::Flops ? "FLOPs" : "ms";
  for (const Candidate& c : cands2) out.candidates.push_back(c.spellings.front());
  std::vector<const Candidate*> cutAt;
  std::vector<size_t> bounds{0};
  for (size_t c : best.cuts) {
    cutAt.push_back(&cands2[c - 1]);
    bounds.push_back(c);
    out.cutBytes.push_back(live[start[c]]);
  }
  bounds.push_back(K);
  double maxCost = 0, sum = 0;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    BalanceStage st;
    const size_t a = start[bounds[s]], b = bounds[s + 1] < K ? start[bounds[s + 1]] : n;
    st.transfer = transfers.range(a, b);
    st.cost = costs.range(a, b) + st.transfer;
    st.units = bounds[s + 1] - bounds[s];
    st.first = unitLabel(*g.nodes[start[bounds[s]]], units);
    st.last = unitLabel(*g.nodes[unitEnd(bounds[s + 1] - 1) - 1], units);
    maxCost = std::max(maxCost, st.cost);
    sum += st.cost;
    out.stages.push_back(st);
  }
  out.imbalance = sum > 0 ? maxCost / (sum / static_cast<double>(P)) : 1;
  out.spec = P == 1 ? parseSplitSpec("{\"split_points\": {}}", "--balance") : specFor(cutAt, g);

  for (size_t s = 1; s + 1 < bounds.size(); ++s) out.cutPositions.push_back(start[bounds[s]]);
  return out;
}

void checkReproduces(const BalanceResult& b, const Assignment& a) {
  for (size_t s = 1; s <= b.cutPositions.size(); ++s) {
    size_t p = b.cutPositions[s - 1];
    if (p >= a.stageOf.size() || a.stageOf[p] != static_cast<int>(s) || a.stageOf[p - 1] != static_cast<int>(s) - 1)
      internalError("--balance", "the split spec " + b.spec.canonical + " does not reproduce cut " + std::to_string(s));
  }
}

}  // namespace pipecut::partition
