#pragma once
// What pipecut knows about an operator without its schema, read from the
// node's target ("torch.ops.aten.add_.Tensor"). The one home of every rule
// that asks what kind of operator a node is: dead-code elimination and
// deduplication (effects), recomputation at stage boundaries (state, heavy
// compute), FLOP counting (the aten name) and TorchScript emission (export's
// guards). The core has no operator registry, so these are name rules; each
// says which names it knows, and unknown operators get the safe answer.
#include <optional>
#include <string_view>

#include "ir/ir.h"

namespace pipecut::ir {

// "torch.ops.<ns>.<op>.<overload>" split at its dots; nullopt for targets
// outside torch.ops (Python operators "_operator.add", "math.ceil", the
// symbolic "torch.sym_max"). Higher-order ops have ns "higher_order" and no
// overload. Views `target`.
struct OpTarget {
  std::string_view ns, op, overload;
};
std::optional<OpTarget> parseOpTarget(std::string_view target);

// "mm" for torch.ops.aten.mm.default; "" for every other namespace.
std::string_view atenOp(const Node& n);

// An aten in-place op ("torch.ops.aten.index_copy_.default": a name ending
// in one '_'); its first input is the tensor it writes, and its result is
// that tensor again.
bool isInPlace(const Node& n);

// Must not be removed although nothing uses its outputs: it mutates an
// argument (in-place or out= overloads, batch norm's running stats), consumes
// the random stream (dropping one would shift every later draw), asserts, is
// a custom op whose effects are unknown, or is a higher-order op whose body
// does any of these.
bool hasSideEffects(const Node& n);
// Must not be computed twice (recomputed in another stage): as
// hasSideEffects, but assertions may be repeated.
bool changesState(const Node& n);

// Export's own guards (tensor metadata, scalar asserts, symbolic range
// constraints): they re-check what export proved, and TorchScript has no ops
// for them, so emission drops them.
bool isExportGuard(const Node& n);

// Dense compute (matrix products, convolutions, attention, embedding
// lookups): too costly to recompute in a consuming stage instead of sending
// its result.
bool isComputeHeavy(const Node& n);

}  // namespace pipecut::ir
