#pragma once
// Wall seconds per phase of a command, printed on stderr at exit when
// PIPECUT_TIME_PHASES is set (like a compiler's -ftime-report): how a user
// with a slow split, and bench/scale.py, see where the time goes without a
// profiler. Recording costs one clock read per phase, so it is always on.
#include <chrono>
#include <string>

namespace pipecut::support {

// Records `seconds` under `name` (thread-safe; repeated names add up).
void recordPhase(const std::string& name, double seconds);

// True when PIPECUT_TIME_PHASES is set to anything but "" or "0".
bool phaseTimesWanted();

// Prints the recorded phases in the order first seen, then the time since
// the program's static initialization (~ main), then forgets the phases.
void printPhaseTimes();

// Times the enclosing scope.
class ScopedPhase {
 public:
  explicit ScopedPhase(std::string name) : name_(std::move(name)), start_(std::chrono::steady_clock::now()) {}
  ~ScopedPhase() {
    recordPhase(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  std::string name_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace pipecut::support
