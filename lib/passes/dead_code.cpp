// Dead-code elimination: drops nodes whose outputs nothing uses, unless they
// have side effects (see effects.cpp), inside nested bodies too, and drops
// parameter/buffer/constant placeholders that nothing reads any more (with
// their signature entries, so their weights leave the package as well).
#include <unordered_set>

#include "ir/graph_edit.h"
#include "ir/op_traits.h"
#include "passes/pass_manager.h"

namespace pipecut::passes {

namespace {

// What sweeping the top-level graph leaves to the pass: the graph inputs
// that nothing kept reads, and which values are still defined (by value
// number), so that the values of dropped nodes and dropped placeholders go
// in one compaction (Graph::pruneValues(defined)) instead of two walks over
// every node's outputs.
struct TopLevel {
  std::unordered_set<const ir::Value*> unusedInputs;
  std::vector<char> defined;
};

// Drops g's dead nodes (in nested bodies too) and, unless `top` takes them,
// their values.
bool sweep(ir::Graph& g, TopLevel* top = nullptr) {
  bool changed = false;
  // Per-value liveness in a vector indexed by Value::number; a value of
  // another scope (which the verifier refuses) counts as live.
  g.numberValues();
  std::vector<char> live(g.values.size(), 0), defined(g.values.size(), 0);
  auto markLive = [&](ir::Value* v) {
    if (g.owns(v)) live[v->number] = 1;
  };
  auto markDefined = [&](ir::Value* v) {
    if (g.owns(v)) defined[v->number] = 1;
  };
  auto isLive = [&](const ir::Value* v) { return !g.owns(v) || live[v->number]; };
  for (const auto& out : g.outputs) out.forEachValue(markLive);
  for (const auto& in : g.inputs) in.forEachValue(markDefined);
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    ir::prefetchWalk(g, i, -1);
    const ir::Node& n = *g.nodes[i];
    bool used = ir::hasSideEffects(n);
    n.forEachOutputValue([&](ir::Value* v) { used |= isLive(v); });
    if (!used) continue;
    keep[i] = true;
    n.forEachOutputValue(markDefined);
    n.forEachInputValue(markLive);
    // Bodies are swept here, not in a walk of their own (a cache miss per
    // node at 10^5 nodes): a kept node's body does not change what the
    // node reads, and a dropped node's body goes with it.
    for (ir::Graph* sub : n.subgraphs()) changed |= sweep(*sub);
  }
  if (top)
    for (const auto& in : g.inputs)
      in.forEachValue([&](ir::Value* v) {
        if (!isLive(v)) top->unusedInputs.insert(v);
      });
  std::vector<std::unique_ptr<ir::Node>> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(g.nodes[i]));
    else changed = true;
  }
  g.nodes = std::move(kept);
  if (top) top->defined = std::move(defined);
  else if (changed) g.pruneValues(defined);
  return changed;
}

}  // namespace

Pass deadCodePass() {
  return {"dead-code", [](ir::Program& p) {
    // Placeholders nothing kept reads: the sweep's liveness says so, without
    // another walk over every node's inputs.
    TopLevel top;
    bool changed = sweep(p.graph, &top);
    std::vector<bool> drop(p.inputSpecs.size(), false);
    bool anyDropped = false;
    for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
      const ir::InputSpec& s = p.inputSpecs[i];
      bool lifted = s.kind == ir::InputKind::Parameter || s.kind == ir::InputKind::Buffer ||
                    s.kind == ir::InputKind::TensorConstant;
      drop[i] = lifted && top.unusedInputs.count(s.arg.value());
      if (drop[i] && p.graph.owns(s.arg.value())) top.defined[s.arg.value()->number] = 0;
      anyDropped |= drop[i];
    }
    if (anyDropped) {
      ir::dropInputs(p, drop, /*pruneValues=*/false);
      changed = true;
    }
    // Numbered by the sweep; nothing added or removed a value since.
    if (changed) p.graph.pruneValues(top.defined);
    return changed;
  }};
}

}  // namespace pipecut::passes
