#pragma once
// The clock every report and trace of the runtime reads.
#include <chrono>

namespace pipecut::runtime {

using Clock = std::chrono::steady_clock;

inline double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace pipecut::runtime
