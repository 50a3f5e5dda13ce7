#include "passes/grouped_query_attention.h"

#include <optional>
#include <string_view>
#include <vector>

#include "passes/pass_manager.h"

namespace pipecut::passes {

namespace {

// The node that made `v`, when it is a call of `target`.
const ir::Node* producerOf(const ir::Value* v, std::string_view target) {
  return v && v->producer && v->producer->target == target ? v->producer : nullptr;
}

const std::vector<ir::SymInt>* sizesOf(const ir::Value* v, size_t rank) {
  return v && v->meta && v->meta->sizes.size() == rank ? &v->meta->sizes : nullptr;
}

std::optional<int64_t> intInput(const ir::Node& n, std::string_view name) {
  const ir::NamedArgument* a = n.input(name);
  if (!a || a->arg.tag != ir::ArgTag::Int || !a->arg.literal.is_number_integer()) return std::nullopt;
  return a->arg.literal.get<int64_t>();
}

// `wide` as unsqueeze(narrow, 2) -> expand to [b, h, groups, s, d] ->
// reshape to [b, h * groups, s, d], head i of it being head i / groups of
// `narrow` [b, h, s, d]. The sizes are read from the values' metadata,
// which export recorded from the run, rather than from the size arguments
// (where -1 and symbols stand for them).
struct Widening {
  ir::Value* narrow = nullptr;
  int64_t heads = 0, groups = 0;
};

std::optional<Widening> widening(const ir::Value* wide) {
  const ir::Node* reshape = producerOf(wide, "torch.ops.aten.reshape.default");
  if (!reshape) reshape = producerOf(wide, "torch.ops.aten.view.default");
  if (!reshape) return std::nullopt;
  const ir::Value* expanded = reshape->tensorInput("self");
  const ir::Node* expand = producerOf(expanded, "torch.ops.aten.expand.default");
  if (!expand) return std::nullopt;
  const ir::Node* unsqueeze = producerOf(expand->tensorInput("self"), "torch.ops.aten.unsqueeze.default");
  if (!unsqueeze) return std::nullopt;
  // Dimension 2 of the 5-d result (-3 counts from its end): a new axis after
  // the heads, so each head is repeated in place (dimension 1 would tile
  // the heads instead).
  std::optional<int64_t> dim = intInput(*unsqueeze, "dim");
  if (!dim || (*dim != 2 && *dim != -3)) return std::nullopt;
  ir::Value* narrow = unsqueeze->tensorInput("self");
  const auto* x = sizesOf(narrow, 4);
  const auto* e = sizesOf(expanded, 5);
  const auto* w = sizesOf(wide, 4);
  if (!x || !e || !w) return std::nullopt;
  const ir::SymInt &heads = (*x)[1], &groups = (*e)[2];
  if (heads.isExpr || groups.isExpr || heads.value < 1 || groups.value < 1) return std::nullopt;
  if (!(*e)[0].sameAs((*x)[0]) || !(*e)[1].sameAs(heads) || !(*e)[3].sameAs((*x)[2]) ||
      !(*e)[4].sameAs((*x)[3]))
    return std::nullopt;
  if (!(*w)[0].sameAs((*x)[0]) || (*w)[1].isExpr || (*w)[1].value != heads.value * groups.value ||
      !(*w)[2].sameAs((*x)[2]) || !(*w)[3].sameAs((*x)[3]))
    return std::nullopt;
  return Widening{narrow, heads.value, groups.value};
}

bool narrowAttention(ir::Node& n) {
  if (n.target != kAttentionTarget) return false;
  ir::NamedArgument* key = n.input("key");
  ir::NamedArgument* value = n.input("value");
  if (!key || !value || key->arg.tag != ir::ArgTag::Tensor || value->arg.tag != ir::ArgTag::Tensor) return false;
  if (const ir::NamedArgument* dropout = n.input("dropout_p")) {
    const ir::Json& p = dropout->arg.literal;
    if (dropout->arg.tag != ir::ArgTag::Float || !p.is_number() || p.get<double>() != 0.0) return false;
  }
  const auto* q = sizesOf(n.tensorInput("query"), 4);
  std::optional<Widening> k = widening(key->arg.value()), v = widening(value->arg.value());
  if (!q || !k || !v || k->heads != v->heads || k->groups != v->groups) return false;
  if ((*q)[1].isExpr || (*q)[1].value != k->heads * k->groups) return false;
  key->arg = ir::Argument::tensor(k->narrow);
  value->arg = ir::Argument::tensor(v->narrow);
  ir::Argument on = ir::Argument::literalOf(ir::ArgTag::Bool, true);
  if (ir::NamedArgument* gqa = n.input("enable_gqa")) gqa->arg = std::move(on);
  else n.inputs.emplace_back("enable_gqa", std::move(on), 2);
  return true;
}

size_t narrowAttentionIn(ir::Graph& g) {
  size_t count = 0;
  for (auto& n : g.nodes) {
    count += narrowAttention(*n);
    for (ir::Graph* body : n->subgraphs()) count += narrowAttentionIn(*body);
  }
  return count;
}

}  // namespace

size_t useGroupedQueryAttention(ir::Program& p) { return narrowAttentionIn(p.graph); }

Pass groupedQueryAttentionPass() {
  return {"grouped-query-attention", [](ir::Program& p) { return useGroupedQueryAttention(p) > 0; }};
}

}  // namespace pipecut::passes
