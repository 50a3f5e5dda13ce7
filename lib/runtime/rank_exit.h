#pragma once
// How a multi-process run ends after a failure: every rank exits with code 5
// and prints the root cause. Shared by inference and training.
//
// A blocked c10d receive cannot be interrupted, so a failing rank tells the
// others through the store and ends its own process; the process group is
// aborted first so that no NCCL kernel waits on for a peer that is gone. The
// rank that hosts the store lingers a moment, so that the others read why in
// the store rather than just losing it.
#include <string>

#include "runtime/distributed.h"

namespace pipecut::runtime {

// Prints "pipecut-run: rank R: why", aborts the group, exits 5. Only the
// first caller in the process gets through; later ones wait for the exit.
[[noreturn]] void exitRank(DistContext* dist, int rank, const std::string& why);

// Ends the run on this rank with a typed error (ErrorKind::RankFailed, exit
// 5 in the CLI) naming the root cause: the abort a peer posted, if any
// (echo: the failure seen here, a PeerError, is usually the echo of a peer
// that failed first and is about to post why, so it waits a moment for
// that), else `why`, which it posts for the others. Aborts the process group
// first. For a thread that can unwind; one that other threads may be
// blocked behind (a failed stage worker) uses exitRank.
[[noreturn]] void failRank(DistContext& dist, int rank, const std::string& why, bool echo);

// The same, ending the process at once (exit 5): for a failure seen while
// other threads of this rank wait in c10d calls that nothing can interrupt.
[[noreturn]] void stopAllRanks(DistContext& dist, int rank, const std::string& why, bool echo);

}  // namespace pipecut::runtime
