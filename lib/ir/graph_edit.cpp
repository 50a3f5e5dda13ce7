#include "ir/graph_edit.h"

namespace pipecut::ir {

void replaceAllUses(Program& p, Value* from, Value* to) {
  auto fix = [&](Argument& a) {
    a.forEachRef([&](Ref& r) {
      if (r.value == from) r.value = to;
    });
  };
  for (auto& n : p.graph.nodes)
    for (auto& in : n->inputs) fix(in.arg);
  for (auto& out : p.graph.outputs) fix(out);
  for (auto& s : p.outputSpecs) fix(s.arg);
  for (auto& s : p.inputSpecs)
    if (s.kind == InputKind::UserInput) fix(s.arg);
}

void dropInputs(Program& p, const std::vector<bool>& drop, bool pruneValues) {
  std::vector<InputSpec> specs;
  std::vector<Argument> inputs;
  for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
    if (drop[i]) continue;
    specs.push_back(std::move(p.inputSpecs[i]));
    inputs.push_back(std::move(p.graph.inputs[i]));
  }
  p.inputSpecs = std::move(specs);
  p.graph.inputs = std::move(inputs);
  if (pruneValues) p.graph.pruneValues();
}

}  // namespace pipecut::ir
