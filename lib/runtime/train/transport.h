#pragma once
// How activations and gradients of a training step move between workers (a
// worker runs one rank's action list: a thread in one process, a process
// over c10d). In one process they go through a LocalTransport; across
// processes a worker hands what it sends to the rank's communication thread
// (runtime/comm.h, inference's transport too), which issues the step's
// operations in stepCommOrder and delivers what it receives into the rank's
// LocalTransport, where the worker takes it. Either way: send never blocks
// on the receiver; recv blocks until the message it names has arrived.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "manifest/manifest.h"
#include "runtime/comm.h"
#include "runtime/comm_schedule.h"
#include "runtime/exchange.h"
#include "runtime/train/schedule.h"

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
  // Tied: a tied parameter's gradient after a step's actions; `edge` is the
  // message's index in tiedMessages(), `microbatch` 0.
  enum class Kind : uint8_t { Activation, Gradient, Tied } kind = Kind::Activation;
  int edge = 0;
  uint32_t microbatch = 0;
};

// A tied parameter's copies take identical steps when each gets the sum of
// all copies' gradients. After a step's actions, for each tied group (the
// stages holding a copy, in stage order; the first copy's worker leads):
// every copy on another worker sends its gradient to the leader ("up"), in
// copy order; then the leader sends the sum back to each such copy ("down").
// One list, every worker derives it alike; a message's index is its id.
struct TiedMessage {
  uint32_t group = 0, copy = 0;  // the copy it carries (index in its group)
  int src = 0, dst = 0;          // workers
  bool up = true;
};
std::vector<TiedMessage> tiedMessages(const std::vector<std::vector<uint32_t>>& groupStages,
                                      const std::vector<int>& stageWorker);

// What an action sends, in order: F sends its activations to consumers on
// other workers (edge order); B and I send the gradients of their inputs to
// producers on other workers (input order); W sends nothing.
std::vector<std::pair<TrainMessage, int>> messagesSent(const Action& a, const std::vector<TrainEdge>& edges,
                                                      const std::vector<int>& stageWorker);

// What a message travels on (CommOp::channel, a mailbox slot): an edge's
// activations on channel edge, its gradients on edgeCount + edge, tied
// message i on 2 * edgeCount + i.
inline int trainChannel(const TrainMessage& msg, size_t edgeCount) {
  const int base = msg.kind == TrainMessage::Kind::Activation ? 0
                   : msg.kind == TrainMessage::Kind::Gradient ? static_cast<int>(edgeCount)
                                                              : 2 * static_cast<int>(edgeCount);
  return base + msg.edge;
}

class TrainTransport {
 public:
  virtual ~TrainTransport() = default;
  virtual void send(const TrainMessage& msg, int dst, at::Tensor t) = 0;
  virtual at::Tensor recv(const TrainMessage& msg, int src) = 0;
  // Every message of the step has been taken; outstanding sends complete.
  virtual void endStep() = 0;
  virtual void abort() = 0;
};

// Between threads of one process; also carries a rank's messages to itself,
// and is where the communication thread delivers what other ranks sent. One
// Mailbox (runtime/exchange.h, inference's too) with a slot per channel.
class LocalTransport : public TrainTransport {
 public:
  LocalTransport(size_t edgeCount, size_t tiedCount)
      : edgeCount_(edgeCount), box_(2 * edgeCount + tiedCount, Mailbox::kUnbounded) {}
  void send(const TrainMessage& msg, int dst, at::Tensor t) override;
  at::Tensor recv(const TrainMessage& msg, int src) override;
  void endStep() override;
  void abort() override { box_.abort(); }
  // A message that arrived on `channel` (trainChannel's). Never blocks.
  void deliver(int64_t microbatch, int channel, Payload p) {
    box_.deliver(microbatch, static_cast<size_t>(channel), std::move(p));
  }

 private:
  size_t edgeCount_;
  Mailbox box_;
};

// Between processes: what a worker sends goes to the rank's communication
// thread, which issues it in its turn; what it receives comes from `inbox`,
// where that thread delivers it (see deliver()), on trainChannel's channels.
class CommTransport : public TrainTransport {
 public:
  CommTransport(CommThread& comm, LocalTransport& inbox, size_t edgeCount)
      : comm_(comm), inbox_(inbox), edgeCount_(edgeCount) {}
  void send(const TrainMessage& msg, int dst, at::Tensor t) override;
  at::Tensor recv(const TrainMessage& msg, int src) override { return inbox_.recv(msg, src); }
  void endStep() override {}  // the communication thread's run waited for the sends
  void abort() override { comm_.abort(); }

  // For the communication thread: a message received on `channel`. Never blocks.
  void deliver(int64_t microbatch, int channel, Payload p);

 private:
  CommThread& comm_;
  LocalTransport& inbox_;
  size_t edgeCount_;
};

// The c10d operations of `rank` in one step, in one order of all the step's
// cross-rank messages that every rank derives alike: the order in which they
// are sent when every action takes its nominal ticks (F 1, B 2, I 1, W 1) and
// starts once the rank's previous action and the actions it depends on (as
// runtime/train/schedule.h states them) have ended; ties by sending rank,
// then by the order the action sends in. Every message an action receives
// was sent by an action that ended before it began, so it comes earlier in
// this order than anything the action sends; a communication thread that
// issues these operations one after the other therefore never waits on a
// message that needs one of its later operations (the argument of
// runtime/comm.h). Throws Internal for a plan that stalls (validatePlan
// refuses such plans first). The tied messages follow, in their list's order:
// each leader receives every "up" of a group before it sends the group's
// "down"s, and sends are never held back, so they cannot wait on each other.
std::vector<CommOp> stepCommOrder(const TrainPlan& plan, const std::vector<TrainEdge>& edges, int rank,
                                  const std::vector<TiedMessage>& tied = {});

}  // namespace pipecut::runtime
