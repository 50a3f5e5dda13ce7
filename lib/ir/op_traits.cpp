#include "ir/op_traits.h"

#include <array>

namespace pipecut::ir {

namespace {

constexpr std::string_view kOps = "torch.ops.";

// Higher-order ops that only structure their bodies: effectful iff a body is.
constexpr std::array<std::string_view, 12> kPureHigherOrder = {
    "wrap_with_set_grad_enabled", "wrap_with_autocast", "cond", "map_impl", "while_loop",
    "invoke_subgraph", "scan", "associative_scan", "flex_attention", "tag_activation_checkpoint",
    "checkpoint", "invoke_quant"};

constexpr std::array<std::string_view, 6> kAssertions = {
    "_assert_async", "_assert_scalar", "_assert_tensor_metadata", "sym_constrain_range",
    "sym_constrain_range_for_size", "_print"};

// aten ops that mutate an argument or consume RNG without a trailing '_' in their name.
constexpr std::array<std::string_view, 18> kEffectfulAten = {
    "_native_batch_norm_legit", "native_batch_norm",
    "_batch_norm_with_update", "batch_norm", "_fused_moving_avg_obs_fq_helper", "rrelu_with_noise",
    "dropout", "native_dropout", "bernoulli", "rand", "randn", "randint", "randperm", "rand_like",
    "randn_like", "randint_like", "multinomial", "normal"};

constexpr std::array<std::string_view, 9> kHeavyAten = {
    "linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "scaled_dot_product_attention", "embedding", "einsum"};

// A name ending in one '_' ("add_"; not a dunder like "__and__").
bool inPlaceName(std::string_view op) { return op.size() > 1 && op.ends_with('_') && !op.ends_with("__"); }

template <size_t N>
bool among(std::string_view s, const std::array<std::string_view, N>& names) {
  for (auto n : names)
    if (s == n) return true;
  return false;
}

bool effects(const Node& n, bool countAssertions);

bool subgraphsPure(const Node& n, bool countAssertions) {
  for (const Graph* g : n.subgraphs())
    for (const auto& inner : g->nodes)
      if (effects(*inner, countAssertions)) return false;
  return true;
}

bool effects(const Node& n, bool countAssertions) {
  std::optional<OpTarget> t = parseOpTarget(n.target);
  if (!t) {
    std::string_view s = n.target;
    // Python's operators on symbolic ints are pure; anything else unknown is kept.
    return !(s.starts_with("_operator.") || s.starts_with("math.") || s.starts_with("torch.sym_"));
  }
  if (t->ns == "higher_order") return among(t->op, kPureHigherOrder) ? !subgraphsPure(n, countAssertions) : true;
  if (t->ns != "aten") return true;  // custom ops: effects unknown, keep them
  if (inPlaceName(t->op)) return true;
  if (t->overload.starts_with("out")) return true;
  if (among(t->op, kEffectfulAten)) return true;
  if (among(t->op, kAssertions)) return countAssertions;
  return false;
}

}  // namespace

std::optional<OpTarget> parseOpTarget(std::string_view target) {
  if (!target.starts_with(kOps)) return std::nullopt;
  std::string_view rest = target.substr(kOps.size());
  OpTarget t;
  size_t d1 = rest.find('.');
  t.ns = rest.substr(0, d1);
  if (d1 == std::string_view::npos) return t;
  rest = rest.substr(d1 + 1);
  size_t d2 = rest.find('.');
  t.op = rest.substr(0, d2);
  if (d2 != std::string_view::npos) t.overload = rest.substr(d2 + 1);
  return t;
}

bool isInPlace(const Node& n) { return inPlaceName(atenOp(n)); }

std::string_view atenOp(const Node& n) {
  std::optional<OpTarget> t = parseOpTarget(n.target);
  return t && t->ns == "aten" ? t->op : std::string_view();
}

bool hasSideEffects(const Node& n) { return effects(n, true); }
bool changesState(const Node& n) { return effects(n, false); }

bool isExportGuard(const Node& n) {
  std::optional<OpTarget> t = parseOpTarget(n.target);
  if (!t || t->ns != "aten") return false;
  return ((t->op == "_assert_tensor_metadata" || t->op == "_assert_scalar") && t->overload == "default") ||
         t->op.starts_with("sym_constrain_range");
}

bool isComputeHeavy(const Node& n) {
  std::string_view op = atenOp(n);
  return among(op, kHeavyAten) || op.starts_with("conv") || op.starts_with("_scaled_dot_product");
}

}  // namespace pipecut::ir
