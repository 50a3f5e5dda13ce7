// Stable topological order: every node after the producers of its inputs, and
// among nodes whose dependencies are met, the one that came first stays first.
// Nested bodies of higher-order ops are ordered too.
#include <algorithm>

#include "passes/pass_manager.h"
#include "support/error.h"

namespace pipecut::passes {

namespace {

bool orderGraph(ir::Graph& g, const std::string& where) {
  bool changed = false;
  for (auto& n : g.nodes)
    for (ir::Graph* sub : n->subgraphs()) changed |= orderGraph(*sub, where + ": node '" + n->label() + "'");

  // Among ready nodes the earliest goes first, so an ordered graph stays as
  // it is: exported graphs are, and need no schedule at all.
  ir::NodeEdges edges = ir::nodeEdges(g);
  if (ir::isTopological(edges)) return changed;
  size_t onCycle = 0;
  auto ready = ir::earliestFirst();
  auto order = ir::listSchedule(edges, *ready, &onCycle);
  if (order.empty() && !g.nodes.empty())
    invalidInput(where, "the graph has a cycle through node '" + g.nodes[onCycle]->label() + "' (" +
                            g.nodes[onCycle]->opName() + ")");
  changed |= ir::applyOrder(g, order);
  return changed;
}

}  // namespace

Pass topologicalOrderPass() {
  return {"topological-order", [](ir::Program& p) { return orderGraph(p.graph, "graph"); }, true};
}

}  // namespace pipecut::passes
