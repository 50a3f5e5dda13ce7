// Merges duplicate attribute and constant reads: two placeholders that lift the
// same parameter, buffer or constant FQN become one, and lifted constants with
// byte-identical contents (torch lifts each literal tensor separately) share
// one placeholder. Fewer placeholders means fewer values to route between
// pipeline stages later.
#include <map>

#include "passes/pass_manager.h"

namespace pipecut::passes {

Pass dedupeAttributesPass(SameConstantFn sameConstant) {
  return {"dedupe-attributes", [sameConstant](ir::Program& p) {
    std::map<std::pair<int, std::string>, size_t> firstByTarget;
    std::vector<size_t> constants;  // indices of kept tensor-constant specs
    std::vector<bool> drop(p.inputSpecs.size(), false);
    bool changed = false;
    for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
      const ir::InputSpec& s = p.inputSpecs[i];
      bool lifted = s.kind == ir::InputKind::Parameter || s.kind == ir::InputKind::Buffer ||
                    s.kind == ir::InputKind::TensorConstant;
      if (!lifted) continue;
      size_t keepIndex = p.inputSpecs.size();
      auto key = std::make_pair(static_cast<int>(s.kind), s.target);
      auto it = firstByTarget.find(key);
      if (it != firstByTarget.end()) {
        keepIndex = it->second;
      } else if (s.kind == ir::InputKind::TensorConstant && sameConstant) {
        for (size_t c : constants)
          if (sameConstant(p.inputSpecs[c].target, s.target)) keepIndex = c;
      }
      if (keepIndex == p.inputSpecs.size()) {
        firstByTarget.emplace(key, i);
        if (s.kind == ir::InputKind::TensorConstant) constants.push_back(i);
        continue;
      }
      replaceAllUses(p, s.arg.value(), p.inputSpecs[keepIndex].arg.value());
      drop[i] = true;
      changed = true;
    }
    if (!changed) return false;
    dropInputs(p, drop);
    return true;
  }};
}

}  // namespace pipecut::passes
