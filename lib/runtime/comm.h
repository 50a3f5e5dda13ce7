#pragma once
// The one thread per rank that issues every c10d operation of a multi-process
// run, in an order every rank derives alike: inference's from the manifest
// (runtime/comm_schedule.h), a training step's from its plan
// (runtime/train/transport.h). The transport of both.
//
// Invariants:
// - Workers never call c10d. A worker hands each output bound for another
//   rank to hand(), which never blocks; the communication thread sends it when
//   its turn in the order comes.
// - Received values are delivered (into a stage's mailbox, or rank 0's output
//   sink) through a callback that must not block: a blocked delivery would
//   hold up every later message of this rank, including ones that the
//   consumer is waiting for. Mailbox::deliver has no capacity bound; memory
//   stays bounded by the schedule (1F1B admits at most P micro-batches;
//   GPipe holds the batch's micro-batches by design).
// - The thread waits for each receive to complete before its next operation.
//   That cannot deadlock when the order is a linear extension of what each
//   message waits for: everything the awaited message depends on comes
//   earlier, so every rank has already issued it (sends are asynchronous and
//   never wait on a later receive), and the workers only wait on earlier
//   messages too (see Engine::mailboxWindow for inference's local mailboxes).
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <c10/cuda/CUDAStream.h>

#include "runtime/comm_schedule.h"
#include "runtime/distributed.h"
#include "runtime/exchange.h"
#include "runtime/trace.h"

namespace pipecut::runtime {

// One direction of traffic between two ranks, e.g. the activations of one
// stage-output -> consumer edge: what the receiver knows of the tensors and
// how the trace shows its transfers.
struct Channel {
  DistContext::Shape wire;
  c10::Device recvDevice = c10::Device(c10::kCPU);  // where an NCCL receive lands (Gloo: the host)
  int sendRow = 0, recvRow = 0;                     // trace rows of its sends and receives
  std::string recvName;                             // "recv input 1": the trace adds " mb g from rank r"
};

class CommThread {
 public:
  // Tags are (micro-batch mod 65536) * kMaxChannels + channel.
  static constexpr size_t kMaxChannels = 4096;

  // A received value of micro-batch g on `channel`, on the device given for it.
  using Deliver = std::function<void(int64_t g, int channel, Payload p)>;

  CommThread(DistContext& dist, std::vector<Channel> channels, Trace& trace, Deliver deliver);

  // From a worker: the value of micro-batch g to send on `channel`. Never blocks.
  void hand(int64_t g, int channel, Payload p);
  // Issues this rank's operations in `order`, then waits for its sends and
  // hands the process group over (a later run, or another thread, may take
  // it). Throws on failure (PeerError when a peer failed); Aborted after
  // abort().
  void run(MessageOrder& order);
  void abort();

 private:
  Payload take(int64_t g, int channel);
  void send(const CommOp& op);
  void receive(const CommOp& op);
  c10::cuda::CUDAStream commStream(c10::Device d);
  static int tag(int channel, int64_t g) { return static_cast<int>((g % 65536) * static_cast<int64_t>(kMaxChannels) + channel); }

  DistContext& dist_;
  std::vector<Channel> channels_;
  Trace& trace_;
  Deliver deliver_;
  std::map<int, c10::cuda::CUDAStream> streams_;  // per CUDA device: where NCCL work is ordered
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int64_t, int>, Payload> outbox_;
  bool aborted_ = false;
};

}  // namespace pipecut::runtime
