#pragma once
// A stage's busy time. On the CPU a forward call is done when it returns, so
// the host clock around it is the busy time. On CUDA the call only enqueues
// kernels on the stage's stream: the timer records CUDA events (with timing)
// before and after it and never waits for them per micro-batch, so the host
// keeps queueing ahead and copies overlap compute. Finished pairs are summed
// as they complete (a query, not a wait); finish() waits for the rest.
//
// Device spans are placed on the host clock through a reference event
// recorded on the stream with the host time at start(): approximate by the
// work already queued on the stream then (none, at the start of a run).
#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

namespace pipecut::runtime {

class StageTimer {
 public:
  using Clock = std::chrono::steady_clock;
  struct Span {
    int64_t microbatch;
    Clock::time_point begin, end;
  };

  // stream: the stage's CUDA stream, or none for a CPU stage. keepSpans:
  // remember each micro-batch's span (for a trace, or a device's bubble);
  // off for long CPU runs, where they would only cost memory.
  void start(std::optional<c10::cuda::CUDAStream> stream, bool keepSpans) {
    stream_ = stream;
    keepSpans_ = keepSpans;
    busyMs_ = 0;
    pending_.clear();
    spans_.clear();
    if (stream_) {
      ref_ = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
      ref_->record(*stream_);
    }
    refHost_ = Clock::now();
  }

  void before(int64_t g) {
    if (stream_) {
      auto ev = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
      ev->record(*stream_);
      pending_.push_back({g, std::move(ev), nullptr});
    } else {
      hostBegin_ = Clock::now();
    }
  }

  void after(int64_t g) {
    if (!stream_) {
      auto end = Clock::now();
      busyMs_ += std::chrono::duration<double, std::milli>(end - hostBegin_).count();
      if (keepSpans_) spans_.push_back({g, hostBegin_, end});
      return;
    }
    auto ev = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
    ev->record(*stream_);
    pending_.back().end = std::move(ev);
    drain(false);
  }

  // Waits for the events still outstanding and sums them.
  void finish() { drain(true); }

  double busyMs() const { return busyMs_; }
  // Per micro-batch, on the host clock (device time for CUDA stages).
  const std::vector<Span>& spans() const { return spans_; }

  // The time in which any of the timers' spans is running (stages sharing a GPU).
  static double unionMs(const std::vector<const StageTimer*>& timers) {
    std::vector<std::pair<Clock::time_point, Clock::time_point>> all;
    for (const StageTimer* t : timers)
      for (const Span& sp : t->spans_) all.emplace_back(sp.begin, sp.end);
    std::sort(all.begin(), all.end());
    double ms = 0;
    Clock::time_point reach{};
    for (const auto& [b, e] : all) {
      Clock::time_point from = std::max(b, reach);
      if (e > from) ms += std::chrono::duration<double, std::milli>(e - from).count();
      reach = std::max(reach, e);
    }
    return ms;
  }
  // Their mean busy time (stages computing side by side on CPU threads).
  static double meanMs(const std::vector<const StageTimer*>& timers) {
    double ms = 0;
    for (const StageTimer* t : timers) ms += t->busyMs_;
    return timers.empty() ? 0 : ms / static_cast<double>(timers.size());
  }

 private:
  struct Pending {
    int64_t microbatch;
    std::shared_ptr<at::cuda::CUDAEvent> begin, end;
  };

  // Folds finished pairs in, oldest first. More than kMaxPending outstanding
  // (the host far ahead of the GPU) waits for the oldest, to bound the events.
  void drain(bool all) {
    static constexpr size_t kMaxPending = 256;
    while (!pending_.empty() && pending_.front().end) {
      Pending& p = pending_.front();
      if (!all && pending_.size() <= kMaxPending && !p.end->query()) break;
      p.end->synchronize();
      float ms = p.begin->elapsed_time(*p.end);
      busyMs_ += ms;
      auto at = [&](const at::cuda::CUDAEvent& e) {
        auto offset = std::chrono::duration<double, std::milli>(ref_->elapsed_time(e));
        return refHost_ + std::chrono::duration_cast<Clock::duration>(offset);
      };
      if (keepSpans_) spans_.push_back({p.microbatch, at(*p.begin), at(*p.end)});
      pending_.pop_front();
    }
  }

  std::optional<c10::cuda::CUDAStream> stream_;
  std::shared_ptr<at::cuda::CUDAEvent> ref_;
  Clock::time_point refHost_, hostBegin_;
  std::deque<Pending> pending_;
  std::vector<Span> spans_;
  double busyMs_ = 0;
  bool keepSpans_ = false;
};

}  // namespace pipecut::runtime
