#pragma once
// Multi-process plumbing on torch.distributed's c10d: rendezvous from the
// standard environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT; a store client on every rank when torchrun's agent owns the
// store), a Gloo or NCCL process group, tensors sent with a small shape
// header, and an abort path so that one failing rank ends every rank.
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace pipecut::runtime {

struct DistEnv {
  int rank = 0, world = 1, localRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  bool agentStore = false;   // TORCHELASTIC_USE_AGENT_STORE=True
  std::string attempt = "0"; // TORCHELASTIC_RESTART_COUNT
  static DistEnv fromEnvironment();
};

class DistContext {
 public:
  // backend: "gloo" or "nccl". Throws pipecut::Error on rendezvous failure.
  DistContext(const DistEnv& env, const std::string& backend, std::chrono::milliseconds timeout);
  ~DistContext();

  int rank() const { return env_.rank; }
  int world() const { return env_.world; }
  const std::string& backend() const { return backend_; }

  // What a receiver knows of a value before it arrives. With a static shape
  // (every dimension known from the manifest) the tensor goes alone; else a
  // small header with its shape and dtype goes first.
  struct Shape {
    std::vector<int64_t> sizes;
    at::ScalarType dtype = at::kFloat;
    bool known = false;
  };

  // Sends asynchronously; at most `window` sends stay outstanding.
  void send(const at::Tensor& t, int dst, int tag, const Shape& shape);
  at::Tensor recv(int src, int tag, const at::Device& device, const Shape& shape);
  void flush();  // waits for every outstanding send
  void barrier();

  // Small values between ranks (metrics at the end of a run).
  void put(const std::string& key, const std::string& value);
  std::string get(const std::string& key);

  // Tells every rank to stop: they print `why` and exit non-zero.
  void abort(const std::string& why);
  // The abort another rank posted, if any ("" when none): the root cause of
  // a failure here is often a peer that failed first.
  std::string postedAbort();
  // Starts the thread that watches for another rank's abort (or the store's
  // loss) and calls onAbort (which must not return).
  void watch(std::function<void(const std::string&)> onAbort);
  // Orderly end: stops watching, and rank 0 (which may host the store) waits
  // until every rank has stopped watching before it goes away.
  void finish();

 private:
  void sendUnchecked(const at::Tensor& t, int dst, int tag, const Shape& shape);
  at::Tensor recvUnchecked(int src, int tag, const at::Device& device, const Shape& shape);

  DistEnv env_;
  std::string backend_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> pg_;
  std::mutex sendMu_;
  std::deque<std::pair<c10::intrusive_ptr<c10d::Work>, std::vector<at::Tensor>>> pending_;
  size_t window_ = 16;
  int barrierCount_ = 0;
  std::atomic<bool> stopWatch_{false};
  std::thread watcher_;
};

}  // namespace pipecut::runtime
