#include "runtime/rank_exit.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <thread>

namespace pipecut::runtime {

void exitRank(DistContext* dist, int rank, const std::string& why) {
  static std::atomic<bool> dying{false};
  if (dying.exchange(true))  // another thread is already ending the process
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::cerr << "pipecut-run: rank " << rank << ": " << why << std::endl;
  if (dist) {
    dist->abortGroup();
    if (dist->hostsStore()) std::this_thread::sleep_for(std::chrono::milliseconds(700));
  }
  std::_Exit(5);
}

void stopAllRanks(DistContext& dist, int rank, const std::string& why, bool echo) {
  for (int i = 0; i < (echo ? 10 : 1); ++i) {
    std::string prior = dist.postedAbort();
    if (!prior.empty()) exitRank(&dist, rank, "stopping: " + prior + " (here: " + why + ")");
    if (echo) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  dist.abort(why);
  exitRank(&dist, rank, why);
}

}  // namespace pipecut::runtime
