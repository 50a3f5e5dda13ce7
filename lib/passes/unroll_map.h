#pragma once
// Unrolls every top-level `map_impl` whose mapped dimension has a static
// length (at most kMaxUnroll): one copy of the body per slice, on
// `select(x, 0, i)` of each mapped input, and `stack` of the per-slice
// results, exactly what map computes. LibTorch's NativeRT (torch 2.11) does
// not know map ("Unknown higher order op: map_impl"), so `pipecut split
// --inline-grad-regions` unrolls it in the .pt2 stages NativeRT runs. A map
// over a symbolic length, or a longer one, is left as it is (and NativeRT
// still refuses it). The TorchScript stages keep their loop.
#include <cstddef>

#include "ir/ir.h"

namespace pipecut::passes {

inline constexpr int64_t kMaxUnroll = 64;
inline constexpr const char* kMapTarget = "torch.ops.higher_order.map_impl";

// Returns how many maps were unrolled.
size_t unrollStaticMaps(ir::Program& p);

}  // namespace pipecut::passes
