#pragma once
// One stage's arithmetic in training, per micro-batch: what the trainer's
// actions (runtime/train/train.cpp) run between receiving and sending. The
// trainer moves values and keeps the schedule; a StageCompute computes.
//
// Two kinds:
//  - autograd over the stage's TorchScript module (autogradStage): the
//    forward records the graph, I and W walk it (runtime/train/weight_grad.h);
//  - pipecut compile --train's AOTInductor programs (compiledStage,
//    runtime/train/compiled_stage.h): F, then I and W (or one B), with no
//    autograd and no TorchScript at run time.
//
// Contract, per micro-batch mb, in order: forward(mb), then either
// backward(mb, weightsToo=true) (B) or backward(mb, false) (I) then
// weights(mb) (W). After B or W nothing of mb is held. Gradients of the
// parameters accumulate into TrainableStage::params[i].grad(), as
// AccumulateGrad would, so that the optimizer, the tied-gradient sum and
// checkpoints see one kind of stage.
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "runtime/train/state.h"

namespace pipecut::runtime {

class StageProgram;

class StageCompute {
 public:
  virtual ~StageCompute() = default;
  // The stage's outputs for `inputs` (forward() argument order).
  // needsGrad[k]: input k comes from another stage that wants its gradient.
  // seed: the micro-batch's microbatchSeed (runtime/train/microbatch_seed.h),
  // which compiled programs' random ops draw from; autograd's TorchScript
  // stages draw from the process's generator instead.
  virtual std::vector<at::Tensor> forward(uint32_t mb, std::vector<at::Tensor> inputs, const std::vector<bool>& needsGrad,
                                          int64_t seed) = 0;
  // Whether output o of micro-batch mb takes a gradient (after forward).
  virtual bool takesGradient(uint32_t mb, uint32_t output) const = 0;
  // I, or B when weightsToo: the inputs' gradients (a tensor for every input
  // with needsGrad, zeros where the output does not depend on it; undefined
  // for the others), from the outputs' (undefined where none arrived).
  virtual std::vector<at::Tensor> backward(uint32_t mb, std::vector<at::Tensor> outGrads, bool weightsToo) = 0;
  // W: the parameters' gradients, accumulated.
  virtual void weights(uint32_t mb) = 0;
  // Per micro-batch, the most bytes held from its forward to its backward
  // (stage inputs included), and from I to W (0 with one B); -1 where not
  // known (autograd's graph). StageStats says what each is for.
  virtual int64_t savedActivationBytes() const { return -1; }
  virtual int64_t heldForWeightsBytes() const { return -1; }
};

// `train` (the stage's parameters, whose .grad() the backward fills) must
// outlive the result; so must `program`, its TorchScript module.
std::unique_ptr<StageCompute> autogradStage(StageProgram& program, TrainableStage& train);

}  // namespace pipecut::runtime
