// Stable topological order: every node after the producers of its inputs, and
// among nodes whose dependencies are met, the one that came first stays first.
// Nested bodies of higher-order ops are ordered too.
#include <functional>
#include <queue>

#include "passes/pass_manager.h"
#include "support/error.h"

namespace pipecut::passes {

namespace {

bool orderGraph(ir::Graph& g, const std::string& where) {
  bool changed = false;
  for (auto& n : g.nodes)
    for (ir::Graph* sub : n->subgraphs()) changed |= orderGraph(*sub, where + ": node '" + n->label() + "'");

  const size_t n = g.nodes.size();
  auto deps = nodeDependencies(g);
  std::vector<size_t> pending(n, 0);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i) {
    pending[i] = deps[i].size();
    for (size_t d : deps[i]) users[d].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (pending[i] != 0)
        invalidInput(where, "the graph has a cycle through node '" + g.nodes[i]->label() + "' (" +
                                g.nodes[i]->opName() + ")");
  }
  std::vector<std::unique_ptr<ir::Node>> sorted;
  sorted.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    changed |= order[k] != k;
    sorted.push_back(std::move(g.nodes[order[k]]));
  }
  g.nodes = std::move(sorted);
  return changed;
}

}  // namespace

Pass topologicalOrderPass() {
  return {"topological-order", [](ir::Program& p) { return orderGraph(p.graph, "graph"); }, true};
}

}  // namespace pipecut::passes
