#pragma once
// Rewrites every top-level `map_impl` as a `while_loop` that computes the
// same result: a counter i carried from 0 while i < N (N the mapped
// length, `sym_size` of the first mapped input when it is symbolic), and
// for each result a buffer of N rows carried along, row i written by
// `index_copy` from the body's result on row i of each mapped input
// (`index_select` + `squeeze`). AOTInductor in torch 2.11 compiles
// while_loop but fails on map (its own lowering of map to a loop trips its
// C++ wrapper), and LibTorch's NativeRT knows no map but runs while_loop:
// `pipecut compile` and `split --inline-grad-regions` apply this to the
// maps unrollStaticMaps (passes/unroll_map.h) leaves: a symbolic length,
// or more than kMaxUnroll slices. The loop's bodies take tensors only
// (NativeRT refuses a SymInt body input): the condition reads a symbolic
// length with sym_size from the first mapped input.
//
// A map is left as it is when a result of its body has a symbolic size
// (the buffer's rows would have no size to allocate with), or its mapped
// inputs disagree on their length.
#include <cstddef>

#include "ir/ir.h"

namespace pipecut::passes {

// Returns how many maps became loops.
size_t mapsAsLoops(ir::Program& p);

// Whether mapsAsLoops would rewrite `n` were it at top level.
bool mapLoopable(const ir::Node& n);

}  // namespace pipecut::passes
