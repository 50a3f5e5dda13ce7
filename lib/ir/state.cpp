#include "ir/state.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace pipecut::ir {

namespace {

// The tensor an in-place op writes: its first input's value.
const Value* written(const Node& n) {
  if (!isInPlace(n) || n.inputs.empty()) return nullptr;
  const Argument& a = n.inputs.front().arg;
  return a.refs.size() == 1 ? a.refs[0].value : nullptr;
}

}  // namespace

std::vector<StateTensor> findState(const Program& p) {
  // Lifted tensors by placeholder value.
  std::unordered_map<const Value*, size_t> lifted;
  for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
    const InputSpec& s = p.inputSpecs[i];
    if ((s.kind == InputKind::Buffer || s.kind == InputKind::TensorConstant) && s.arg.refs.size() == 1 && s.arg.refs[0].value)
      lifted.emplace(s.arg.refs[0].value, i);
  }
  // Each value's root when it is a lifted tensor or an in-place result on one.
  std::unordered_map<const Value*, const Value*> root;
  for (const auto& [v, i] : lifted) root.emplace(v, v);
  std::unordered_set<const Value*> mutated;
  for (const auto& n : p.graph.nodes) {
    const Value* w = written(*n);
    auto it = w ? root.find(w) : root.end();
    if (it == root.end()) continue;
    mutated.insert(it->second);
    for (const Argument& out : n->outputs)
      for (const auto& r : out.refs)
        if (r.value) root.emplace(r.value, it->second);
  }
  std::unordered_map<const Value*, size_t> index;  // mutated root -> position in `out`
  std::vector<StateTensor> out;
  for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
    const InputSpec& s = p.inputSpecs[i];
    if (s.arg.refs.size() != 1 || !mutated.count(s.arg.refs[0].value)) continue;
    if (index.count(s.arg.refs[0].value)) continue;  // the same placeholder twice
    index.emplace(s.arg.refs[0].value, out.size());
    out.push_back({i, s.arg.refs[0].value, {}});
  }
  for (const auto& n : p.graph.nodes) {
    std::vector<size_t> seen;
    n->forEachInputValue([&](Value* v) {
      auto r = root.find(v);
      if (r == root.end()) return;
      auto k = index.find(r->second);
      if (k == index.end() || std::find(seen.begin(), seen.end(), k->second) != seen.end()) return;
      seen.push_back(k->second);
      out[k->second].touching.push_back(n.get());
    });
  }
  return out;
}

}  // namespace pipecut::ir
