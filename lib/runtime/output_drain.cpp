#include "runtime/output_drain.h"

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

#include "runtime/exchange.h"  // Aborted

namespace pipecut::runtime {

void OutputDrain::put(int64_t g, size_t j, const at::Tensor& t, const std::shared_ptr<at::cuda::CUDAEvent>& ready) {
  if (!t.is_cuda()) {
    landed_(g, j, t);
    return;
  }
  if (!ready) {
    landed_(g, j, t.to(at::kCPU));
    return;
  }
  c10::cuda::CUDAStream stream = copyStream(t.device().index());
  c10::cuda::CUDAStreamGuard guard(stream);
  ready->block(stream);
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
  host.copy_(t, /*non_blocking=*/true);
  // The producer's stream may reuse t's memory once it is freed; the copy
  // reads it on this stream.
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
  auto done = std::make_shared<at::cuda::CUDAEvent>();
  done->record(stream);
  pending(g, j, std::move(host), [done] { done->synchronize(); });
}

void OutputDrain::pending(int64_t g, size_t j, at::Tensor host, std::function<void()> wait) {
  std::lock_guard<std::mutex> lk(mu_);
  queue_.push_back({g, j, std::move(host), std::move(wait)});
  cv_.notify_all();
}

void OutputDrain::run() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return aborted_ || closed_ || !queue_.empty(); });
      if (aborted_) throw Aborted();
      if (queue_.empty()) return;  // closed, and everything handed on
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    item.wait();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (aborted_) throw Aborted();
    }
    landed_(item.g, item.j, std::move(item.host));
  }
}

void OutputDrain::close() {
  std::lock_guard<std::mutex> lk(mu_);
  closed_ = true;
  cv_.notify_all();
}

void OutputDrain::abort() {
  std::lock_guard<std::mutex> lk(mu_);
  aborted_ = true;
  queue_.clear();
  cv_.notify_all();
}

c10::cuda::CUDAStream OutputDrain::copyStream(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = streams_.find(device);
  if (it == streams_.end()) it = streams_.emplace(device, c10::cuda::getStreamFromPool(false, device)).first;
  return it->second;
}

}  // namespace pipecut::runtime
