#include "runtime/train_transport.h"

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

std::vector<std::vector<std::vector<TrainMessage>>> sendOrders(const TrainPlan& plan, const std::vector<TrainEdge>& edges) {
  const size_t R = plan.perRank.size();
  std::vector<std::vector<std::vector<TrainMessage>>> orders(R, std::vector<std::vector<TrainMessage>>(R));
  for (size_t src = 0; src < R; ++src)
    for (const Action& a : plan.perRank[src])
      for (const auto& [msg, dst] : messagesSent(a, edges, plan.stageRank)) orders[src][static_cast<size_t>(dst)].push_back(msg);
  return orders;
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

// ---- C10dTransport

C10dTransport::C10dTransport(DistContext& dist, const TrainPlan& plan, std::vector<TrainEdge> edges,
                             std::vector<c10::Device> stageDevices)
    : dist_(dist), edges_(std::move(edges)), stageDevices_(std::move(stageDevices)) {
  auto orders = sendOrders(plan, edges_);
  const auto me = static_cast<size_t>(dist.rank());
  expected_.resize(orders.size());
  size_t sends = 0;
  for (size_t src = 0; src < orders.size(); ++src) {
    expected_[src] = orders[src][me];
    sends += orders[me][src].size();
  }
  next_.assign(orders.size(), 0);
  // Every send of a step may be outstanding at once: the plan, not a window,
  // bounds them, and a window could hold a send back behind one whose
  // receiver first needs this rank's later work.
  dist_.setSendWindow(sends + 1);
}

DistContext::Shape C10dTransport::shapeOf(const TrainMessage& msg) const {
  return DistContext::shapeOf(edges_[static_cast<size_t>(msg.edge)].tensor);
}

c10::Device C10dTransport::deviceOf(const TrainMessage& msg) const {
  const TrainEdge& e = edges_[static_cast<size_t>(msg.edge)];
  return stageDevices_[msg.kind == TrainMessage::Kind::Activation ? e.consumer : e.producer];
}

void C10dTransport::send(const TrainMessage& msg, int dst, at::Tensor t) {
  // Gloo carries host tensors; NCCL device ones.
  dist_.send((dist_.nccl() ? t : t.to(at::kCPU)).contiguous(), dst, 0, shapeOf(msg));
}

at::Tensor C10dTransport::recv(const TrainMessage& msg, int src) {
  if (auto it = early_.find(msg); it != early_.end()) {
    at::Tensor t = std::move(it->second);
    early_.erase(it);
    return t;
  }
  auto& order = expected_.at(static_cast<size_t>(src));
  auto& pos = next_[static_cast<size_t>(src)];
  for (;;) {
    if (pos >= order.size())
      internalError("training step", "rank " + std::to_string(src) + " sends no more messages this step, yet one is awaited");
    const TrainMessage next = order[pos++];
    at::Tensor t = dist_.recv(src, 0, deviceOf(next), shapeOf(next));
    if (next == msg) return t;
    early_.emplace(next, std::move(t));
  }
}

void C10dTransport::endStep() {
  for (size_t src = 0; src < expected_.size(); ++src)
    if (next_[src] != expected_[src].size() || !early_.empty())
      internalError("training step", "messages from rank " + std::to_string(src) + " left unreceived");
  next_.assign(next_.size(), 0);
  dist_.flush();
}

}  // namespace pipecut::runtime
