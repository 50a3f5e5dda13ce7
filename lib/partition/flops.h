#pragma once
// FLOPs per node, counted from the shapes recorded in the graph, for
// `pipecut split --balance flops`. The formulas (a multiply-add counts 2):
//   mm, bmm, matmul, linear:      2 * numel(out) * K          (K: the contracted size)
//   addmm, baddbmm, linear+bias:  the above + numel(out)
//   convolution (any rank):       2 * numel(out) * numel(weight) / C_out (+ numel(out) with bias)
//   scaled_dot_product_attention: 2 * B * L * S * (E + E_v)   (B: all of q's leading dims)
//                                 + 5 * B * L * S (scale, mask, softmax)
//   softmax, log_softmax, layer/rms/group/batch norm: 5 * numel(input)
//   reductions (sum, mean, amax, var, ...): numel(input)
//   views, copies, gathers, factories, shape arithmetic: 0
//   any other operator (elementwise): numel(out)
//   a higher-order op: the sum over its body.
// Symbolic sizes count at the example value export recorded (the hint).
#include <cstdint>
#include <string>

#include "ir/ir.h"

namespace pipecut::partition {

// Throws pipecut::Error (InvalidInput) naming the node when a size it needs
// is symbolic without an example value.
double nodeFlops(const ir::Node& node);

}  // namespace pipecut::partition
