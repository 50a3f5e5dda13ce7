// Merges duplicate attribute and constant reads: two placeholders that lift the
// same parameter, buffer or constant FQN become one, and lifted constants with
// byte-identical contents (torch lifts each literal tensor separately) share
// one placeholder, unless the program updates them in place: two zeroed KV
// caches (ir/state.h) look alike and are two tensors. Fewer placeholders
// means fewer values to route between pipeline stages later.
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/graph_edit.h"
#include "ir/state.h"
#include "passes/pass_manager.h"

namespace pipecut::passes {

Pass dedupeAttributesPass(SameConstantFn sameConstant, ConstantKeyFn constantKey) {
  return {"dedupe-attributes", [sameConstant, constantKey](ir::Program& p) {
    // (kind, FQN) of the first spec lifting it. Hashed: a deep model lifts
    // 10^4 tensors whose names share long prefixes ("model.layers.1234."),
    // and an ordered map compared them along every path down the tree. The
    // views point into p.inputSpecs, which this loop only reads.
    struct KeyHash {
      size_t operator()(const std::pair<int, std::string_view>& k) const {
        return std::hash<std::string_view>{}(k.second) * 31 + static_cast<size_t>(k.first);
      }
    };
    std::unordered_map<std::pair<int, std::string_view>, size_t, KeyHash> firstByTarget;
    firstByTarget.reserve(p.inputSpecs.size());
    // Indices of kept tensor-constant specs, by constantKey (one bucket
    // without it), in the order kept.
    std::unordered_map<std::string, std::vector<size_t>> constants;
    std::vector<bool> drop(p.inputSpecs.size(), false);
    bool changed = false;
    std::unordered_set<const ir::Value*> state;
    if (sameConstant)
      for (const auto& st : ir::findState(p)) state.insert(st.placeholder);
    for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
      const ir::InputSpec& s = p.inputSpecs[i];
      bool lifted = s.kind == ir::InputKind::Parameter || s.kind == ir::InputKind::Buffer ||
                    s.kind == ir::InputKind::TensorConstant;
      if (!lifted) continue;
      size_t keepIndex = p.inputSpecs.size();
      auto key = std::make_pair(static_cast<int>(s.kind), std::string_view(s.target));
      auto it = firstByTarget.find(key);
      std::vector<size_t>* bucket = nullptr;
      if (it != firstByTarget.end()) {
        keepIndex = it->second;
      } else if (s.kind == ir::InputKind::TensorConstant && sameConstant && !state.count(s.arg.value())) {
        bucket = &constants[constantKey ? constantKey(s.target) : std::string()];
        for (size_t c : *bucket)
          if (sameConstant(p.inputSpecs[c].target, s.target)) keepIndex = c;
      }
      if (keepIndex == p.inputSpecs.size()) {
        firstByTarget.emplace(key, i);
        if (bucket) bucket->push_back(i);
        continue;
      }
      ir::replaceAllUses(p, s.arg.value(), p.inputSpecs[keepIndex].arg.value());
      drop[i] = true;
      changed = true;
    }
    if (!changed) return false;
    ir::dropInputs(p, drop);
    return true;
  }};
}

}  // namespace pipecut::passes
