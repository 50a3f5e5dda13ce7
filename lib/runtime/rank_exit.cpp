#include "runtime/rank_exit.h"

#include "support/error.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <thread>

namespace pipecut::runtime {

namespace {

// Prints "pipecut-run: rank R: why" and exits 5 under the process's threads.
// Only the first caller gets through; later ones wait for the exit.
[[noreturn]] void exitRank(int rank, const std::string& why) {
  static std::atomic<bool> dying{false};
  if (dying.exchange(true))  // another thread is already ending the process
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::cerr << "pipecut-run: rank " << rank << ": " << why << std::endl;
  std::_Exit(5);
}

// The message every rank prints: a peer's posted abort when there is one.
std::string rootCause(DistContext& dist, const std::string& why, bool echo, const control::AbortNotice& notice) {
  for (int i = 0; i < (echo ? 10 : 1); ++i) {
    std::string prior = dist.postedAbort();
    if (!prior.empty()) return "stopping: " + prior + " (here: " + why + ")";
    if (echo) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  dist.abort(notice);
  return why;
}

}  // namespace

void failRankOn(DistContext& dist, int rank, const std::exception& e) {
  const auto* peer = dynamic_cast<const PeerError*>(&e);
  const bool stopped = peer && peer->why() == PeerError::Why::Stopped;
  control::AbortNotice notice{control::AbortCode::RankFailed, rank, -1, static_cast<uint8_t>(ErrorKind::Internal)};
  if (peer && peer->peer() >= 0 && peer->peer() < dist.world() && peer->why() != PeerError::Why::Stopped) {
    notice.code = peer->why() == PeerError::Why::Timeout ? control::AbortCode::PeerTimeout
                  : peer->why() == PeerError::Why::Silent ? control::AbortCode::PeerSilent
                                                          : control::AbortCode::PeerLost;
    notice.peer = peer->peer();
    notice.kind = 0;
  } else if (peer) {
    notice.kind = static_cast<uint8_t>(ErrorKind::RankFailed);
  } else if (const auto* err = dynamic_cast<const Error*>(&e)) {
    notice.kind = static_cast<uint8_t>(err->exitCode());
  }
  failRank(dist, rank, stopped ? peer->message() : firstLine(e.what()), peer != nullptr, stopped, notice);
}

void stopRank(DistContext& dist, int rank, const std::string& why, std::chrono::milliseconds grace) {
  dist.interrupt(why);
  // The fallback must not touch `dist`: the run may be unwinding, and the
  // context gone, by the time it wakes. A run that unwound as far as
  // destroying the context needs no fallback (a library caller, e.g. a
  // test, lives on).
  std::thread([rank, why, grace, alive = dist.aliveFlag()] {
    std::this_thread::sleep_for(grace);
    if (!*alive) return;
    exitRank(rank, "stopping: " + why + " (this rank's threads did not unwind within " + std::to_string(grace.count()) + " ms)");
  }).detach();
}

void failRank(DistContext& dist, int rank, const std::string& why, bool echo, bool stopped,
              const control::AbortNotice& notice) {
  std::string cause;
  if (stopped) {
    std::string prior = dist.postedAbort();
    cause = "stopping: " + (prior.empty() ? why : prior);
  } else {
    cause = rootCause(dist, why, echo, notice);
  }
  dist.abortGroup();
  if (dist.hostsStore()) std::this_thread::sleep_for(std::chrono::milliseconds(700));
  throw Error(ErrorKind::RankFailed, "", "rank " + std::to_string(rank), cause);
}

}  // namespace pipecut::runtime
