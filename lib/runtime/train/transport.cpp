#include "runtime/train/transport.h"

#include <algorithm>
#include <tuple>

#include <c10/cuda/CUDAStream.h>

#include "emit/dtypes.h"
#include "runtime/exchange.h"
#include "runtime/inputs.h"
#include "support/error.h"

namespace pipecut::runtime {

std::vector<TrainEdge> trainEdges(const Manifest& m) {
  std::vector<TrainEdge> edges;
  for (const auto& st : m.stages)
    for (uint32_t k = 0; k < st.inputs.size(); ++k) {
      const auto& src = st.inputs[k].source;
      if (src.kind != ValueSource::Kind::StageOutput) continue;
      TrainEdge e;
      e.id = static_cast<int>(edges.size());
      e.producer = src.stage;
      e.output = src.output;
      e.consumer = st.index;
      e.input = k;
      e.tensor = st.inputs[k].tensor;
      auto dtype = emit::scalarTypeFromTorchName(e.tensor.dtype);
      e.carriesGradient = dtype && at::isFloatingType(*dtype);
      edges.push_back(std::move(e));
    }
  return edges;
}

std::vector<std::pair<TrainMessage, int>> messagesSent(const Action& a, const std::vector<TrainEdge>& edges,
                                                      const std::vector<int>& stageWorker) {
  std::vector<std::pair<TrainMessage, int>> out;
  const int self = stageWorker[a.stage];
  for (const auto& e : edges) {
    if (a.type == ActionType::F && e.producer == a.stage && stageWorker[e.consumer] != self)
      out.push_back({{TrainMessage::Kind::Activation, e.id, a.microbatch}, stageWorker[e.consumer]});
    if ((a.type == ActionType::B || a.type == ActionType::I) && e.consumer == a.stage && e.carriesGradient &&
        stageWorker[e.producer] != self)
      out.push_back({{TrainMessage::Kind::Gradient, e.id, a.microbatch}, stageWorker[e.producer]});
  }
  return out;
}

std::vector<TiedMessage> tiedMessages(const std::vector<std::vector<uint32_t>>& groupStages,
                                      const std::vector<int>& stageWorker) {
  std::vector<TiedMessage> out;
  for (uint32_t g = 0; g < groupStages.size(); ++g) {
    const auto& stages = groupStages[g];
    if (stages.empty()) continue;
    const int leader = stageWorker.at(stages[0]);
    for (bool up : {true, false})
      for (uint32_t c = 0; c < stages.size(); ++c) {
        const int holder = stageWorker.at(stages[c]);
        if (holder == leader) continue;
        out.push_back({g, c, up ? holder : leader, up ? leader : holder, up});
      }
  }
  return out;
}

// ---- LocalTransport

void LocalTransport::send(const TrainMessage& msg, int dst, at::Tensor t) {
  (void)dst;  // a message names one edge, so one receiver
  box_.deliver(msg.microbatch, static_cast<size_t>(trainChannel(msg, edgeCount_)), Payload{std::move(t), nullptr});
}

at::Tensor LocalTransport::recv(const TrainMessage& msg, int src) {
  (void)src;
  return box_.takeOne(msg.microbatch, static_cast<size_t>(trainChannel(msg, edgeCount_))).tensor;
}

void LocalTransport::endStep() {
  const size_t left = box_.held();
  if (left > 0 && !box_.aborted())
    internalError("training step", std::to_string(left) + " message(s) sent but never received");
}

// ---- CommTransport

void CommTransport::send(const TrainMessage& msg, int dst, at::Tensor t) {
  (void)dst;  // the channel names the receiver
  Payload p{t.contiguous(), nullptr};
  if (p.tensor.is_cuda()) {
    // The communication thread's NCCL send waits for the kernels that made it.
    p.ready = std::make_shared<at::cuda::CUDAEvent>();
    p.ready->record(c10::cuda::getCurrentCUDAStream(p.tensor.device().index()));
  }
  comm_.hand(msg.microbatch, trainChannel(msg, edgeCount_), std::move(p));
}

void CommTransport::deliver(int64_t microbatch, int channel, Payload p) {
  // Workers compute on their device's current stream: the value must be
  // complete before they see it.
  if (p.ready) p.ready->synchronize();
  p.ready.reset();
  inbox_.deliver(microbatch, channel, std::move(p));
}

// ---- the order of a step's messages

std::vector<CommOp> stepCommOrder(const TrainPlan& plan, const std::vector<TrainEdge>& edges, int rank,
                                  const std::vector<TiedMessage>& tied) {
  struct Sent {
    uint64_t end;
    int src;
    size_t seq;
    TrainMessage msg;
    int dst;
  };
  std::vector<std::vector<uint32_t>> producers(plan.stages);
  for (const auto& e : edges) producers[e.consumer].push_back(e.producer);
  const auto ends = nominalEndTicks(plan, producers);
  std::vector<Sent> sent;
  for (size_t r = 0; r < plan.perRank.size(); ++r)
    for (size_t i = 0; i < plan.perRank[r].size(); ++i) {
      size_t seq = 0;
      for (const auto& [msg, dst] : messagesSent(plan.perRank[r][i], edges, plan.stageRank))
        sent.push_back({ends[r][i], static_cast<int>(r), seq++, msg, dst});
    }
  std::sort(sent.begin(), sent.end(), [](const Sent& x, const Sent& y) {
    return std::tie(x.end, x.src, x.seq) < std::tie(y.end, y.src, y.seq);
  });
  std::vector<CommOp> ops;
  for (const Sent& m : sent) {
    if (m.src != rank && m.dst != rank) continue;
    CommOp op;
    op.microbatch = m.msg.microbatch;
    op.channel = trainChannel(m.msg, edges.size());
    op.send = m.src == rank;
    op.peer = op.send ? m.dst : m.src;
    op.wave = m.end;
    ops.push_back(op);
  }
  const int64_t after = ops.empty() ? 0 : ops.back().wave + 1;
  for (size_t i = 0; i < tied.size(); ++i) {
    const TiedMessage& t = tied[i];
    if (t.src != rank && t.dst != rank) continue;
    CommOp op;
    op.microbatch = 0;
    op.channel = trainChannel({TrainMessage::Kind::Tied, static_cast<int>(i), 0}, edges.size());
    op.send = t.src == rank;
    op.peer = op.send ? t.dst : t.src;
    op.wave = after;
    ops.push_back(op);
  }
  return ops;
}

}  // namespace pipecut::runtime
