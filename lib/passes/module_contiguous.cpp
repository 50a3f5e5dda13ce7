// Module-contiguous order: a topological order that keeps the nodes of one
// module call together wherever data flow allows. Tracing can interleave
// nodes of different modules (a value computed early for a later module,
// rotary tables hoisted out of the layers), and a cut placed "after module X"
// then drags unrelated work across the boundary; this is the root cause behind
// PyTorch issues #184361 and #162898. List scheduling: among ready nodes, pick
// the one whose module path shares the most components with the node just
// placed; ties go to the earlier original position.
#include <string_view>

#include "passes/pass_manager.h"

namespace pipecut::passes {

namespace {

size_t sharedDepth(const ir::Node& a, const ir::Node& b) {
  size_t k = 0;
  while (k < a.moduleStack.size() && k < b.moduleStack.size() && a.moduleStack[k].key == b.moduleStack[k].key &&
         a.moduleStack[k].path == b.moduleStack[k].path)
    ++k;
  return k;
}

bool reorder(ir::Graph& g) {
  bool changed = false;
  for (auto& n : g.nodes)
    for (ir::Graph* sub : n->subgraphs()) changed |= reorder(*sub);
  auto order = listSchedule(
      g,
      [&](const std::vector<size_t>& ready, const ir::Node* last) {
        size_t best = 0;
        for (size_t k = 1; k < ready.size(); ++k) {
          size_t dc = last ? sharedDepth(*last, *g.nodes[ready[k]]) : 0;
          size_t db = last ? sharedDepth(*last, *g.nodes[ready[best]]) : 0;
          if (dc > db || (dc == db && ready[k] < ready[best])) best = k;
        }
        return best;
      },
      nullptr);
  if (order.empty()) return changed;  // a cycle: the topological pass reports it
  changed |= applyOrder(g, order);
  return changed;
}

}  // namespace

Pass moduleContiguousPass() {
  return {"module-contiguous", [](ir::Program& p) { return reorder(p.graph); }, true};
}

}  // namespace pipecut::passes
