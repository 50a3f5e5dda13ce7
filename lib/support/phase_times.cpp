#include "support/phase_times.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace pipecut::support {
namespace {

std::mutex g_mutex;
std::vector<std::pair<std::string, double>> g_phases;
// Static initialization runs after the shared libraries' (LibTorch's), just
// before main: the total below is the time beyond process start.
const std::chrono::steady_clock::time_point g_start = std::chrono::steady_clock::now();
// Page faults and kernel time, from the same starting point: faulting in
// fresh pages is over a third of a 10^5-node preview, and telling it apart
// from user time shows which of the two grows faster than the node count
// (bench/scale.py: the kernel's part grows linearly).
struct Usage {
  long minorFaults = 0;
  double systemSeconds = 0;
  static Usage now() {
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return {r.ru_minflt, static_cast<double>(r.ru_stime.tv_sec) + static_cast<double>(r.ru_stime.tv_usec) * 1e-6};
  }
};
const Usage g_startUsage = Usage::now();

}  // namespace

void recordPhase(const std::string& name, double seconds) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& [n, s] : g_phases)
    if (n == name) {
      s += seconds;
      return;
    }
  g_phases.emplace_back(name, seconds);
}

bool phaseTimesWanted() {
  const char* v = std::getenv("PIPECUT_TIME_PHASES");
  return v && *v && std::strcmp(v, "0") != 0;
}

void printPhaseTimes() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& [n, s] : g_phases) std::fprintf(stderr, "phase %-28s %9.4f s\n", n.c_str(), s);
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
  std::fprintf(stderr, "phase %-28s %9.4f s\n", "total (since main)", total);
  const Usage end = Usage::now();
  std::fprintf(stderr, "since main: %ld minor page faults, %.3f s in the kernel\n",
               end.minorFaults - g_startUsage.minorFaults, end.systemSeconds - g_startUsage.systemSeconds);
  g_phases.clear();
}

}  // namespace pipecut::support
