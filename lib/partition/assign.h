#pragma once
// Assigns every top-level node of a normalized program to a pipeline stage,
// from a split spec. Data flows only forward in the result.
#include <vector>

#include "ir/ir.h"
#include "ir/module_tree.h"
#include "partition/split_spec.h"

namespace pipecut::partition {

struct Assignment {
  int numStages = 0;
  std::vector<int> stageOf;  // per top-level node, by position in program.graph.nodes
};

// Throws pipecut::Error (InvalidInput) for an unknown module (with the closest
// names), a cut inside a higher-order op body, overlapping stage lists, an
// empty stage, or data that would flow backward.
Assignment assignStages(const ir::Program& program, const SplitSpec& spec, const ir::ModuleTree& tree);

// Whether node (or, for a higher-order op, anything in its body) runs in module `path`.
bool nodeInModule(const ir::Node& node, const std::string& path);

}  // namespace pipecut::partition
