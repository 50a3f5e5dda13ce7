#include "passes/pass_manager.h"

#include <chrono>
#include <unordered_map>

#include "ir/verifier.h"
#include "support/error.h"

namespace pipecut::passes {

void PassManager::run(ir::Program& program) {
  // Order is only demanded once the input had it or a pass established it:
  // fixing the order of a shuffled graph is itself one of the passes.
  bool ordered = true;
  if (verifyEach_) {
    try {
      ir::verify(program);
    } catch (const Error&) {
      ordered = false;
    }
  }
  for (const Pass& pass : passes_) {
    PassRecord rec;
    rec.name = pass.name;
    auto t0 = std::chrono::steady_clock::now();
    rec.changed = pass.run(program);
    rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    records_.push_back(rec);
    if (verifyEach_) {
      try {
        ordered |= pass.establishesOrder;
        ir::verify(program, ir::VerifyOptions{ordered});
      } catch (const Error& e) {
        internalError("pass '" + pass.name + "'", std::string("left an invalid graph: ") + e.what());
      }
    }
  }
}

void addNormalizePipeline(PassManager& pm, const NormalizeOptions& o) {
  pm.setVerifyEach(o.verifyEach);
  pm.add(placeholderOrderPass());
  pm.add(topologicalOrderPass());
  pm.add(dedupeAttributesPass(o.sameConstant, o.constantKey));
  pm.add(deadCodePass());
  if (o.moduleContiguous) pm.add(moduleContiguousPass());
}

void replaceAllUses(ir::Program& p, ir::Value* from, ir::Value* to) {
  auto fix = [&](ir::Argument& a) {
    a.forEachRef([&](ir::Ref& r) {
      if (r.value == from) r.value = to;
    });
  };
  // Nested graphs are closed scopes: a parent value is never used inside them.
  for (auto& n : p.graph.nodes)
    for (auto& in : n->inputs) fix(in.arg);
  for (auto& out : p.graph.outputs) fix(out);
  for (auto& s : p.outputSpecs) fix(s.arg);
  for (auto& s : p.inputSpecs)
    if (s.kind == ir::InputKind::UserInput) fix(s.arg);
}

}  // namespace pipecut::passes

namespace pipecut::passes {

void dropInputs(ir::Program& p, const std::vector<bool>& drop, bool pruneValues) {
  std::vector<ir::InputSpec> specs;
  std::vector<ir::Argument> inputs;
  for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
    if (drop[i]) continue;
    specs.push_back(std::move(p.inputSpecs[i]));
    inputs.push_back(std::move(p.graph.inputs[i]));
  }
  p.inputSpecs = std::move(specs);
  p.graph.inputs = std::move(inputs);
  if (pruneValues) p.graph.pruneValues();
}

}  // namespace pipecut::passes
