#include "runtime/comm.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include "runtime/clock.h"

namespace pipecut::runtime {

CommThread::CommThread(DistContext& dist, std::vector<Channel> channels, Trace& trace, Deliver deliver)
    : dist_(dist), channels_(std::move(channels)), trace_(trace), deliver_(std::move(deliver)) {}

void CommThread::hand(int64_t g, int channel, Payload p) {
  std::lock_guard<std::mutex> lk(mu_);
  outbox_[{g, channel}] = std::move(p);
  cv_.notify_all();
}

Payload CommThread::take(int64_t g, int channel) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return aborted_ || outbox_.count({g, channel}); });
  if (aborted_) throw Aborted();
  auto it = outbox_.find({g, channel});
  Payload p = std::move(it->second);
  outbox_.erase(it);
  return p;
}

void CommThread::abort() {
  std::lock_guard<std::mutex> lk(mu_);
  aborted_ = true;
  cv_.notify_all();
}

c10::cuda::CUDAStream CommThread::commStream(c10::Device d) {
  auto it = streams_.find(d.index());
  if (it == streams_.end()) it = streams_.emplace(d.index(), c10::cuda::getStreamFromPool(false, d.index())).first;
  return it->second;
}

void CommThread::run(MessageOrder& order) {
  for (CommOp op; order.next(op);) {
    if (op.send) send(op);
    else receive(op);
  }
  dist_.flush();
  dist_.releaseIssuer();
}

void CommThread::send(const CommOp& op) {
  const Channel& c = channels_[static_cast<size_t>(op.channel)];
  Payload p = take(op.microbatch, op.channel);
  auto t0 = Clock::now();
  at::Tensor t = p.tensor;
  std::optional<c10::cuda::CUDAStreamGuard> guard;
  if (t.is_cuda()) {
    if (dist_.nccl()) {
      // ProcessGroupNCCL orders its work after the current stream: make that
      // stream wait for the producer's kernels, without a host sync.
      guard.emplace(commStream(t.device()));
      if (p.ready) p.ready->block(commStream(t.device()));
    } else {
      if (p.ready) p.ready->synchronize();
      t = t.to(at::kCPU);  // Gloo sends host tensors
    }
  }
  dist_.send(t, op.peer, tag(op.channel, op.microbatch), c.wire);
  if (trace_.enabled())
    trace_.add("send mb " + std::to_string(op.microbatch) + " to rank " + std::to_string(op.peer), "transfer",
               c.sendRow, t0, Clock::now());
}

void CommThread::receive(const CommOp& op) {
  const Channel& c = channels_[static_cast<size_t>(op.channel)];
  c10::Device where = c.recvDevice;
  auto t0 = Clock::now();
  std::optional<c10::cuda::CUDAStreamGuard> guard;
  if (dist_.nccl() && where.is_cuda()) guard.emplace(commStream(where));
  Payload p;
  p.tensor = dist_.recv(op.peer, tag(op.channel, op.microbatch), where, c.wire);
  if (p.tensor.is_cuda()) {
    // The receive's wait ordered the current stream after NCCL's; consumers
    // order themselves after this event.
    p.ready = std::make_shared<at::cuda::CUDAEvent>();
    p.ready->record(c10::cuda::getCurrentCUDAStream(p.tensor.device().index()));
  }
  if (trace_.enabled())
    trace_.add(c.recvName + " mb " + std::to_string(op.microbatch) + " from rank " + std::to_string(op.peer), "transfer",
               c.recvRow, t0, Clock::now());
  deliver_(op.microbatch, op.channel, std::move(p));
}

}  // namespace pipecut::runtime
