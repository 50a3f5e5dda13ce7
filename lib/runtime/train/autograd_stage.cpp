// Training through autograd over a stage's TorchScript module: the inputs
// from other stages are detached leaves that require gradients, so backward
// stops at the stage boundary and the inputs' gradients are what the
// producers receive.
#include <map>

#include <torch/csrc/autograd/autograd.h>
#include <torch/script.h>

#include "runtime/stage_program.h"
#include "runtime/train/stage_compute.h"
#include "runtime/train/weight_grad.h"
#include "support/error.h"

namespace pipecut::runtime {

namespace {

class AutogradStage final : public StageCompute {
 public:
  AutogradStage(StageProgram& program, TrainableStage& train) : program_(program), train_(train) {}

  std::vector<at::Tensor> forward(uint32_t mb, std::vector<at::Tensor> inputs, const std::vector<bool>& needsGrad,
                                  int64_t /*seed*/) override {
    Live live;
    std::vector<c10::IValue> args;
    for (size_t k = 0; k < inputs.size(); ++k) {
      at::Tensor t = std::move(inputs[k]);
      if (needsGrad[k]) t = t.detach().requires_grad_(true);
      live.inputs.push_back(t);
      args.emplace_back(t);
    }
    std::vector<c10::IValue> results = program_.forward(std::move(args));
    std::vector<at::Tensor> out;
    for (auto& r : results) out.push_back(r.toTensor());
    live.outputs = out;
    live_[mb] = std::move(live);
    return out;
  }

  bool takesGradient(uint32_t mb, uint32_t output) const override {
    return live_.at(mb).outputs.at(output).requires_grad();
  }

  std::vector<at::Tensor> backward(uint32_t mb, std::vector<at::Tensor> outGrads, bool weightsToo) override {
    Live& live = live_.at(mb);
    std::vector<at::Tensor> roots, seeds;
    for (size_t o = 0; o < live.outputs.size(); ++o)
      if (live.outputs[o].requires_grad() && outGrads[o].defined()) {
        roots.push_back(live.outputs[o]);
        seeds.push_back(outGrads[o]);
      }
    std::vector<at::Tensor> inputs;
    std::vector<size_t> inputIndex;
    for (size_t k = 0; k < live.inputs.size(); ++k)
      if (live.inputs[k].requires_grad()) {
        inputs.push_back(live.inputs[k]);
        inputIndex.push_back(k);
      }
    std::vector<at::Tensor> inGrads(live.inputs.size());
    if (!roots.empty()) {
      if (weightsToo) {
        torch::autograd::backward(roots, seeds);
        for (size_t i = 0; i < inputs.size(); ++i) inGrads[inputIndex[i]] = inputs[i].grad();
      } else {
        live.weights = std::make_shared<WeightGradCapture>(roots, seeds, inputs, train_.params);
        if (!inputs.empty()) {
          auto g = torch::autograd::grad(roots, inputs, seeds, /*retain_graph=*/true, /*create_graph=*/false,
                                         /*allow_unused=*/true);
          for (size_t i = 0; i < inputs.size(); ++i) inGrads[inputIndex[i]] = g[i];
        }
      }
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::Tensor& g = inGrads[inputIndex[i]];
      g = g.defined() ? g.detach() : at::zeros_like(inputs[i]).detach();
    }
    if (weightsToo) live_.erase(mb);
    return inGrads;
  }

  void weights(uint32_t mb) override {
    Live& live = live_.at(mb);
    const auto& params = train_.params;
    if (!params.empty() && live.weights) {
      std::vector<at::Tensor> g = live.weights->weightGrads();
      at::NoGradGuard noGrad;
      for (size_t i = 0; i < params.size(); ++i) {
        if (!g[i].defined()) continue;
        // A fresh tensor, as AccumulateGrad would make: autograd may
        // return a view (a transposed weight's gradient), and views
        // cannot be detached in place by zero_grad.
        at::Tensor& acc = train_.params[i].mutable_grad();
        if (acc.defined()) acc.add_(g[i]);
        else acc = g[i].clone();
      }
    }
    live_.erase(mb);
  }

 private:
  // Per micro-batch between its forward and its (weight) backward: the
  // stage's inputs (leaves) and outputs.
  struct Live {
    std::vector<at::Tensor> inputs, outputs;
    std::shared_ptr<WeightGradCapture> weights;  // zb1p: set by I, used by W
  };
  StageProgram& program_;
  TrainableStage& train_;
  std::map<uint32_t, Live> live_;
};

}  // namespace

std::unique_ptr<StageCompute> autogradStage(StageProgram& program, TrainableStage& train) {
  return std::make_unique<AutogradStage>(program, train);
}

}  // namespace pipecut::runtime
