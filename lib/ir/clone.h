#pragma once
// Deep copies of nodes between graphs, for carving stage programs out of a
// whole program. Values keep their names; a ValueMap records old -> new.
#include <unordered_map>

#include "ir/ir.h"

namespace pipecut::ir {

using ValueMap = std::unordered_map<const Value*, Value*>;

// Copies `arg`, mapping every referenced value through `map` (which must hold
// them all); nested graphs are copied whole.
Argument cloneArgument(const Argument& arg, const ValueMap& map);

// Appends a copy of `node` to `dst`, defining its outputs there (recorded in
// `map`). Throws Internal if an input is missing from `map`.
Node* cloneNodeInto(const Node& node, Graph& dst, ValueMap& map);

// A whole graph (for nested bodies).
std::shared_ptr<Graph> cloneGraph(const Graph& g);

// A whole program: its graph, and its signature's arguments mapped to the
// copy's values; every other field copied as is.
Program cloneProgram(const Program& p);

// Defines a value like `v` in `dst` (same name, kind, metadata).
Value* cloneValueInto(const Value& v, Graph& dst, Node* producer);

// A name `g` does not hold yet: `name` itself, else "<name><suffix>", else
// "<name><suffix>_<k>" for the first free k.
std::string freshName(const Graph& g, const std::string& name, const std::string& suffix);

// A copy of `node` for `dst` whose outputs are defined in `dst` under fresh
// names where `dst` already uses theirs ("<name><suffix>", then
// "<name><suffix>_<k>"), recorded in `map`; a node named after its output is
// renamed with it. The caller places the node: passes that rewrite a graph's
// node list (inlining a region's body, unrolling a loop) build the new list
// themselves.
std::unique_ptr<Node> copyNodeFresh(const Node& node, Graph& dst, ValueMap& map, const std::string& suffix);

}  // namespace pipecut::ir
