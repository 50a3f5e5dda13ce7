#pragma once
// Final outputs leave a GPU without holding up the thread that made them.
//
// A CUDA output is copied into pinned host memory on a copy stream of the
// drain's, queued after the event that says it is computed; the drain's
// thread waits for each copy to land and then hands the host tensor on
// (to rank 0's output sink). The producer goes straight on to queue its next
// micro-batch, so the GPU computes micro-batch g+1 while g's outputs travel.
// Before it, the last stage's thread waited for its kernels and then copied
// into pageable memory: an H200 sat idle 43% of an unsplit AOTInductor
// program's run at batch 8 x 128 (16 MB of logits per micro-batch; bench
// README, aoti_vs_torchscript.py).
//
// Contract:
// - put(g, j, t, ready): a host tensor is handed on at once, on the caller's
//   thread; a CUDA tensor with its ready event is copied asynchronously and
//   handed on by run(); a CUDA tensor without one is copied synchronously.
//   Any thread may put.
// - run() is the drain's thread body: it hands items on in the order they
//   were queued, each once its copy landed, and returns after close() when
//   none is left. A failed wait or hand-on throws out of it (the caller's
//   thread wrapper fails the run); abort() makes it throw Aborted after the
//   wait it is in, dropping what is left (a failed run writes nothing).
// - close() is called once every producer has stopped putting.
// - The host tensor is not read before its copy landed: only `landed` sees it,
//   and only after the wait.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

namespace pipecut::runtime {

class OutputDrain {
 public:
  using Landed = std::function<void(int64_t g, size_t j, at::Tensor host)>;
  explicit OutputDrain(Landed landed) : landed_(std::move(landed)) {}

  void put(int64_t g, size_t j, const at::Tensor& t, const std::shared_ptr<at::cuda::CUDAEvent>& ready);
  // The asynchronous half of put, for what is not a CUDA copy (tests): `host`
  // is handed on after `wait` returns.
  void pending(int64_t g, size_t j, at::Tensor host, std::function<void()> wait);
  void run();
  void close();
  void abort();

 private:
  struct Item {
    int64_t g;
    size_t j;
    at::Tensor host;
    std::function<void()> wait;
  };
  c10::cuda::CUDAStream copyStream(c10::DeviceIndex device);

  Landed landed_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool closed_ = false, aborted_ = false;
  std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams_;  // one per device, from torch's pool
};

}  // namespace pipecut::runtime
