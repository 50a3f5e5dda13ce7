#include "passes/pass_manager.h"

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
    rec.nodesBefore = program.graph.nodeCountRecursive();
    rec.changed = pass.run(program);
    rec.nodesAfter = program.graph.nodeCountRecursive();
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
  pm.add(dedupeAttributesPass(o.sameConstant));
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

std::vector<std::vector<size_t>> nodeDependencies(const ir::Graph& g) {
  std::unordered_map<const ir::Node*, size_t> index;
  for (size_t i = 0; i < g.nodes.size(); ++i) index[g.nodes[i].get()] = i;
  std::vector<std::vector<size_t>> deps(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    g.nodes[i]->forEachInputValue([&](ir::Value* v) {
      if (!v->producer) return;
      auto it = index.find(v->producer);
      if (it != index.end() && it->second != i) deps[i].push_back(it->second);
    });
  }
  return deps;
}

}  // namespace pipecut::passes

namespace pipecut::passes {

std::vector<size_t> listSchedule(const ir::Graph& g, const PickFn& pick, size_t* onCycle) {
  const size_t n = g.nodes.size();
  auto deps = nodeDependencies(g);
  std::vector<size_t> pending(n);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i) {
    pending[i] = deps[i].size();
    for (size_t d : deps[i]) users[d].push_back(i);
  }
  std::vector<size_t> ready, order;
  for (size_t i = 0; i < n; ++i)
    if (!pending[i]) ready.push_back(i);
  order.reserve(n);
  const ir::Node* last = nullptr;
  while (!ready.empty()) {
    size_t k = pick(ready, last);
    size_t node = ready[k];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(k));
    order.push_back(node);
    last = g.nodes[node].get();
    for (size_t u : users[node])
      if (--pending[u] == 0) ready.push_back(u);
  }
  if (order.size() == n) return order;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] && onCycle) {
      *onCycle = i;
      break;
    }
  return {};
}

bool applyOrder(ir::Graph& g, const std::vector<size_t>& order) {
  bool changed = false;
  std::vector<std::unique_ptr<ir::Node>> sorted;
  sorted.reserve(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    changed |= order[k] != k;
    sorted.push_back(std::move(g.nodes[order[k]]));
  }
  g.nodes = std::move(sorted);
  return changed;
}

void dropInputs(ir::Program& p, const std::vector<bool>& drop) {
  std::vector<ir::InputSpec> specs;
  std::vector<ir::Argument> inputs;
  for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
    if (drop[i]) continue;
    specs.push_back(std::move(p.inputSpecs[i]));
    inputs.push_back(std::move(p.graph.inputs[i]));
  }
  p.inputSpecs = std::move(specs);
  p.graph.inputs = std::move(inputs);
  p.graph.pruneValues();
}

}  // namespace pipecut::passes
