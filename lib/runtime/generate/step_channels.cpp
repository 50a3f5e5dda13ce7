#include "runtime/generate/step_channels.h"

#include <ATen/ATen.h>

#include "runtime/exchange.h"
#include "support/error.h"

namespace pipecut::runtime {

namespace {

constexpr int64_t kAlign = 64;

int64_t bytesOf(const WireSpec& s) {
  int64_t n = 1;
  for (int64_t d : s.sizes) n *= d;
  return n * static_cast<int64_t>(c10::elementSize(s.dtype));
}

int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

int64_t packedBytes(const std::vector<WireSpec>& specs) {
  int64_t total = 0;
  for (const auto& s : specs) total += aligned(bytesOf(s));
  return total;
}

}  // namespace

void LocalStepChannels::send(int self, int dst, const std::vector<at::Tensor>& values) {
  std::lock_guard<std::mutex> lk(mu_);
  if (aborted_) throw Aborted();
  queues_[{self, dst}].push_back(values);
  cv_.notify_all();
}

std::vector<at::Tensor> LocalStepChannels::recv(int self, int src, const std::vector<WireSpec>&, c10::Device device) {
  std::unique_lock<std::mutex> lk(mu_);
  auto& q = queues_[{src, self}];
  cv_.wait(lk, [&] { return aborted_ || !q.empty(); });
  if (aborted_) throw Aborted();
  std::vector<at::Tensor> values = std::move(q.front());
  q.pop_front();
  lk.unlock();
  for (auto& t : values)
    if (t.device() != device) t = t.to(device);
  return values;
}

void LocalStepChannels::abort() {
  std::lock_guard<std::mutex> lk(mu_);
  aborted_ = true;
  cv_.notify_all();
}

void CommStepChannels::send(int, int dst, const std::vector<at::Tensor>& values) {
  // Gloo carries host tensors, NCCL device ones (its send waits for the
  // current stream, on which this thread made them).
  const c10::Device device = dist_.nccl() && !values.empty() ? values[0].device() : c10::Device(c10::kCPU);
  int64_t total = 0;
  for (const auto& t : values) total += aligned(static_cast<int64_t>(t.nbytes()));
  at::Tensor packed = at::empty({total}, at::TensorOptions().dtype(at::kByte).device(device));
  int64_t offset = 0;
  for (const auto& t : values) {
    const int64_t n = static_cast<int64_t>(t.nbytes());
    if (n > 0) packed.narrow(0, offset, n).copy_(t.contiguous().view({-1}).view(at::kByte));
    offset += aligned(n);
  }
  dist_.send(packed, dst, 0, DistContext::Shape{{total}, at::kByte, true});
}

void CommStepChannels::prepost(int, int src, const std::vector<WireSpec>& specs, c10::Device) {
  if (dist_.nccl()) return;  // in issue order on one stream: see DistContext::postRecv
  const int64_t total = packedBytes(specs);
  posted_[src].push_back({dist_.postRecv(src, 0, DistContext::Shape{{total}, at::kByte, true}), total});
}

std::vector<at::Tensor> CommStepChannels::recv(int, int src, const std::vector<WireSpec>& specs, c10::Device device) {
  const int64_t total = packedBytes(specs);
  const c10::Device where = dist_.nccl() ? device : c10::Device(c10::kCPU);
  at::Tensor packed;
  if (auto it = posted_.find(src); it != posted_.end() && !it->second.empty()) {
    Posted p = std::move(it->second.front());
    it->second.pop_front();
    if (p.bytes != total)
      internalError("receiving from rank " + std::to_string(src),
                    "a posted receive of " + std::to_string(p.bytes) + " bytes taken for " + std::to_string(total));
    packed = dist_.wait(p.recv, src);
  } else {
    packed = dist_.recv(src, 0, where, DistContext::Shape{{total}, at::kByte, true});
  }
  std::vector<at::Tensor> out;
  int64_t offset = 0;
  for (const auto& s : specs) {
    const int64_t n = bytesOf(s);
    at::Tensor t = packed.narrow(0, offset, n).view(s.dtype).view(s.sizes);
    out.push_back(t.device() == device ? t : t.to(device));
    offset += aligned(n);
  }
  return out;
}

}  // namespace pipecut::runtime
