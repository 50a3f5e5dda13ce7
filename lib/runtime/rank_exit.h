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

// Reports the root cause, posts it for the other ranks, and exits. A peer's
// failure seen here (echo: a PeerError, a lost connection, a timeout) is
// usually the echo of a peer that failed first and is about to post why, so
// such an error waits a moment for that.
[[noreturn]] void stopAllRanks(DistContext& dist, int rank, const std::string& why, bool echo);

}  // namespace pipecut::runtime
