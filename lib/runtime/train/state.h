#pragma once
// A stage's trainable state: its parameters, persistent buffers and
// optimizer, and how that state becomes checkpoint tensors and back.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim.h>
#include <torch/script.h>

#include "runtime/options.h"

namespace pipecut::runtime {

struct TrainableStage {
  // Parameters that require gradients, in the module's order, under their
  // original FQNs (the stage module registers each tensor at its FQN).
  std::vector<std::string> paramNames;
  std::vector<at::Tensor> params;
  // Persistent buffers: part of the state dict, not trained.
  std::vector<std::string> bufferNames;
  std::vector<at::Tensor> buffers;
  std::unique_ptr<torch::optim::Optimizer> optimizer;  // null when the stage has no parameters
};

// `persistentBuffers`: the FQNs the manifest lists as kind "buffer".
TrainableStage trainableStage(const torch::jit::Module& module, const std::vector<std::string>& persistentBuffers,
                              const OptimizerOptions& o);

// The same from tensors already loaded (a compiled stage's, from its .pt2):
// `params` are the optimizer's to update.
TrainableStage trainableStage(std::vector<std::string> paramNames, std::vector<at::Tensor> params,
                              std::vector<std::string> bufferNames, std::vector<at::Tensor> buffers,
                              const OptimizerOptions& o);

// Checkpoint tensors: parameters and buffers at their FQNs, then the
// optimizer's state of each parameter at "optimizer/<fqn>/<name>".
std::vector<std::pair<std::string, at::Tensor>> checkpointTensors(const TrainableStage& st, const OptimizerOptions& o);

// The inverse: copies values into the parameters and buffers and rebuilds
// the optimizer's state. Throws pipecut::Error (InvalidInput) naming `file`
// and the key that is missing, extra, or of the wrong shape or dtype.
void restoreCheckpoint(TrainableStage& st, const OptimizerOptions& o,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors, const std::string& file);

}  // namespace pipecut::runtime
