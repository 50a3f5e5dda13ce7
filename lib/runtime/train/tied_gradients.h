#pragma once
// Tied parameters in training. Each stage holding a copy of a tied parameter
// (the manifest's tied groups) gets the sum of every copy's gradient, added
// in stage order, so that the copies take identical steps and stay bitwise
// equal: eager PyTorch's one shared parameter (torch.distributed.pipelining
// leaves such copies unsynchronised). Across processes the gradients go up
// to the group's leader and the sum comes back down as the step's tied
// messages (runtime/train/transport.h), through its transport like every
// other message.
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>

#include "manifest/manifest.h"
#include "runtime/train/transport.h"

namespace pipecut::runtime {

class TiedGradients {
 public:
  // One copy of a tied parameter: the stage that holds it, under which name.
  struct Copy {
    uint32_t stage;
    std::string name;
  };
  // A parameter of a stage this process holds.
  using Param = std::function<at::Tensor&(const Copy&)>;

  // The groups with copies in two stages or more. `stageWorker`: each
  // stage's worker; `self`: this process's, with `acrossProcesses` (else
  // every copy is this process's and the sums form directly).
  TiedGradients(const Manifest& m, std::vector<int> stageWorker, int self, bool acrossProcesses, Param param);

  // Across processes, the step's tied messages (empty otherwise).
  const std::vector<TiedMessage>& messages() const { return messages_; }
  // For message `i`: the stage whose copy receives it (the leader's first
  // copy for "up", the copy itself for "down"), and a copy this process
  // holds of its group (nullptr when it holds none): its shape is the wire's.
  uint32_t landsOn(size_t i) const;
  const Copy* heldCopy(size_t i) const;

  // After the step's actions: every copy's gradient becomes the sum.
  // `transport`: where this process's tied messages go (unused in one process).
  void sync(TrainTransport* transport);
  // The copies this process holds must be bitwise equal after a step; a
  // difference is a bug here (Internal), not in the input.
  void checkEqual();

 private:
  bool local(uint32_t stage) const { return !acrossProcesses_ || stageWorker_[stage] == self_; }
  std::vector<std::vector<Copy>> groups_;
  std::vector<int> stageWorker_;
  int self_;
  bool acrossProcesses_;
  Param param_;
  std::vector<TiedMessage> messages_;
  std::map<std::tuple<uint32_t, uint32_t, bool>, int> id_;  // (group, copy, up) -> index in messages_
};

}  // namespace pipecut::runtime
