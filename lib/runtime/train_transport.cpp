#include "runtime/train_transport.h"

#include <algorithm>
#include <tuple>

#include <c10/cuda/CUDAStream.h>

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
      auto dtype = scalarTypeFromName(e.tensor.dtype);
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

// ---- LocalTransport

void LocalTransport::send(const TrainMessage& msg, int dst, at::Tensor t) {
  (void)dst;  // a message names one edge, so one receiver
  std::lock_guard<std::mutex> lk(mu_);
  if (aborted_) throw Aborted();
  box_[msg] = std::move(t);
  cv_.notify_all();
}

at::Tensor LocalTransport::recv(const TrainMessage& msg, int src) {
  (void)src;
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return aborted_ || box_.count(msg) > 0; });
  if (aborted_) throw Aborted();
  auto it = box_.find(msg);
  at::Tensor t = std::move(it->second);
  box_.erase(it);
  return t;
}

void LocalTransport::endStep() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!box_.empty() && !aborted_)
    internalError("training step", std::to_string(box_.size()) + " message(s) sent but never received");
}

void LocalTransport::abort() {
  std::lock_guard<std::mutex> lk(mu_);
  aborted_ = true;
  cv_.notify_all();
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
  const bool activation = static_cast<size_t>(channel) < edgeCount_;
  TrainMessage msg{activation ? TrainMessage::Kind::Activation : TrainMessage::Kind::Gradient,
                   static_cast<int>(activation ? static_cast<size_t>(channel) : static_cast<size_t>(channel) - edgeCount_),
                   static_cast<uint32_t>(microbatch)};
  inbox_.send(msg, -1, std::move(p.tensor));
}

// ---- the order of a step's messages

namespace {

// A simulated run of the plan: when each action ends, each action taking its
// nominal ticks and starting once its rank is free and its dependencies ended.
class StepClock {
 public:
  StepClock(const TrainPlan& plan, const std::vector<TrainEdge>& edges) : plan_(plan), M_(plan.microbatches) {
    producers_.resize(plan.stages);
    consumers_.resize(plan.stages);
    for (const auto& e : edges) {
      producers_[e.consumer].push_back(e.producer);
      consumers_[e.producer].push_back(e.consumer);
    }
    const size_t cells = static_cast<size_t>(plan.stages) * M_;
    endF_.assign(cells, kNotYet);
    endBack_.assign(cells, kNotYet);
    endW_.assign(cells, kNotYet);
  }

  // Calls visit(action, rank, end tick) for every action, ranks in turn.
  template <class Visit>
  void run(Visit&& visit) {
    const size_t R = plan_.perRank.size();
    std::vector<size_t> pos(R, 0);
    std::vector<int64_t> free(R, 0);
    size_t left = 0;
    for (const auto& list : plan_.perRank) left += list.size();
    while (left > 0) {
      bool moved = false;
      for (size_t r = 0; r < R; ++r)
        for (; pos[r] < plan_.perRank[r].size(); ++pos[r], --left, moved = true) {
          const Action& a = plan_.perRank[r][pos[r]];
          int64_t ready = readyAt(a);
          if (ready == kNotYet) break;
          int64_t end = std::max(free[r], ready) + (a.type == ActionType::B ? 2 : 1);
          endOf(a) = end;
          free[r] = end;
          visit(a, static_cast<int>(r), end);
        }
      if (!moved) internalError("training plan", "stalls: no rank can start its next action");
    }
  }

 private:
  static constexpr int64_t kNotYet = -1;
  size_t cell(uint32_t s, uint32_t m) const { return static_cast<size_t>(s) * M_ + m; }
  int64_t& endOf(const Action& a) {
    size_t c = cell(a.stage, a.microbatch);
    return a.type == ActionType::F ? endF_[c] : a.type == ActionType::W ? endW_[c] : endBack_[c];
  }
  // When every dependency of `a` has ended; kNotYet if one has not.
  int64_t readyAt(const Action& a) const {
    int64_t at = 0;
    auto need = [&](int64_t end) {
      if (end == kNotYet || at == kNotYet) at = kNotYet;
      else at = std::max(at, end);
    };
    const size_t c = cell(a.stage, a.microbatch);
    switch (a.type) {
      case ActionType::F:
        for (uint32_t p : producers_[a.stage]) need(endF_[cell(p, a.microbatch)]);
        break;
      case ActionType::B:
      case ActionType::I:
        need(endF_[c]);
        for (uint32_t k : consumers_[a.stage]) need(endBack_[cell(k, a.microbatch)]);
        break;
      case ActionType::W:
        need(endBack_[c]);
        break;
    }
    return at;
  }

  const TrainPlan& plan_;
  const uint32_t M_;
  std::vector<std::vector<uint32_t>> producers_, consumers_;
  std::vector<int64_t> endF_, endBack_, endW_;
};

}  // namespace

std::vector<CommOp> stepCommOrder(const TrainPlan& plan, const std::vector<TrainEdge>& edges, int rank) {
  struct Sent {
    int64_t end;
    int src;
    size_t seq;
    TrainMessage msg;
    int dst;
  };
  std::vector<Sent> sent;
  StepClock(plan, edges).run([&](const Action& a, int r, int64_t end) {
    size_t seq = 0;
    for (const auto& [msg, dst] : messagesSent(a, edges, plan.stageRank)) sent.push_back({end, r, seq++, msg, dst});
  });
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
  return ops;
}

}  // namespace pipecut::runtime
