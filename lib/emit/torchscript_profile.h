#pragma once
// The TorchScript module of a stage built in memory, with the jit nodes each
// top-level program node became: what `pipecut-run --profile` times node by
// node. In memory because a save/load round trip would not keep node
// identity (TorchScript's printer inlines single-use expressions and the
// loader re-orders). This header includes torch; only the runtime uses it.
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include "pt2/package.h"

namespace pipecut::emit {

struct ProfiledModule {
  // Same graph as writeTorchScript's (only dead-code elimination has run), but
  // the tensors own their storage: the module does not need the package.
  torch::jit::Module module;
  std::shared_ptr<torch::jit::Graph> graph;  // forward's graph; input 0 is self
  std::vector<torch::jit::Node*> nodes;      // graph->nodes() in order
  // One per top-level program node, in program order: the program node's
  // label and innermost module, and its jit nodes, nodes[begin, end). Ranges
  // are ordered and disjoint; a node that emits nothing (an export guard)
  // has an empty range. Nodes outside every range (attribute reads and the
  // device before, buffer updates and the result tuple after) belong to no
  // program node.
  struct Range {
    std::string name, module;
    size_t begin = 0, end = 0;
  };
  std::vector<Range> ranges;
};

// Throws pipecut::Error as writeTorchScript does.
ProfiledModule buildTorchScriptForProfile(const pt2::Package& stage, const std::string& className);

}  // namespace pipecut::emit
