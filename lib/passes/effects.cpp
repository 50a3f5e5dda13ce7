// Which nodes must survive dead-code elimination even when nothing uses their
// outputs. Without operator schemas in the core, this reads the target name:
// in-place and out= overloads, asserts, RNG consumers (dropping one would shift
// the random stream of every later op), and anything outside known-pure
// namespaces.
#include <array>
#include <string_view>

#include "passes/pass_manager.h"

namespace pipecut::passes {

namespace {

constexpr std::array<std::string_view, 12> kPureHigherOrder = {
    "wrap_with_set_grad_enabled", "wrap_with_autocast", "cond", "map_impl", "while_loop",
    "invoke_subgraph", "scan", "associative_scan", "flex_attention", "tag_activation_checkpoint",
    "checkpoint", "invoke_quant"};

// aten ops that mutate an argument or consume RNG without a trailing '_' in their name.
constexpr std::array<std::string_view, 6> kAssertions = {
    "_assert_async", "_assert_scalar", "_assert_tensor_metadata", "sym_constrain_range",
    "sym_constrain_range_for_size", "_print"};

constexpr std::array<std::string_view, 18> kEffectfulAten = {
    "_native_batch_norm_legit", "native_batch_norm",
    "_batch_norm_with_update", "batch_norm", "_fused_moving_avg_obs_fq_helper", "rrelu_with_noise",
    "dropout", "native_dropout", "bernoulli", "rand", "randn", "randint", "randperm", "rand_like",
    "randn_like", "randint_like", "multinomial", "normal"};

bool effects(const ir::Node& n, bool countAssertions);

bool subgraphsPure(const ir::Node& n, bool countAssertions) {
  for (const ir::Graph* g : n.subgraphs())
    for (const auto& inner : g->nodes)
      if (effects(*inner, countAssertions)) return false;
  return true;
}

bool effects(const ir::Node& n, bool countAssertions) {
  std::string_view t = n.target;
  if (t.rfind("_operator.", 0) == 0 || t.rfind("math.", 0) == 0 || t.rfind("torch.sym_", 0) == 0) return false;
  constexpr std::string_view hop = "torch.ops.higher_order.";
  if (t.rfind(hop, 0) == 0) {
    std::string_view name = t.substr(hop.size());
    for (auto p : kPureHigherOrder)
      if (name == p) return !subgraphsPure(n, countAssertions);
    return true;
  }
  constexpr std::string_view aten = "torch.ops.aten.";
  if (t.rfind(aten, 0) != 0) return true;  // custom ops: effects unknown, keep them
  std::string_view rest = t.substr(aten.size());
  size_t dot = rest.find('.');
  std::string_view op = rest.substr(0, dot);
  std::string_view overload = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  if (op.size() > 1 && op.back() == '_' && op.substr(op.size() - 2) != "__") return true;  // in-place
  if (overload.rfind("out", 0) == 0) return true;
  for (auto e : kEffectfulAten)
    if (op == e) return true;
  for (auto e : kAssertions)
    if (op == e) return countAssertions;
  return false;
}

}  // namespace

bool hasSideEffects(const ir::Node& n) { return effects(n, true); }
bool changesState(const ir::Node& n) { return effects(n, false); }

}  // namespace pipecut::passes
