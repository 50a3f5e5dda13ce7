#pragma once
// How generation's workers talk: first-in first-out between each ordered
// pair of workers, one message per pair and step. A worker is a thread per
// stage in one process, or a rank (its stages run in order on one thread)
// across processes. Generation's workers never wait on a later message to
// send an earlier one (see runtime/generate/generate.cpp), so per-pair order is all
// they need: in one process an in-memory queue per pair; across processes
// c10d's send and receive with one tag (matched by order, as under NCCL),
// issued by the rank's one worker thread, as DistContext requires.
//
// Across processes a step's values for one worker travel packed in one
// message: Gloo's point-to-point waits for the receiver to post each receive
// before it moves the bytes, so a decode step's seven small tensors cost
// seven round trips, most of a small step's time (bench/generate.py).
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "runtime/distributed.h"

namespace pipecut::runtime {

// What a receiver knows of a value before it arrives: its sizes and dtype.
struct WireSpec {
  std::vector<int64_t> sizes;
  at::ScalarType dtype = at::kFloat;
};

class StepChannels {
 public:
  virtual ~StepChannels() = default;
  // From worker `self` to `dst`: `values`, whose sizes and dtypes the
  // receiver gives as `specs`. Never waits for the receiver (across
  // processes: up to the send window).
  virtual void send(int self, int dst, const std::vector<at::Tensor>& values) = 0;
  // The next values `src` sent to this worker, on `device`; throws Aborted
  // after abort(), an Error naming the peer when they do not fit `specs`.
  virtual std::vector<at::Tensor> recv(int self, int src, const std::vector<WireSpec>& specs, c10::Device device) = 0;
  // Says now that a later recv(self, src, specs, device) will come, so that
  // the bytes may move before it does (across processes over Gloo: the
  // receive is posted now, DistContext::postRecv says why). A worker
  // preposts a source's messages in the order it receives them, and every
  // receive from that source after a prepost is a preposted one. A no-op
  // where nothing waits on the receiver (one process; NCCL).
  virtual void prepost(int self, int src, const std::vector<WireSpec>& specs, c10::Device device) {}
  virtual void abort() = 0;
};

// Threads of one process: tensors are handed over as they are (workers never
// write a tensor after sending it).
class LocalStepChannels : public StepChannels {
 public:
  void send(int self, int dst, const std::vector<at::Tensor>& values) override;
  std::vector<at::Tensor> recv(int self, int src, const std::vector<WireSpec>& specs, c10::Device device) override;
  void abort() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::deque<std::vector<at::Tensor>>> queues_;  // (src, dst)
  bool aborted_ = false;
};

// Ranks over c10d: this rank's worker thread issues every operation. Values
// are packed into one byte tensor (each at a 64-byte aligned offset).
class CommStepChannels : public StepChannels {
 public:
  explicit CommStepChannels(DistContext& dist) : dist_(dist) {}
  void send(int self, int dst, const std::vector<at::Tensor>& values) override;
  std::vector<at::Tensor> recv(int self, int src, const std::vector<WireSpec>& specs, c10::Device device) override;
  void prepost(int self, int src, const std::vector<WireSpec>& specs, c10::Device device) override;
  void abort() override {}  // the rank's waits end through DistContext::interrupt

 private:
  struct Posted {
    DistContext::PostedRecv recv;
    int64_t bytes = 0;  // what the specs pack to: checked against the recv that takes it
  };
  DistContext& dist_;
  std::map<int, std::deque<Posted>> posted_;  // by source, in posting order
};

}  // namespace pipecut::runtime
