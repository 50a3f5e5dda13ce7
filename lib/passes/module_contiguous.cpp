// Module-contiguous order: a topological order that keeps the nodes of one
// module call together wherever data flow allows. Tracing can interleave
// nodes of different modules (a value computed early for a later module,
// rotary tables hoisted out of the layers), and a cut placed "after module X"
// then drags unrelated work across the boundary; this is the root cause behind
// PyTorch issues #184361 and #162898. List scheduling: among ready nodes, pick
// the one whose module path shares the most components with the node just
// placed; ties go to the earlier original position.
#include "passes/pass_manager.h"

namespace pipecut::passes {

namespace {

bool reorder(ir::Graph& g) {
  bool changed = false;
  for (auto& n : g.nodes)
    for (ir::Graph* sub : n->subgraphs()) changed |= reorder(*sub);
  auto ready = ir::moduleAffinity(g);
  auto order = ir::listSchedule(g, *ready, nullptr);
  if (order.empty()) return changed;  // a cycle: the topological pass reports it
  changed |= ir::applyOrder(g, order);
  return changed;
}

}  // namespace

Pass moduleContiguousPass() {
  return {"module-contiguous", [](ir::Program& p) { return reorder(p.graph); }, true};
}

}  // namespace pipecut::passes
