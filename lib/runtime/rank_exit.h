#pragma once
// How a multi-process run ends after a failure: every rank exits with code 5
// and prints the root cause. Shared by inference and training.
//
// A failing rank posts why in the store; every rank, its threads' blocked
// c10d calls interrupted (DistContext::interrupt), unwinds to a typed error
// (ErrorKind::RankFailed). The process group is aborted first so that no
// NCCL kernel waits on for a peer that is gone. The rank that hosts the store
// lingers a moment, so that the others read why in the store rather than
// just losing it. Exiting the process under its threads is left for a wait
// nothing interrupts (stopRank's fallback).
#include <chrono>
#include <string>

#include "runtime/distributed.h"

namespace pipecut::runtime {

// Ends the run on this rank with a typed error (ErrorKind::RankFailed, exit
// 5 in the CLI) naming the root cause: the abort a peer posted, if any
// (echo: the failure seen here, a PeerError, is usually the echo of a peer
// that failed first and is about to post why, so it waits a moment for
// that), else `why`, which it posts for the others. Aborts the process group
// first.
// stopped: the failure here is a wait DistContext::interrupt ended (a
// PeerError of Why::Stopped, `why` its message): the message is the cause
// only, "stopping: <posted abort, else why>".
// `notice`: what to post when this rank's failure is the first (a code, not
// `why`: runtime/control_messages.h).
[[noreturn]] void failRank(DistContext& dist, int rank, const std::string& why, bool echo, bool stopped,
                           const control::AbortNotice& notice);

// failRank for the exception that ended this rank's run: a PeerError is an
// echo of a peer's failure (Why::Stopped: a wait a peer's abort ended);
// anything else is this rank's own failure, posted for the others.
[[noreturn]] void failRankOn(DistContext& dist, int rank, const std::exception& e);

// For the rank whose run another rank ended (the watcher saw its abort or a
// dead peer): interrupts this rank's c10d waits (DistContext::interrupt), so
// that its threads unwind and the run ends in failRank(stopped = true). A
// wait that nothing interrupts (a kernel, a store call) gets `grace`: then
// the process prints why and exits 5 under its threads.
void stopRank(DistContext& dist, int rank, const std::string& why, std::chrono::milliseconds grace);

// The grace inference and training give their threads to unwind.
inline constexpr std::chrono::milliseconds kStopGrace{5000};

}  // namespace pipecut::runtime
