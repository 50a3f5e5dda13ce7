#pragma once
// What every mode (inference, training, and next generation) does around its
// own work in a multi-process run, written once:
//   start   the rendezvous and identity check (DistContext), then the
//           watcher: another rank's abort or a silent peer interrupts this
//           rank's waits (stopRank), so that its threads unwind to a typed
//           error instead of the process exiting under them;
//   fail    this rank's failure, posted for the others as a code; every
//           rank exits 5 naming the root cause (rank_exit.h);
//   finish  heartbeats until every rank is done, the store's host last.
// And the thread policy every mode's workers share.
#include <memory>
#include <string>

#include "runtime/distributed.h"
#include "runtime/options.h"
#include "runtime/run_identity.h"

namespace pipecut::runtime {

class RankSession {
 public:
  // The rendezvous of `env` (world > 1) under `o`'s timeout.
  RankSession(const DistEnv& env, const std::string& backend, const SessionOptions& o, const RunIdentity& identity);
  DistContext& dist() { return *dist_; }
  int rank() const { return rank_; }
  // Ends this rank's run for `e` (RankFailed, after telling the others).
  [[noreturn]] void fail(const std::exception& e);
  void finish() { dist_->finish(); }

 private:
  int rank_;
  std::unique_ptr<DistContext> dist_;
};

// A mode's work (set-up through its report) as this rank's run: finish once
// it returns, fail when it throws (the mode's threads are joined by then, so
// the failure unwinds as a typed error). Without a session (one process) the
// work just runs.
template <class Work>
auto runAsRank(RankSession* session, Work&& work) -> decltype(work()) {
  try {
    auto report = work();
    if (session) session->finish();
    return report;
  } catch (const std::exception& e) {
    if (session) session->fail(e);
    throw;
  }
}

// Sets the intra-op threads of this process's workers: `requested` when
// given, else the machine's cores divided among its workers (`localWorkers`:
// stages in inference, training workers) and the processes of this machine
// (LOCAL_WORLD_SIZE, set by torchrun). With ATen's OpenMP backend every
// worker thread gets its own team of this many threads. Returns the count.
int setIntraOpThreads(int requested, size_t localWorkers);

}  // namespace pipecut::runtime
