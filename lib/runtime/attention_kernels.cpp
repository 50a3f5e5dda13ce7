#include "runtime/attention_kernels.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/constants.h>

namespace pipecut::runtime {

namespace {

// aten::scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
// is_causal, *, scale, enable_gqa): TorchScript passes every argument.
constexpr size_t kKey = 1, kValue = 2, kMask = 3, kEnableGqa = 7, kArgs = 8;

bool isTrue(torch::jit::Value* v) {
  std::optional<c10::IValue> c = torch::jit::toIValue(v);
  return c && c->isBool() && c->toBool();
}

size_t widenIn(torch::jit::Block* block) {
  static const c10::Symbol kAttention = c10::Symbol::fromQualString("aten::scaled_dot_product_attention");
  size_t count = 0;
  for (torch::jit::Node* n : block->nodes()) {
    for (torch::jit::Block* sub : n->blocks()) count += widenIn(sub);
    if (n->kind() != kAttention || n->inputs().size() != kArgs || !isTrue(n->input(kEnableGqa))) continue;
    if (n->input(kMask)->type()->kind() == c10::TypeKind::NoneType) continue;
    torch::jit::Graph& g = *n->owningGraph();
    torch::jit::WithInsertPoint at(n);
    torch::jit::Value* heads = g.insertConstant(-3);
    torch::jit::Value* queryHeads = g.insert(c10::aten::size, {n->input(0), heads});
    auto widen = [&](torch::jit::Value* x) {
      torch::jit::Value* groups = g.insert(c10::aten::floordiv, {queryHeads, g.insert(c10::aten::size, {x, heads})});
      return g.insert(c10::aten::repeat_interleave, {x, groups}, {torch::jit::NamedValue("dim", heads)});
    };
    n->replaceInput(kKey, widen(n->input(kKey)));
    n->replaceInput(kValue, widen(n->input(kValue)));
    n->replaceInput(kEnableGqa, g.insertConstant(false));
    ++count;
  }
  return count;
}

}  // namespace

size_t widenMaskedGroupedAttention(torch::jit::Module& m) {
  size_t count = 0;
  for (const torch::jit::Module& owner : m.modules())
    for (const torch::jit::Method& method : owner.get_methods()) count += widenIn(method.graph()->block());
  return count;
}

}  // namespace pipecut::runtime
