#pragma once
// How values move between a process's worker threads: the mailbox keyed by
// micro-batch (inference's stages and training's workers both receive into
// one), inference's admission gate that implements its schedule, and the
// sink that collects final outputs on rank 0.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAEvent.h>

namespace pipecut::runtime {

struct Aborted : std::runtime_error {
  Aborted() : std::runtime_error("aborted") {}
};

// A value on its way to a stage: the tensor, and on CUDA the event after
// which it is ready (recorded on the stream that produced or copied it).
struct Payload {
  at::Tensor tensor;
  std::shared_ptr<at::cuda::CUDAEvent> ready;
};

// A worker's inbox: values keyed by (micro-batch, slot), the local half of
// both executors' transport. Inference gives each stage one, a slot per
// input fed by another stage, and takes a micro-batch's inputs together
// (take); training gives each worker one, a slot per message channel
// (trainChannel: an edge's activations, an edge's gradients), and takes one
// message at a time (takeOne). The c10d half (runtime/comm.h) delivers into
// it.
// - put (a local producer) is bounded: it waits while the micro-batch it
//   delivers is `window` or more ahead of the one the stage works on, so a
//   fast stage cannot run away from a slow one. In one process stages take
//   micro-batches in order, so this never deadlocks. Across processes the
//   window must be at least the number of stages (see Engine::mailboxWindow).
//   Training sends with deliver: its action lists bound what is in flight.
// - deliver (the communication thread, values from other ranks) never waits:
//   a blocked communication thread would hold up every later message of its
//   rank, some of which the consumer may need first.
// Invariant: an entry exists while it holds a value (held > 0) or inference
// has part of a micro-batch; `held` counts the values stored, not taken.
class Mailbox {
 public:
  Mailbox(size_t slots, int64_t window) : slots_(slots), window_(window) {}

  void put(int64_t mb, size_t slot, Payload p) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return aborted_ || mb < next_ + window_; });
    store(mb, slot, std::move(p));
  }

  void deliver(int64_t mb, size_t slot, Payload p) {
    std::unique_lock<std::mutex> lk(mu_);
    store(mb, slot, std::move(p));
  }

 private:
  void store(int64_t mb, size_t slot, Payload p) {
    if (aborted_) throw Aborted();
    auto& entry = pending_[mb];
    if (entry.values.empty()) {
      entry.values.resize(slots_);
      entry.full.assign(slots_, 0);
    }
    entry.values[slot] = std::move(p);
    if (!entry.full[slot]) {
      entry.full[slot] = 1;
      entry.filled++;
      held_++;
    }
    cv_.notify_all();
  }

 public:
  // Every slot of micro-batch mb, once all are filled; mb + 1 is the next
  // micro-batch the window admits.
  std::vector<Payload> take(int64_t mb) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] {
      if (aborted_ || slots_ == 0) return true;
      auto it = pending_.find(mb);
      return it != pending_.end() && it->second.filled == slots_;
    });
    if (aborted_) throw Aborted();
    std::vector<Payload> out;
    if (slots_ > 0) {
      out = std::move(pending_[mb].values);
      pending_.erase(mb);
      held_ -= slots_;
    }
    next_ = mb + 1;
    cv_.notify_all();
    return out;
  }

  // One slot of micro-batch mb, once it is filled.
  Payload takeOne(int64_t mb, size_t slot) {
    std::unique_lock<std::mutex> lk(mu_);
    std::map<int64_t, Entry>::iterator it;
    cv_.wait(lk, [&] {
      if (aborted_) return true;
      it = pending_.find(mb);
      return it != pending_.end() && it->second.full[slot];
    });
    if (aborted_) throw Aborted();
    Entry& entry = it->second;
    Payload out = std::move(entry.values[slot]);
    entry.values[slot] = Payload{};
    entry.full[slot] = 0;
    held_--;
    if (--entry.filled == 0) pending_.erase(it);
    return out;
  }

  // Values stored and not yet taken.
  size_t held() {
    std::lock_guard<std::mutex> lk(mu_);
    return held_;
  }

  void abort() {
    std::lock_guard<std::mutex> lk(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

  bool aborted() {
    std::lock_guard<std::mutex> lk(mu_);
    return aborted_;
  }

  // No window: for senders whose schedule bounds what is in flight.
  static constexpr int64_t kUnbounded = INT64_MAX / 2;

 private:
  struct Entry {
    std::vector<Payload> values;
    std::vector<char> full;  // per slot: stored and not taken
    size_t filled = 0;
  };
  size_t slots_;
  int64_t window_;
  int64_t next_ = 0;
  size_t held_ = 0;
  bool aborted_ = false;
  std::map<int64_t, Entry> pending_;
  std::mutex mu_;
  std::condition_variable cv_;
};

// Admission control for the schedule: how many micro-batches may be between
// entering the first stage and leaving the last.
class Gate {
 public:
  explicit Gate(int limit) : limit_(limit) {}
  void acquire() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return aborted_ || inFlight_ < limit_; });
    if (aborted_) throw Aborted();
    ++inFlight_;
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu_);
    --inFlight_;
    cv_.notify_all();
  }
  void abort() {
    std::lock_guard<std::mutex> lk(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  int limit_, inFlight_ = 0;
  bool aborted_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
};

// Final outputs, per micro-batch, on rank 0. Only micro-batches from `keepFrom`
// on (the last iteration's, which the report merges) keep their tensors; an
// earlier one drops them when it completes, so that rank 0's memory stays one
// iteration's outputs however many iterations run (holding them all made
// every received output fresh memory: page faults on the stage 0 core).
class Sink {
 public:
  using Clock = std::chrono::steady_clock;

  void reset(size_t microbatches, size_t outputs, size_t keepFrom) {
    std::lock_guard<std::mutex> lk(mu_);
    values_.assign(microbatches, std::vector<at::Tensor>(outputs));
    filled_.assign(microbatches, 0);
    done_.assign(microbatches, Clock::time_point{});
    complete_ = 0;
    keepFrom_ = keepFrom;
  }
  // Returns true when this completed the micro-batch.
  bool put(int64_t mb, size_t j, at::Tensor t) {
    std::vector<at::Tensor> dropped;  // freed outside the lock
    std::lock_guard<std::mutex> lk(mu_);
    auto& row = values_.at(static_cast<size_t>(mb));
    row.at(j) = std::move(t);
    if (++filled_[static_cast<size_t>(mb)] < row.size()) return false;
    done_[static_cast<size_t>(mb)] = Clock::now();
    ++complete_;
    if (static_cast<size_t>(mb) < keepFrom_) dropped.swap(row);
    return true;
  }
  size_t complete() {
    std::lock_guard<std::mutex> lk(mu_);
    return complete_;
  }
  std::vector<std::vector<at::Tensor>> values_;
  std::vector<size_t> filled_;
  std::vector<Clock::time_point> done_;

 private:
  size_t complete_ = 0;
  size_t keepFrom_ = 0;
  std::mutex mu_;
};

}  // namespace pipecut::runtime
