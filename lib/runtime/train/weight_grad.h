#pragma once
// Zero-bubble's split backward without doing the input-gradient pass twice.
//
// I computes the gradients of a stage's inputs; W later computes those of
// its parameters. Running W as a second backward from the stage's outputs
// to its parameters would repeat most of I (on a loss stage, I + W took
// 1.65x one full backward). Instead, before I, the nodes of the autograd
// graph where a branch towards the parameters leaves the paths towards the
// inputs are hooked; I records the gradients those nodes receive; W starts
// from those nodes with those gradients and computes only the parameter
// branches (the engine evaluates just what the requested outputs need).
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipecut::runtime {

class WeightGradCapture {
 public:
  // Call after the forward, before I (torch::autograd::grad of `outputs`
  // with respect to `inputs`, retaining the graph).
  WeightGradCapture(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& gradOutputs,
                    const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& params);
  ~WeightGradCapture();
  WeightGradCapture(const WeightGradCapture&) = delete;
  WeightGradCapture& operator=(const WeightGradCapture&) = delete;

  // After I: the gradients of `params` (undefined where a parameter got
  // none). Frees the graph.
  std::vector<at::Tensor> weightGrads();

  struct State;  // public for the hook that records into it (weight_grad.cpp)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace pipecut::runtime
