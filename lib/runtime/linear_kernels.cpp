#include "runtime/linear_kernels.h"

#include <optional>

#include <ATen/Context.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "support/error.h"

namespace pipecut::runtime {

namespace {

namespace jit = torch::jit;

// The module attribute `v` reads, following prim::GetAttr from the method's
// self; nullopt for anything computed.
std::optional<c10::IValue> attributeOf(jit::Value* v, jit::Value* self, const c10::IValue& selfValue) {
  if (v == self) return selfValue;
  jit::Node* n = v->node();
  if (n->kind() != c10::prim::GetAttr) return std::nullopt;
  std::optional<c10::IValue> owner = attributeOf(n->input(0), self, selfValue);
  if (!owner || !owner->isObject()) return std::nullopt;
  const c10::intrusive_ptr<c10::ivalue::Object> object = owner->toObject();
  const std::string& name = n->s(c10::attr::name);
  if (!object->type()->hasAttribute(name)) return std::nullopt;
  return object->getAttr(name);
}

bool eligible(const std::optional<c10::IValue>& v, int64_t dim) {
  if (!v || !v->isTensor()) return false;
  const at::Tensor& t = v->toTensor();
  if (!t.defined() || t.scalar_type() != at::kFloat || t.dim() != dim || !t.is_contiguous() || !t.device().is_cpu() ||
      t.layout() != at::kStrided || t.is_quantized())
    return false;
  for (int64_t d = 0; d < dim; ++d)
    if (t.size(d) == 0) return false;
  return true;
}

// The arguments every rewritten call shares, made before the graph's first
// node on first use: "none" (no fused activation), no scalars, no algorithm.
struct SharedArguments {
  jit::Graph& graph;
  jit::Value *activation = nullptr, *scalars = nullptr, *algorithm = nullptr;

  void make() {
    if (activation) return;
    jit::WithInsertPoint front(graph.nodes().front());
    activation = graph.insertConstant(std::string("none"));
    scalars = graph.insertNode(graph.createList(c10::OptionalType::create(c10::NumberType::get()), {}))->output();
    algorithm = graph.insertConstant(c10::IValue());
  }
};

size_t routeIn(jit::Block* block, jit::Value* self, const c10::IValue& selfValue, SharedArguments& shared) {
  static const c10::Symbol kOneDnnLinear = c10::Symbol::fromQualString("mkldnn::_linear_pointwise");
  size_t count = 0;
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    jit::Node* n = *it++;  // n may be destroyed below
    for (jit::Block* sub : n->blocks()) count += routeIn(sub, self, selfValue, shared);
    // aten::linear(Tensor input, Tensor weight, Tensor? bias=None)
    if (n->kind() != c10::aten::linear || n->inputs().size() != 3 || n->outputs().size() != 1) continue;
    if (!eligible(attributeOf(n->input(1), self, selfValue), 2)) continue;
    jit::Value* bias = n->input(2);
    if (bias->type()->kind() != c10::TypeKind::NoneType && !eligible(attributeOf(bias, self, selfValue), 1)) continue;
    shared.make();
    // mkldnn::_linear_pointwise(Tensor X, Tensor W, Tensor? B, str attr, Scalar?[] scalars, str? algorithm)
    jit::Node* call = shared.graph.create(kOneDnnLinear, {n->input(0), n->input(1), bias, shared.activation,
                                                          shared.scalars, shared.algorithm});
    call->output()->setType(n->output()->type());
    call->insertBefore(n);
    if (!call->maybeOperator()) internalError("routeLinearsToOneDnn", "mkldnn::_linear_pointwise's schema does not match");
    n->output()->replaceAllUsesWith(call->output());
    n->destroy();
    ++count;
  }
  return count;
}

}  // namespace

bool oneDnnAvailable() {
  static const bool registered =
      !jit::getAllOperatorsFor(c10::Symbol::fromQualString("mkldnn::_linear_pointwise")).empty();
  return registered && at::hasMKLDNN() && at::globalContext().userEnabledMkldnn();
}

size_t routeLinearsToOneDnn(jit::Graph& graph, const c10::IValue& self) {
  if (!oneDnnAvailable() || graph.inputs().empty() || graph.nodes().begin() == graph.nodes().end()) return 0;
  SharedArguments shared{graph};
  return routeIn(graph.block(), graph.inputs()[0], self, shared);
}

size_t routeLinearsToOneDnn(jit::Module& m) {
  size_t count = 0;
  for (const jit::Module& owner : m.modules())
    for (const jit::Method& method : owner.get_methods()) count += routeLinearsToOneDnn(*method.graph(), owner._ivalue());
  return count;
}

}  // namespace pipecut::runtime
