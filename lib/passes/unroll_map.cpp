#include "passes/unroll_map.h"

#include <memory>
#include <optional>

#include "ir/clone.h"
#include "passes/pass_manager.h"
#include "support/error.h"

namespace pipecut::passes {

namespace {

// The metadata of `x[i]` for a tensor with static sizes and strides.
ir::TensorMeta sliceMeta(const ir::TensorMeta& m, int64_t i) {
  ir::TensorMeta s = m;
  s.sizes.erase(s.sizes.begin());
  s.strides.erase(s.strides.begin());
  s.storageOffset.value = m.storageOffset.value + i * m.strides[0].value;
  return s;
}

// Whether `x`'s metadata is static enough to slice: its length along dim 0
// when it is.
std::optional<int64_t> staticLength(const ir::Value* x) {
  if (!x || !x->meta || x->meta->sizes.empty() || x->meta->strides.size() != x->meta->sizes.size()) return std::nullopt;
  const ir::TensorMeta& m = *x->meta;
  if (m.storageOffset.isExpr) return std::nullopt;
  for (const auto& s : m.sizes) if (s.isExpr) return std::nullopt;
  for (const auto& s : m.strides) if (s.isExpr) return std::nullopt;
  return m.sizes[0].value;
}

// The node's operands when it can be unrolled: N slices.
struct MapCall : MapOperands {
  int64_t length = 0;
};

std::optional<MapCall> unrollable(const ir::Node& n) {
  std::optional<MapOperands> operands = mapOperands(n);
  if (!operands) return std::nullopt;
  MapCall c;
  static_cast<MapOperands&>(c) = std::move(*operands);
  std::optional<int64_t> length;
  for (ir::Value* x : c.xs) {
    auto len = staticLength(x);
    if (!len || (length && *len != *length)) return std::nullopt;
    length = len;
  }
  if (*length < 1 || *length > kMaxUnroll) return std::nullopt;
  c.length = *length;
  return c;
}

}  // namespace

std::optional<MapOperands> mapOperands(const ir::Node& n) {
  if (n.target != kMapTarget || n.inputs.size() != 3 || !n.inputs[0].arg.body()) return std::nullopt;
  MapOperands c;
  c.body = n.inputs[0].arg.body();
  for (const auto& r : n.inputs[1].arg.refs) c.xs.push_back(r.value);
  for (const auto& r : n.inputs[2].arg.refs) c.additional.push_back(r.value);
  if (c.xs.empty() || c.body->inputs.size() != c.xs.size() + c.additional.size()) return std::nullopt;
  for (ir::Value* v : c.additional) if (!v) return std::nullopt;
  // Every result is one tensor, which the rewrite defines in the map's place.
  if (n.outputs.size() != c.body->outputs.size()) return std::nullopt;
  for (const auto& o : n.outputs) if (o.tag != ir::ArgTag::Tensor || !o.value()) return std::nullopt;
  for (const auto& o : c.body->outputs) if (!o.value()) return std::nullopt;
  return c;
}

bool mapUnrollable(const ir::Node& n) { return n.target == kMapTarget && unrollable(n).has_value(); }

size_t unrollStaticMaps(ir::Program& p) {
  ir::Graph& g = p.graph;
  size_t unrolled = 0;
  std::vector<std::unique_ptr<ir::Node>> nodes;
  nodes.reserve(g.nodes.size());
  for (auto& node : g.nodes) {
    std::optional<MapCall> call = node->target == kMapTarget ? unrollable(*node) : std::nullopt;
    if (!call) {
      nodes.push_back(std::move(node));
      continue;
    }
    std::vector<std::vector<ir::Value*>> results(call->body->outputs.size());
    for (int64_t i = 0; i < call->length; ++i) {
      const std::string suffix = "_map" + std::to_string(i);
      ir::ValueMap map;
      for (size_t k = 0; k < call->xs.size(); ++k) {
        ir::Value* x = call->xs[k];
        auto sel = std::make_unique<ir::Node>();
        sel->target = "torch.ops.aten.select.int";
        sel->metadata = node->metadata;
        sel->moduleStack = node->moduleStack;
        sel->inputs = {ir::NamedArgument{"self", ir::Argument::tensor(x), 1},
                       ir::NamedArgument{"dim", ir::Argument::integer(0), 1},
                       ir::NamedArgument{"index", ir::Argument::integer(i), 1}};
        const std::string name = ir::freshName(g, x->name, suffix);  // x's own name is taken: x
        ir::Value* slice = g.define(name, ir::ValueKind::Tensor, sel.get());
        slice->meta = sliceMeta(*x->meta, i);
        sel->outputs.push_back(ir::Argument::tensor(slice));
        sel->name = name;
        if (const ir::Value* formal = call->body->inputs[k].value()) map[formal] = slice;
        nodes.push_back(std::move(sel));
      }
      for (size_t k = 0; k < call->additional.size(); ++k)
        if (const ir::Value* formal = call->body->inputs[call->xs.size() + k].value()) map[formal] = call->additional[k];
      for (const auto& bn : call->body->nodes) nodes.push_back(ir::copyNodeFresh(*bn, g, map, suffix));
      for (size_t j = 0; j < results.size(); ++j) results[j].push_back(map.at(call->body->outputs[j].value()));
    }
    // stack defines each of the map's results: their users need no rewrite.
    for (size_t j = 0; j < results.size(); ++j) {
      ir::Value* out = node->outputs[j].value();
      auto st = std::make_unique<ir::Node>();
      st->target = "torch.ops.aten.stack.default";
      st->metadata = node->metadata;
      st->moduleStack = node->moduleStack;
      ir::Argument tensors;
      tensors.tag = ir::ArgTag::Tensors;
      for (ir::Value* r : results[j]) tensors.refs.push_back(ir::Ref{r, nullptr});
      st->inputs = {ir::NamedArgument{"tensors", tensors, 1}, ir::NamedArgument{"dim", ir::Argument::integer(0), 1}};
      st->outputs.push_back(ir::Argument::tensor(out));
      st->name = out->name;
      out->producer = st.get();
      nodes.push_back(std::move(st));
    }
    ++unrolled;
  }
  g.nodes = std::move(nodes);
  if (unrolled) g.pruneValues();
  return unrolled;
}

Pass unrollStaticMapsPass() {
  return {"unroll-static-maps", [](ir::Program& p) { return unrollStaticMaps(p) > 0; }};
}

}  // namespace pipecut::passes
