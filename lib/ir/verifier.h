#pragma once
// Structural invariants of a Program. Every pass must preserve them; the pass
// manager checks after each pass in test builds. Violations throw
// pipecut::Error (InvalidInput) whose message names the node and the value.
#include "ir/ir.h"

namespace pipecut::ir {

struct VerifyOptions {
  bool requireTopologicalOrder = true;  // off when checking a graph normalization will reorder
};

void verify(const Program& program, const VerifyOptions& options = {});
void verifyGraph(const Graph& graph, const std::string& where, const VerifyOptions& options = {});

}  // namespace pipecut::ir
