#include "runtime/linear_kernels.h"

#include <algorithm>
#include <optional>
#include <vector>

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

// W when `v` is W transposed as a matrix (aten::t, aten::permute(W, [1, 0]),
// aten::transpose(W, 0, 1)), as core ATen writes a linear's weight.
jit::Value* transposedFrom(jit::Value* v) {
  jit::Node* n = v->node();
  // A constant int, or a list of them (a constant, or, as a loaded module
  // holds `[1, 0]`, a prim::ListConstruct of constants).
  auto ints = [](jit::Value* x) -> std::optional<std::vector<int64_t>> {
    std::optional<c10::IValue> c = jit::toIValue(x);
    if (c && c->isIntList()) return c->toIntVector();
    if (c && c->isInt()) return std::vector<int64_t>{c->toInt()};
    if (x->node()->kind() != c10::prim::ListConstruct) return std::nullopt;
    std::vector<int64_t> out;
    for (jit::Value* item : x->node()->inputs()) {
      std::optional<c10::IValue> e = jit::toIValue(item);
      if (!e || !e->isInt()) return std::nullopt;
      out.push_back(e->toInt());
    }
    return out;
  };
  if (n->kind() == c10::aten::t && n->inputs().size() == 1) return n->input(0);
  if (n->kind() == c10::aten::permute && n->inputs().size() == 2 && ints(n->input(1)) == std::vector<int64_t>{1, 0})
    return n->input(0);
  if (n->kind() == c10::aten::transpose && n->inputs().size() == 3) {
    auto a = ints(n->input(1)), b = ints(n->input(2));
    if (a && b && a->size() == 1 && b->size() == 1) {
      const int64_t lo = std::min((*a)[0], (*b)[0]), hi = std::max((*a)[0], (*b)[0]);
      if ((lo == 0 && hi == 1) || (lo == -2 && hi == -1)) return n->input(0);
    }
  }
  return nullptr;
}

bool isOne(jit::Value* v) {
  std::optional<c10::IValue> c = jit::toIValue(v);
  return c && ((c->isInt() && c->toInt() == 1) || (c->isDouble() && c->toDouble() == 1.0));
}

// The operands of the linear layer `n` computes, when it is one:
// aten::linear(x, W, b?), or core ATen's aten::mm(x, W^T) and
// aten::addmm(b, x, W^T) with beta and alpha 1. `bias` is null for none.
struct LinearOperands {
  jit::Value *x = nullptr, *weight = nullptr, *bias = nullptr;
};

std::optional<LinearOperands> linearOf(jit::Node* n) {
  if (n->outputs().size() != 1) return std::nullopt;
  if (n->kind() == c10::aten::linear && n->inputs().size() == 3) {
    jit::Value* b = n->input(2);
    return LinearOperands{n->input(0), n->input(1), b->type()->kind() == c10::TypeKind::NoneType ? nullptr : b};
  }
  if (n->kind() == c10::aten::mm && n->inputs().size() == 2)
    if (jit::Value* w = transposedFrom(n->input(1))) return LinearOperands{n->input(0), w, nullptr};
  if (n->kind() == c10::aten::addmm && n->inputs().size() == 5 && isOne(n->input(3)) && isOne(n->input(4)))
    if (jit::Value* w = transposedFrom(n->input(2))) return LinearOperands{n->input(1), w, n->input(0)};
  return std::nullopt;
}

// The arguments every rewritten call shares, made before the graph's first
// node on first use: "none" (no fused activation), no scalars, and None
// (no algorithm; no bias).
struct SharedArguments {
  jit::Graph& graph;
  jit::Value *activation = nullptr, *scalars = nullptr, *none = nullptr;

  void make() {
    if (activation) return;
    jit::WithInsertPoint front(graph.nodes().front());
    activation = graph.insertConstant(std::string("none"));
    scalars = graph.insertNode(graph.createList(c10::OptionalType::create(c10::NumberType::get()), {}))->output();
    none = graph.insertConstant(c10::IValue());
  }
};

size_t routeIn(jit::Block* block, jit::Value* self, const c10::IValue& selfValue, SharedArguments& shared) {
  static const c10::Symbol kOneDnnLinear = c10::Symbol::fromQualString("mkldnn::_linear_pointwise");
  size_t count = 0;
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    jit::Node* n = *it++;  // n may be destroyed below
    for (jit::Block* sub : n->blocks()) count += routeIn(sub, self, selfValue, shared);
    std::optional<LinearOperands> op = linearOf(n);
    if (!op) continue;
    std::optional<c10::IValue> weight = attributeOf(op->weight, self, selfValue);
    if (!eligible(weight, 2)) continue;
    if (op->bias) {
      std::optional<c10::IValue> bias = attributeOf(op->bias, self, selfValue);
      // addmm broadcasts its first operand; a linear's bias is one value per output.
      if (!eligible(bias, 1) || bias->toTensor().size(0) != weight->toTensor().size(0)) continue;
    }
    shared.make();
    // mkldnn::_linear_pointwise(Tensor X, Tensor W, Tensor? B, str attr, Scalar?[] scalars, str? algorithm)
    jit::Node* call = shared.graph.create(kOneDnnLinear, {op->x, op->weight, op->bias ? op->bias : shared.none,
                                                          shared.activation, shared.scalars, shared.none});
    call->output()->setType(n->output()->type());
    call->insertBefore(n);
    if (!call->maybeOperator()) internalError("routeLinearsToOneDnn", "mkldnn::_linear_pointwise's schema does not match");
    n->output()->replaceAllUsesWith(call->output());
    n->destroy();  // a transpose it read stays, a view nothing reads
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
