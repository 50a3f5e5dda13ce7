#pragma once
// Training through pipecut compile --train's programs: per stage an
// AOTInductor package F (inputs, parameters -> outputs, saved values), I
// (saved values, output gradients -> input gradients, W's live values) and
// W (live values -> parameter gradients), and B, I and W as one program
// (saved values, output gradients -> both gradients), which runs where the
// schedule's backward is one action (B; zb1p's I and W run apart); a stage
// no input gradient leaves (the first) has only F and B. Nothing records a
// graph: the runtime holds the values each program lists and passes them on.
//
// Each package says what its flat inputs and outputs are in its metadata
// ("pipecut.train", scripts/train_compile.py): references into one
// namespace per micro-batch, "param:<fqn>", "buffer:<fqn>", "input:<k>",
// "rng:0" (the micro-batch's seed, runtime/train/microbatch_seed.h: random
// ops draw from it alone), "tangent:<k>" (output k's gradient),
// "output:<k>", "saved:<j>", "live:<j>", "grad_input:<k>", "grad:<fqn>".
// The stage's tensors come from
// its .pt2 (or --weights for a weightless split), parameters as copies the
// optimizer updates. A value is dropped as soon as no later program of its
// micro-batch lists it, so a micro-batch holds between F and I only what I
// and W read, and between I and W only what W reads.
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "manifest/manifest.h"
#include "runtime/options.h"
#include "runtime/train/stage_compute.h"

namespace pipecut::runtime {

class StageWeights;

// The stage's training packages for `device`'s kind, as the manifest lists
// them (format "aoti-train"). Throws pipecut::Error (InvalidInput) naming
// `dir` and the stage when it has none for that device, lacks a program,
// was compiled by another torch, or a package's signature names a tensor
// the stage does not hold. `train` gets the stage's parameters, persistent
// buffers and optimizer.
std::unique_ptr<StageCompute> compiledStage(const std::string& dir, const Stage& info, c10::Device device,
                                            const StageWeights& weights, const OptimizerOptions& optimizer,
                                            TrainableStage& train);

// The files compiledStage reads for stage `info` on a device of kind
// `deviceType` ("cpu", "cuda"): its training packages and its .pt2.
bool compiledStageReads(const Stage& info, const StageFile& file, const std::string& deviceType);

}  // namespace pipecut::runtime
