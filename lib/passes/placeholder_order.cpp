// Placeholders first, in signature order. The serialized graph lists its
// placeholders separately from its nodes, but their order can disagree with
// the signature (a hand-edited or re-assembled program; the fx-level version of
// this is get_attr reads interleaved with placeholders, which broke
// torch.distributed.pipelining in the seed report). The signature order is the
// calling convention, so graph inputs are rearranged to follow it.
#include <deque>
#include <unordered_map>

#include "passes/pass_manager.h"
#include "support/error.h"

namespace pipecut::passes {

Pass placeholderOrderPass() {
  return {"placeholder-order", [](ir::Program& p) {
    ir::Graph& g = p.graph;
    if (p.inputSpecs.size() != g.inputs.size())
      invalidInput("signature", std::to_string(p.inputSpecs.size()) + " input specs for " +
                                    std::to_string(g.inputs.size()) + " placeholders");
    auto wanted = [&](size_t i) -> const ir::Value* {
      const ir::InputSpec& s = p.inputSpecs[i];
      return s.kind == ir::InputKind::ConstantInput ? nullptr : s.arg.value();
    };
    auto defined = [&](size_t k) -> const ir::Value* { return g.inputs[k].isValue() ? g.inputs[k].value() : nullptr; };
    // An exported program's placeholders already follow its signature: seen
    // in one comparison per placeholder, without the table below (a deque
    // per placeholder, 10^4 of them in a deep model).
    bool inOrder = true;
    for (size_t i = 0; i < g.inputs.size() && inOrder; ++i) inOrder = defined(i) == wanted(i);
    if (inOrder) return false;
    // Placeholders by the value they define (constant inputs under nullptr),
    // earliest first: linear in the number of placeholders.
    std::unordered_map<const ir::Value*, std::deque<size_t>> at;
    at.reserve(g.inputs.size());
    for (size_t k = 0; k < g.inputs.size(); ++k) at[defined(k)].push_back(k);
    std::vector<ir::Argument> ordered;
    bool changed = false;
    ordered.reserve(g.inputs.size());
    for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
      const ir::InputSpec& s = p.inputSpecs[i];
      const ir::Value* want = wanted(i);
      auto it = at.find(want);
      if (it == at.end() || it->second.empty())
        invalidInput("signature.input_specs[" + std::to_string(i) + "]",
                     std::string(ir::inputKindKey(s.kind)) + " '" + (want ? want->name : s.target) +
                         "' has no placeholder");
      size_t found = it->second.front();
      it->second.pop_front();
      changed |= found != i;
      ordered.push_back(std::move(g.inputs[found]));
    }
    g.inputs = std::move(ordered);
    return changed;
  }};
}

}  // namespace pipecut::passes
