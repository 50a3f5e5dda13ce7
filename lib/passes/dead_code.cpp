// Dead-code elimination: drops nodes whose outputs nothing uses, unless they
// have side effects (see effects.cpp), inside nested bodies too, and drops
// parameter/buffer/constant placeholders that nothing reads any more (with
// their signature entries, so their weights leave the package as well).
#include <unordered_set>

#include "passes/pass_manager.h"

namespace pipecut::passes {

namespace {

bool sweep(ir::Graph& g) {
  bool changed = false;
  for (auto& n : g.nodes)
    for (ir::Graph* sub : n->subgraphs()) changed |= sweep(*sub);

  std::unordered_set<const ir::Value*> live;
  for (const auto& out : g.outputs) out.forEachValue([&](ir::Value* v) { live.insert(v); });
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const ir::Node& n = *g.nodes[i];
    bool used = hasSideEffects(n);
    n.forEachOutputValue([&](ir::Value* v) { used |= live.count(v) > 0; });
    if (!used) continue;
    keep[i] = true;
    n.forEachInputValue([&](ir::Value* v) { live.insert(v); });
  }
  std::vector<std::unique_ptr<ir::Node>> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(g.nodes[i]));
    else changed = true;
  }
  g.nodes = std::move(kept);
  if (changed) g.pruneValues();
  return changed;
}

}  // namespace

Pass deadCodePass() {
  return {"dead-code", [](ir::Program& p) {
    bool changed = sweep(p.graph);
    std::unordered_set<const ir::Value*> used;
    for (const auto& n : p.graph.nodes) n->forEachInputValue([&](ir::Value* v) { used.insert(v); });
    for (const auto& out : p.graph.outputs) out.forEachValue([&](ir::Value* v) { used.insert(v); });
    std::vector<bool> drop(p.inputSpecs.size(), false);
    bool anyDropped = false;
    for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
      const ir::InputSpec& s = p.inputSpecs[i];
      bool lifted = s.kind == ir::InputKind::Parameter || s.kind == ir::InputKind::Buffer ||
                    s.kind == ir::InputKind::TensorConstant;
      drop[i] = lifted && !used.count(s.arg.value());
      anyDropped |= drop[i];
    }
    if (anyDropped) {
      dropInputs(p, drop);
      changed = true;
    }
    return changed;
  }};
}

}  // namespace pipecut::passes
