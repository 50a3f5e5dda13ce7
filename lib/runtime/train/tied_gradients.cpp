#include "runtime/train/tied_gradients.h"

#include <ATen/ATen.h>

#include "support/error.h"

namespace pipecut::runtime {

TiedGradients::TiedGradients(const Manifest& m, std::vector<int> stageWorker, int self, bool acrossProcesses, Param param)
    : stageWorker_(std::move(stageWorker)), self_(self), acrossProcesses_(acrossProcesses), param_(std::move(param)) {
  // Each group's copies: which stage holds it under which name.
  for (const auto& g : m.tiedGroups) {
    std::vector<Copy> copies;
    for (uint32_t s : g.stages)
      for (const auto& name : g.names) {
        bool held = false;
        for (const auto& p : m.stages[s].parameters) held |= p.name == name && p.kind == "parameter";
        if (held) {
          copies.push_back({s, name});
          break;
        }
      }
    if (copies.size() > 1) groups_.push_back(std::move(copies));
  }
  if (!acrossProcesses_) return;
  std::vector<std::vector<uint32_t>> stages;
  for (const auto& copies : groups_) {
    stages.emplace_back();
    for (const auto& c : copies) stages.back().push_back(c.stage);
  }
  messages_ = tiedMessages(stages, stageWorker_);
  for (size_t i = 0; i < messages_.size(); ++i)
    id_[{messages_[i].group, messages_[i].copy, messages_[i].up}] = static_cast<int>(i);
}

uint32_t TiedGradients::landsOn(size_t i) const {
  const TiedMessage& t = messages_.at(i);
  return groups_[t.group][t.up ? 0 : t.copy].stage;
}

const TiedGradients::Copy* TiedGradients::heldCopy(size_t i) const {
  const TiedMessage& t = messages_.at(i);
  const auto& copies = groups_[t.group];
  if (local(copies[0].stage)) return &copies[0];
  if (local(copies[t.copy].stage)) return &copies[t.copy];
  return nullptr;
}

void TiedGradients::sync(TrainTransport* transport) {
  for (uint32_t gi = 0; gi < groups_.size(); ++gi) {
    const auto& copies = groups_[gi];
    auto gradOf = [&](const Copy& c) -> at::Tensor& { return param_(c).mutable_grad(); };
    auto localGrad = [&](const Copy& c) {
      at::Tensor g = gradOf(c);
      return g.defined() ? g : at::zeros_like(param_(c));
    };
    auto message = [&](uint32_t copy, bool up) { return TrainMessage{TrainMessage::Kind::Tied, id_.at({gi, copy, up}), 0}; };
    const int leader = stageWorker_[copies[0].stage];
    if (!acrossProcesses_ || leader == self_) {
      at::Tensor sum;
      for (uint32_t c = 0; c < copies.size(); ++c) {
        at::Tensor g = local(copies[c].stage) ? localGrad(copies[c])
                                               : transport->recv(message(c, true), stageWorker_[copies[c].stage]);
        sum = sum.defined() ? sum + g.to(sum.device()) : g.clone();
      }
      for (uint32_t c = 0; c < copies.size(); ++c) {
        if (local(copies[c].stage)) gradOf(copies[c]) = sum.to(param_(copies[c]).device()).clone();
        else transport->send(message(c, false), stageWorker_[copies[c].stage], sum);
      }
    } else {
      for (uint32_t c = 0; c < copies.size(); ++c)
        if (local(copies[c].stage)) transport->send(message(c, true), leader, localGrad(copies[c]));
      for (uint32_t c = 0; c < copies.size(); ++c)
        if (local(copies[c].stage))
          gradOf(copies[c]) = transport->recv(message(c, false), leader).to(param_(copies[c]).device());
    }
  }
}

void TiedGradients::checkEqual() {
  for (const auto& copies : groups_) {
    at::Tensor first;
    for (const auto& c : copies) {
      if (!local(c.stage)) continue;
      at::Tensor v = param_(c).detach().to(at::kCPU);
      if (!first.defined()) first = v;
      else if (!at::equal(first, v))
        internalError("tied parameter '" + c.name + "'", "its copies differ after a step (stage " + std::to_string(c.stage) + ")");
    }
  }
}

}  // namespace pipecut::runtime
