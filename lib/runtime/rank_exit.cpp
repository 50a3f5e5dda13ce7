#include "runtime/rank_exit.h"

#include "support/error.h"

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

namespace {

// The message every rank prints: a peer's posted abort when there is one.
std::string rootCause(DistContext& dist, const std::string& why, bool echo) {
  for (int i = 0; i < (echo ? 10 : 1); ++i) {
    std::string prior = dist.postedAbort();
    if (!prior.empty()) return "stopping: " + prior + " (here: " + why + ")";
    if (echo) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  dist.abort(why);
  return why;
}

}  // namespace

void stopAllRanks(DistContext& dist, int rank, const std::string& why, bool echo) {
  exitRank(&dist, rank, rootCause(dist, why, echo));
}

void failRank(DistContext& dist, int rank, const std::string& why, bool echo) {
  std::string cause = rootCause(dist, why, echo);
  dist.abortGroup();
  if (dist.hostsStore()) std::this_thread::sleep_for(std::chrono::milliseconds(700));
  throw Error(ErrorKind::RankFailed, "", "rank " + std::to_string(rank), cause);
}

}  // namespace pipecut::runtime
