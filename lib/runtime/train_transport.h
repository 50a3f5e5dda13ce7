#pragma once
// How activations and gradients of a training step move between workers (a
// worker runs one rank's action list: a thread in one process, a process
// over c10d). Two transports, one contract: send never blocks on the
// receiver; recv blocks until the message it names has arrived.
//
// Across processes messages match by order, not by tag (NCCL ignores tags):
// every rank derives from the plan the exact sequence of messages each peer
// sends it in a step (sendOrders), and receives in that order, keeping any
// message it does not need yet until an action asks for it. That cannot
// deadlock: to get message X from a peer it must first take the ones the
// peer sent before X, which the peer sends before it can send X anyway.
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>

#include "manifest/manifest.h"
#include "runtime/distributed.h"
#include "runtime/train_schedule.h"

namespace pipecut::runtime {

// A stage-to-stage connection: output `output` of stage `producer` is input
// `input` of stage `consumer`. Gradients travel back on it when the value is
// floating point (the consumer sends zeros when its input got none).
struct TrainEdge {
  int id = 0;
  uint32_t producer = 0, output = 0, consumer = 0, input = 0;
  bool carriesGradient = false;
  TensorSpec tensor;
};

// In consumer order: stage, then input index.
std::vector<TrainEdge> trainEdges(const Manifest& m);

struct TrainMessage {
  enum class Kind : uint8_t { Activation, Gradient } kind = Kind::Activation;
  int edge = 0;
  uint32_t microbatch = 0;
  auto key() const { return std::tuple(static_cast<int>(kind), edge, microbatch); }
  bool operator<(const TrainMessage& o) const { return key() < o.key(); }
  bool operator==(const TrainMessage& o) const { return key() == o.key(); }
};

// What an action sends, in order: F sends its activations to consumers on
// other workers (edge order); B and I send the gradients of their inputs to
// producers on other workers (input order); W sends nothing.
std::vector<std::pair<TrainMessage, int>> messagesSent(const Action& a, const std::vector<TrainEdge>& edges,
                                                      const std::vector<int>& stageWorker);

// orders[src][dst]: the messages worker src sends worker dst in one step, in
// the order src sends them.
std::vector<std::vector<std::vector<TrainMessage>>> sendOrders(const TrainPlan& plan, const std::vector<TrainEdge>& edges);

class TrainTransport {
 public:
  virtual ~TrainTransport() = default;
  virtual void send(const TrainMessage& msg, int dst, at::Tensor t) = 0;
  virtual at::Tensor recv(const TrainMessage& msg, int src) = 0;
  // Every message of the step has been taken; outstanding sends complete.
  virtual void endStep() = 0;
  virtual void abort() = 0;
};

// Between threads of one process; also carries a rank's messages to itself.
class LocalTransport : public TrainTransport {
 public:
  void send(const TrainMessage& msg, int dst, at::Tensor t) override;
  at::Tensor recv(const TrainMessage& msg, int src) override;
  void endStep() override;
  void abort() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<TrainMessage, at::Tensor> box_;  // sent, not yet received
  bool aborted_ = false;
};

// Between processes: one worker per rank, whose thread issues every
// operation (DistContext's single-issuer rule).
class C10dTransport : public TrainTransport {
 public:
  C10dTransport(DistContext& dist, const TrainPlan& plan, std::vector<TrainEdge> edges,
                std::vector<c10::Device> stageDevices);
  void send(const TrainMessage& msg, int dst, at::Tensor t) override;
  at::Tensor recv(const TrainMessage& msg, int src) override;
  void endStep() override;
  void abort() override {}

 private:
  DistContext::Shape shapeOf(const TrainMessage& msg) const;
  c10::Device deviceOf(const TrainMessage& msg) const;

  DistContext& dist_;
  std::vector<TrainEdge> edges_;
  std::vector<c10::Device> stageDevices_;
  std::vector<std::vector<TrainMessage>> expected_;  // per source rank: what it sends here, in order
  std::vector<size_t> next_;                          // per source rank: position in expected_
  std::map<TrainMessage, at::Tensor> early_;          // taken before an action asked for it
};

}  // namespace pipecut::runtime
