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
  const size_t n = g.nodes.size();
  auto deps = nodeDependencies(g);
  std::vector<size_t> pending(n);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i) {
    pending[i] = deps[i].size();
    for (size_t d : deps[i]) users[d].push_back(i);
  }
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (!pending[i]) ready.push_back(i);
  std::vector<size_t> order;
  order.reserve(n);
  const ir::Node* last = nullptr;
  while (!ready.empty()) {
    size_t best = 0;
    for (size_t k = 1; k < ready.size(); ++k) {
      const ir::Node& cand = *g.nodes[ready[k]];
      const ir::Node& cur = *g.nodes[ready[best]];
      size_t dc = last ? sharedDepth(*last, cand) : 0, db = last ? sharedDepth(*last, cur) : 0;
      if (dc > db || (dc == db && ready[k] < ready[best])) best = k;
    }
    size_t pick = ready[best];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
    order.push_back(pick);
    last = g.nodes[pick].get();
    for (size_t u : users[pick])
      if (--pending[u] == 0) ready.push_back(u);
  }
  if (order.size() != n) return changed;  // a cycle: the topological pass reports it
  std::vector<std::unique_ptr<ir::Node>> sorted;
  for (size_t k = 0; k < n; ++k) {
    changed |= order[k] != k;
    sorted.push_back(std::move(g.nodes[order[k]]));
  }
  g.nodes = std::move(sorted);
  return changed;
}

}  // namespace

Pass moduleContiguousPass() {
  return {"module-contiguous", [](ir::Program& p) { return reorder(p.graph); }, true};
}

}  // namespace pipecut::passes
