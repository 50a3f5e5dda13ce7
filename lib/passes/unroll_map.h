#pragma once
// Unrolls every top-level `map_impl` whose mapped dimension has a static
// length (at most kMaxUnroll): one copy of the body per slice, on
// `select(x, 0, i)` of each mapped input, and `stack` of the per-slice
// results, exactly what map computes. LibTorch's NativeRT (torch 2.11) does
// not know map ("Unknown higher order op: map_impl"), so `pipecut split
// --inline-grad-regions` unrolls it in the .pt2 stages NativeRT runs. A map
// over a symbolic length, or a longer one, is left as it is, for
// maps-as-loops (passes/map_as_loop.h). The TorchScript stages keep their loop.
#include <cstddef>
#include <optional>
#include <vector>

#include "ir/ir.h"

namespace pipecut::passes {

inline constexpr int64_t kMaxUnroll = 64;
inline constexpr const char* kMapTarget = "torch.ops.higher_order.map_impl";

// Returns how many maps were unrolled.
size_t unrollStaticMaps(ir::Program& p);

// Whether unrollStaticMaps would unroll `n` were it at top level.
bool mapUnrollable(const ir::Node& n);

// A map_impl node's operands (f, xs, pos_args), when they are as both
// rewrites of a map (unrolling, passes/map_as_loop.h) need: a body taking
// one input per mapped and per additional value, at least one mapped
// input, every result one tensor the body returns.
struct MapOperands {
  const ir::Graph* body = nullptr;
  std::vector<ir::Value*> xs, additional;
};
std::optional<MapOperands> mapOperands(const ir::Node& n);

}  // namespace pipecut::passes
