#pragma once
// A progress line on stderr for long work (a 70B split writes for minutes):
// redrawn every 250 ms once the work has taken 2 s, by a thread of its own,
// so the work itself only bumps counters. Silent unless enabled (callers
// enable it for a terminal without --quiet/--json).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace pipecut::support {

bool stderrIsTerminal();

class ProgressLine {
 public:
  // `render` returns the line (without "\r"); called on the progress thread.
  ProgressLine(bool enabled, std::function<std::string(double elapsedSeconds)> render);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  // Ends the line (a newline if anything was shown). Idempotent.
  void stop();

 private:
  void loop();
  std::function<std::string(double)> render_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// "1.23 GB" / "512 MB" / "12 kB" (decimal units, as rates are usually quoted).
std::string humanBytes(double bytes);
// Sizes of things held (parameters, buffers): "512 B", "1.5 KiB", "3.2 MiB",
// "1.25 GiB", powers of 1024.
std::string humanBinaryBytes(uint64_t bytes);

}  // namespace pipecut::support
