#pragma once
// The one thread per rank that issues every c10d operation of a multi-process
// run, in the order runtime/comm_schedule.h derives from the manifest.
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
//   That cannot deadlock: everything the awaited message depends on has a
//   smaller key, so every rank has already issued it (sends are asynchronous
//   and never wait on a later receive), and local stages only wait on values
//   with smaller keys too (see Engine::mailboxWindow for the local mailboxes).
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <c10/cuda/CUDAStream.h>

#include "runtime/comm_schedule.h"
#include "runtime/distributed.h"
#include "runtime/exchange.h"
#include "runtime/trace.h"

namespace pipecut::runtime {

class CommThread {
 public:
  // A received value of micro-batch g on `edge`, on the device given for it.
  using Deliver = std::function<void(int64_t g, const CommEdge& edge, Payload p)>;

  // wire: per edge, what the receiver knows of the value's shape; recvDevice:
  // per edge, where a receive lands under NCCL (Gloo receives on the host).
  CommThread(DistContext& dist, std::vector<CommEdge> edges, std::vector<DistContext::Shape> wire,
             std::vector<c10::Device> recvDevice, Trace& trace, Deliver deliver);

  // From a worker: the value of micro-batch g for a cross-rank edge. Never blocks.
  void hand(int64_t g, int edge, Payload p);
  // Issues this rank's operations for `total` micro-batches, in order, then
  // waits for its sends and hands the process group over. Throws on failure
  // (PeerError when a peer failed); Aborted after abort().
  void run(int64_t total);
  void abort();

 private:
  Payload take(int64_t g, int edge);
  void send(const CommOp& op);
  void receive(const CommOp& op);
  c10::cuda::CUDAStream commStream(c10::Device d);
  static int tag(int edge, int64_t g) { return static_cast<int>((g % 65536) * 4096 + edge); }

  DistContext& dist_;
  std::vector<CommEdge> edges_;
  std::vector<DistContext::Shape> wire_;
  std::vector<c10::Device> recvDevice_;
  Trace& trace_;
  Deliver deliver_;
  std::map<int, c10::cuda::CUDAStream> streams_;  // per CUDA device: where NCCL work is ordered
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int64_t, int>, Payload> outbox_;
  bool aborted_ = false;
};

}  // namespace pipecut::runtime
