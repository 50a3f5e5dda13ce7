#include "partition/assign.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "ir/schedule.h"
#include "ir/state.h"
#include "support/error.h"

namespace pipecut::partition {

namespace {

using ir::pathIn;

// Counts nodes inside `g` (recursively) that are / are not in `module`.
void countBody(const ir::Graph& g, const std::string& module, size_t& in, size_t& out) {
  for (const auto& n : g.nodes) {
    if (n->isHigherOrder()) {
      for (const ir::Graph* sub : n->subgraphs()) countBody(*sub, module, in, out);
    } else {
      (pathIn(n->modulePath(), module) ? in : out)++;
    }
  }
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

void requireModule(const ir::ModuleTree& tree, const std::string& module, const std::string& where) {
  if (tree.find(module) && !module.empty()) return;
  auto near = tree.closest(module);
  invalidInput(where, "unknown module '" + module + "'" + (near.empty() ? "" : "; closest: " + joinNames(near)));
}

// A module whose nodes fill only part of a higher-order op's body cannot be cut
// at: the body is one node at top level. `n` is such an op outside `module`;
// returns whether its body runs any of the module's nodes.
bool bodyInModule(const ir::Node& n, const std::string& module, const std::string& where) {
  size_t in = 0, out = 0;
  for (const ir::Graph* sub : n.subgraphs()) countBody(*sub, module, in, out);
  if (in > 0 && out > 0)
    invalidInput(where, "cut inside a higher-order op body: module '" + module + "' is only part of the body of " +
                            n.opName() + " node '" + n.label() + "' (" + std::to_string(in) + " of " +
                            std::to_string(in + out) + " nodes); cut at '" +
                            (n.modulePath().empty() ? std::string("(root)") : n.modulePath()) + "' instead");
  return in > 0;
}

void rejectCutInsideBody(const ir::Program& p, const std::string& module, const std::string& where) {
  for (const auto& n : p.graph.nodes)
    if (n->isHigherOrder() && !pathIn(n->modulePath(), module)) bodyInModule(*n, module, where);
}

Assignment fromCuts(const ir::Program& p, std::vector<std::pair<size_t, std::string>> cuts) {
  const size_t n = p.graph.nodes.size();
  std::sort(cuts.begin(), cuts.end());
  Assignment a;
  a.stageOf.assign(n, 0);
  size_t prev = 0;
  std::string prevWhy = "the start of the program";
  for (size_t k = 0; k < cuts.size(); ++k) {
    auto [pos, why] = cuts[k];
    if (pos == prev)
      invalidInput("spec", "stage " + std::to_string(k) + " would be empty: " + why + " cuts at the same place as " + prevWhy);
    prev = pos;
    prevWhy = why;
  }
  if (!cuts.empty() && cuts.back().first >= n)
    invalidInput("spec", "the last stage would be empty: " + cuts.back().second + " cuts after the last node");
  for (size_t i = 0, k = 0; i < n; ++i) {
    while (k < cuts.size() && cuts[k].first <= i) ++k;
    a.stageOf[i] = static_cast<int>(k);
  }
  a.numStages = static_cast<int>(cuts.size()) + 1;
  return a;
}

// Whether nodes' innermost modules are `module` or inside it, by module id
// (ir/module_paths.h): each distinct module is answered once, by a walk up
// its ancestors' ids that stops at the first already answered, so a stack
// costs an array read where comparing its path's characters cost a cache
// miss at 10^5 nodes.
class Membership {
 public:
  explicit Membership(const std::string& module) : module_(module) {}

  bool contains(const ir::Node& node) {
    const auto& frames = node.frames();
    if (frames.empty()) return false;  // the root, which no named module contains
    const ir::ModuleFrame& f = frames.back();
    const ir::ModulePaths& paths = table_.of(f);
    if (answer_.empty()) {
      // Every path's ancestors are interned: a module that no frame names,
      // nor any path inside it, holds no node.
      target_ = paths.find(module_).value_or(ir::ModulePaths::kNone);
      answer_.assign(paths.size(), kUnknown);
    }
    if (target_ == ir::ModulePaths::kNone) return false;
    chain_.clear();
    int8_t in = 0;
    for (uint32_t id = f.module;; id = paths.parent(id)) {
      if (answer_[id] != kUnknown) {
        in = answer_[id];
        break;
      }
      chain_.push_back(id);
      if (id == target_ || id == ir::ModulePaths::kRoot) {
        in = id == target_;
        break;
      }
    }
    for (uint32_t id : chain_) answer_[id] = in;
    return in != 0;
  }

 private:
  static constexpr int8_t kUnknown = -1;
  std::string module_;
  ir::FrameTable table_;
  uint32_t target_ = ir::ModulePaths::kNone;
  std::vector<int8_t> answer_;  // by module id: 1 inside, 0 not, kUnknown
  std::vector<uint32_t> chain_;
};

Assignment bySplitPoints(const ir::Program& p, const SplitSpec& s, const ir::ModuleTree& tree) {
  std::vector<std::pair<size_t, std::string>> cuts;
  for (const auto& sp : s.splitPoints) {
    std::string where = "split_points." + sp.module;
    requireModule(tree, sp.module, where);
    // One walk finds the module's first and last node and refuses a cut
    // inside a body. The nodes of one module call share a stack (ir.h), and
    // so whether their path is in the module: asked once per call, not per
    // node (three dependent loads, each a cache miss at 10^5 nodes).
    size_t first = SIZE_MAX, last = 0;
    Membership member(sp.module);
    const std::vector<ir::ModuleFrame>* lastStack = nullptr;
    bool lastIn = false;
    for (size_t i = 0; i < p.graph.nodes.size(); ++i) {
      const ir::Node& node = *p.graph.nodes[i];
      const std::vector<ir::ModuleFrame>* stack = node.moduleStack.get();
      bool in;
      if (stack && stack == lastStack) {
        in = lastIn;
      } else {
        in = member.contains(node);
        lastStack = stack;
        lastIn = in;
      }
      if (!in && node.isHigherOrder()) in = bodyInModule(node, sp.module, where);
      if (in) {
        first = std::min(first, i);
        last = i;
      }
    }
    if (first == SIZE_MAX) invalidInput(where, "module '" + sp.module + "' runs no nodes in this program");
    bool begin = sp.where == SplitWhere::Beginning;
    std::string why = "'" + sp.module + "' " + (begin ? "BEGINNING" : "END");
    if (begin && first == 0) invalidInput(where, why + " leaves the first stage empty: it starts at the first node");
    cuts.emplace_back(begin ? first : last + 1, why);
  }
  return fromCuts(p, std::move(cuts));
}

Assignment byNodes(const ir::Program& p, const SplitSpec& s) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < p.graph.nodes.size(); ++i) index[p.graph.nodes[i]->label()] = i;
  std::vector<std::pair<size_t, std::string>> cuts;
  for (size_t k = 0; k < s.afterNodes.size(); ++k) {
    const std::string& name = s.afterNodes[k];
    std::string where = "split_after_nodes[" + std::to_string(k) + "]";
    auto it = index.find(name);
    if (it == index.end()) {
      for (const auto& n : p.graph.nodes)
        for (const ir::Graph* sub : n->subgraphs())
          for (const auto& inner : sub->nodes)
            if (inner->label() == name)
              invalidInput(where, "cut inside a higher-order op body: node '" + name + "' is inside the body of " +
                                      n->opName() + " node '" + n->label() + "'; cut after '" + n->label() + "' instead");
      invalidInput(where, "unknown node '" + name + "'");
    }
    cuts.emplace_back(it->second + 1, "split after node '" + name + "'");
  }
  return fromCuts(p, std::move(cuts));
}

Assignment byStageLists(const ir::Program& p, const SplitSpec& s, const ir::ModuleTree& tree) {
  std::map<std::string, int> listed;
  for (size_t st = 0; st < s.stages.size(); ++st) {
    for (size_t k = 0; k < s.stages[st].size(); ++k) {
      const std::string& m = s.stages[st][k];
      std::string where = "stages[" + std::to_string(st) + "][" + std::to_string(k) + "]";
      requireModule(tree, m, where);
      rejectCutInsideBody(p, m, where);
      for (const auto& [other, ost] : listed) {
        if (other == m)
          invalidInput(where, "overlapping stage lists: '" + m + "' is listed in stage " + std::to_string(ost) +
                                  " and stage " + std::to_string(st));
        if ((pathIn(m, other) || pathIn(other, m)) && ost != static_cast<int>(st))
          invalidInput(where, "overlapping stage lists: '" + m + "' (stage " + std::to_string(st) + ") and '" + other +
                                  "' (stage " + std::to_string(ost) + ") contain one another");
      }
      listed[m] = static_cast<int>(st);
    }
  }
  const size_t n = p.graph.nodes.size();
  Assignment a;
  a.numStages = static_cast<int>(s.stages.size());
  a.stageOf.assign(n, -1);
  // A node goes to the stage of the innermost listed module that contains it.
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = *p.graph.nodes[i];
    size_t bestLen = 0;
    for (const auto& [m, st] : listed) {
      if (!nodeInModule(node, m)) continue;
      if (a.stageOf[i] < 0 || m.size() > bestLen) {
        a.stageOf[i] = st;
        bestLen = m.size();
      }
    }
  }
  // Unlisted nodes join the stage of their first consumer (the earliest stage
  // that uses them); nodes nobody consumes follow their latest producer.
  ir::NodeEdges edges = ir::nodeEdges(p.graph);
  std::vector<bool> listedNode(n);
  for (size_t i = 0; i < n; ++i) listedNode[i] = a.stageOf[i] >= 0;
  for (size_t i = n; i-- > 0;) {
    if (listedNode[i]) continue;
    int best = -1;
    for (size_t u : edges.usersOf(i))
      if (a.stageOf[u] >= 0 && (best < 0 || a.stageOf[u] < best)) best = a.stageOf[u];
    a.stageOf[i] = best;
  }
  for (size_t i = 0; i < n; ++i) {
    if (a.stageOf[i] >= 0) continue;
    int best = 0;
    for (size_t d : edges.depsOf(i)) best = std::max(best, a.stageOf[d]);
    a.stageOf[i] = best;
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t d : edges.depsOf(i))
      if (a.stageOf[d] > a.stageOf[i]) {
        const ir::Node& from = *p.graph.nodes[d];
        const ir::Node& to = *p.graph.nodes[i];
        invalidInput("stages", "data would flow backward: node '" + from.label() + "' in " +
                                   (from.modulePath().empty() ? "(root)" : from.modulePath()) + " (stage " +
                                   std::to_string(a.stageOf[d]) + ") feeds node '" + to.label() + "' in " +
                                   (to.modulePath().empty() ? "(root)" : to.modulePath()) + " (stage " +
                                   std::to_string(a.stageOf[i]) + ")");
      }
  std::vector<size_t> count(static_cast<size_t>(a.numStages), 0);
  for (int st : a.stageOf) count[static_cast<size_t>(st)]++;
  for (size_t st = 0; st < count.size(); ++st)
    if (count[st] == 0) invalidInput("stages[" + std::to_string(st) + "]", "stage " + std::to_string(st) + " has no nodes");
  return a;
}

}  // namespace

bool nodeInModule(const ir::Node& node, const std::string& path) {
  if (pathIn(node.modulePath(), path)) return true;
  if (!node.isHigherOrder()) return false;
  size_t in = 0, out = 0;
  for (const ir::Graph* sub : node.subgraphs()) countBody(*sub, path, in, out);
  return in > 0;
}

namespace {

// A state tensor (ir/state.h) lives in one stage: every node that touches it
// goes to the latest stage any of them is in. transformers' static cache
// writes a layer's cache position at the top of the program, in no module,
// and reads it in the layer: that write follows the layer. Moving a node
// later keeps data flowing forward unless something outside the state reads
// its outputs in an earlier stage; then the state would be written in one
// stage and read in another: refused, naming it.
void keepStateTogether(const ir::Program& p, Assignment& a) {
  std::vector<ir::StateTensor> state = ir::findState(p);
  if (state.empty()) return;
  std::unordered_map<const ir::Node*, size_t> position;
  for (size_t i = 0; i < p.graph.nodes.size(); ++i) position.emplace(p.graph.nodes[i].get(), i);
  std::vector<std::vector<size_t>> users(p.graph.nodes.size());
  for (size_t i = 0; i < p.graph.nodes.size(); ++i)
    p.graph.nodes[i]->forEachInputValue([&](ir::Value* v) {
      if (v->producer) {
        auto it = position.find(v->producer);
        if (it != position.end()) users[it->second].push_back(i);
      }
    });
  for (const auto& st : state) {
    const std::string where = "state '" + p.inputSpecs[st.spec].target + "'";
    int owner = 0;
    std::vector<size_t> nodes;
    for (const ir::Node* n : st.touching) {
      nodes.push_back(position.at(n));
      owner = std::max(owner, a.stageOf[nodes.back()]);
    }
    for (size_t i : nodes) {
      if (a.stageOf[i] == owner) continue;
      for (size_t u : users[i])
        if (a.stageOf[u] < owner && std::find(nodes.begin(), nodes.end(), u) == nodes.end())
          invalidInput(where, "it is updated in place in stage " + std::to_string(owner) + " and read through node '" +
                                  p.graph.nodes[i]->label() + "' in stage " + std::to_string(a.stageOf[u]) +
                                  " (by node '" + p.graph.nodes[u]->label() +
                                  "'); a state tensor and everything that reads it stay in one stage");
      a.stageOf[i] = owner;
    }
  }
  // A node moved for one state tensor may have left another's stage.
  for (const auto& st : state) {
    int stage = a.stageOf[position.at(st.touching.front())];
    for (const ir::Node* n : st.touching)
      if (a.stageOf[position.at(n)] != stage)
        invalidInput("state '" + p.inputSpecs[st.spec].target + "'",
                     "it is read and updated in stages " + std::to_string(stage) + " and " +
                         std::to_string(a.stageOf[position.at(n)]) + " (node '" + n->label() +
                         "'); a state tensor and everything that reads it stay in one stage");
  }
}

}  // namespace

Assignment assignStages(const ir::Program& p, const SplitSpec& s, const ir::ModuleTree& tree) {
  if (p.graph.nodes.empty()) invalidInput("graph", "the program has no nodes to split");
  Assignment a;
  switch (s.kind) {
    case SplitSpec::Kind::SplitPoints: a = bySplitPoints(p, s, tree); break;
    case SplitSpec::Kind::SplitAfterNodes: a = byNodes(p, s); break;
    case SplitSpec::Kind::Stages: a = byStageLists(p, s, tree); break;
  }
  keepStateTogether(p, a);
  return a;
}

}  // namespace pipecut::partition
