#pragma once
// How generation's workers talk: first-in first-out between each ordered
// pair of workers. A worker is a thread per stage in one process, or a rank
// (its stages run in order on one thread) across processes. Generation's
// workers never wait on a later message to send an earlier one (see
// runtime/generate.cpp), so per-pair order is all they need: in one process
// an in-memory queue per pair; across processes c10d's send and receive
// with one tag (matched by order, as under NCCL), issued by the rank's one
// worker thread, as DistContext requires.
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include <ATen/core/Tensor.h>

#include "runtime/distributed.h"

namespace pipecut::runtime {

class StepChannels {
 public:
  virtual ~StepChannels() = default;
  // From worker `self` to `dst`. Never waits for the receiver (across
  // processes: up to the send window).
  virtual void send(int self, int dst, const at::Tensor& t, const DistContext::Shape& shape) = 0;
  // The next tensor `src` sent to this worker; throws Aborted after abort().
  virtual at::Tensor recv(int self, int src, const DistContext::Shape& shape, c10::Device device) = 0;
  virtual void abort() = 0;
};

// Threads of one process. A tensor is handed over as it is (workers never
// write a tensor after sending it).
class LocalStepChannels : public StepChannels {
 public:
  void send(int self, int dst, const at::Tensor& t, const DistContext::Shape& shape) override;
  at::Tensor recv(int self, int src, const DistContext::Shape& shape, c10::Device device) override;
  void abort() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::deque<at::Tensor>> queues_;  // (src, dst)
  bool aborted_ = false;
};

// Ranks over c10d: this rank's worker thread issues every operation.
class CommStepChannels : public StepChannels {
 public:
  explicit CommStepChannels(DistContext& dist) : dist_(dist) {}
  void send(int self, int dst, const at::Tensor& t, const DistContext::Shape& shape) override;
  at::Tensor recv(int self, int src, const DistContext::Shape& shape, c10::Device device) override;
  void abort() override {}  // the rank's waits end through DistContext::interrupt

 private:
  DistContext& dist_;
};

}  // namespace pipecut::runtime
