#pragma once
// Spans of compute and transfer per stage, written as a Chrome trace (JSON
// array of "X" events) that Perfetto and chrome://tracing open.
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "support/staging.h"

namespace pipecut::runtime {

// Where rank `rank` writes a trace asked for at `path`: the path itself in
// one process, else "<stem>.rank<R><ext>".
std::string rankTracePath(const std::string& path, int rank, int world);

class Trace {
 public:
  using Clock = std::chrono::steady_clock;
  void reset(int pid, bool enabled) {
    std::lock_guard<std::mutex> lk(mu_);
    events_.clear();
    pid_ = pid;
    enabled_ = enabled;
    origin_ = Clock::now();
  }
  bool enabled() const { return enabled_; }
  void add(std::string name, const char* category, int tid, Clock::time_point begin, Clock::time_point end);
  // `threads`: display names per tid. Written beside `dst` and renamed into
  // place; otherData.format says pipecut wrote it (runtime/outputs.h).
  void write(const support::Destination& dst, const std::map<int, std::string>& threads) const;

 private:
  struct Event {
    std::string name;
    const char* category;
    int tid;
    double tsUs, durUs;
  };
  mutable std::mutex mu_;
  std::vector<Event> events_;
  int pid_ = 0;
  bool enabled_ = false;
  Clock::time_point origin_ = Clock::now();
};

}  // namespace pipecut::runtime
