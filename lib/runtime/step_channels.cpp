#include "runtime/step_channels.h"

#include <ATen/ATen.h>

#include "runtime/exchange.h"
#include "support/error.h"

namespace pipecut::runtime {

void LocalStepChannels::send(int self, int dst, const at::Tensor& t, const DistContext::Shape&) {
  std::lock_guard<std::mutex> lk(mu_);
  if (aborted_) throw Aborted();
  queues_[{self, dst}].push_back(t);
  cv_.notify_all();
}

at::Tensor LocalStepChannels::recv(int self, int src, const DistContext::Shape&, c10::Device device) {
  std::unique_lock<std::mutex> lk(mu_);
  auto& q = queues_[{src, self}];
  cv_.wait(lk, [&] { return aborted_ || !q.empty(); });
  if (aborted_) throw Aborted();
  at::Tensor t = std::move(q.front());
  q.pop_front();
  lk.unlock();
  return t.device() == device ? t : t.to(device);
}

void LocalStepChannels::abort() {
  std::lock_guard<std::mutex> lk(mu_);
  aborted_ = true;
  cv_.notify_all();
}

void CommStepChannels::send(int, int dst, const at::Tensor& t, const DistContext::Shape& shape) {
  // Gloo carries host tensors, NCCL device ones (its send waits for the
  // tensor's stream: this thread made it on the current one).
  at::Tensor wire = dist_.nccl() || !t.is_cuda() ? t : t.to(at::kCPU);
  dist_.send(wire, dst, 0, shape);
}

at::Tensor CommStepChannels::recv(int, int src, const DistContext::Shape& shape, c10::Device device) {
  at::Tensor t = dist_.recv(src, 0, device, shape);
  return t.device() == device ? t : t.to(device);
}

}  // namespace pipecut::runtime
