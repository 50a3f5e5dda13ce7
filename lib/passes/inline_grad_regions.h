#pragma once
// Inlines every top-level `wrap_with_set_grad_enabled` region of a program,
// and every top-level `wrap_with_autocast` region that disables autocast: the
// region's body nodes take the node's place, its operands stand for the
// body's inputs and its results for the node's outputs. Under inference (no
// autograd, and nothing enabling autocast around a stage) such a region
// changes no result, and LibTorch's NativeRT refuses both ops ("Unknown
// higher order op"), so `pipecut split --inline-grad-regions` writes .pt2
// stages without them. Training needs the grad regions: this is for stages
// that only run forward. An enabled autocast region changes dtypes and stays.
#include <cstddef>

#include "ir/ir.h"

namespace pipecut::passes {

// Returns how many regions were inlined. Body values keep their names unless
// the program already uses one ("<name>_inlined", then "<name>_inlined_<k>"). Throws
// pipecut::Error (InvalidInput) naming the node for a region whose operands do
// not match its body.
size_t inlineGradRegions(ir::Program& p);

// Whether inlineGradRegions inlines `n` were it at top level: a grad region,
// or an autocast region that disables autocast.
bool inlinesRegion(const ir::Node& n);

}  // namespace pipecut::passes
