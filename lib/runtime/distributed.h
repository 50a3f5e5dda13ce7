#pragma once
// Multi-process plumbing on torch.distributed's c10d: rendezvous from the
// standard environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT; a store client on every rank when torchrun's agent owns the
// store), a Gloo or NCCL process group, tensors sent with a small shape
// header, and an abort path so that one failing rank ends every rank.
//
// Invariants the callers rely on:
// - One thread at a time issues this rank's process-group operations (send,
//   recv, flush): NCCL forbids concurrent operations on one communicator, and
//   point-to-point matching is by issue order. The first thread that issues
//   one owns the group until it calls releaseIssuer(); an operation from any
//   other thread is an internal error naming both threads. The watcher and
//   abortGroup() touch only the store and the group's abort, never a message.
// - In "gloo-strict" mode every message carries tag 0, so messages match by
//   order alone, as under NCCL, which ignores tags: a sender and a receiver
//   that disagree on the order fail here on CPU instead of on a GPU cluster.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/control_messages.h"
#include "runtime/run_identity.h"
#include "support/error.h"

namespace pipecut {
struct TensorSpec;  // manifest/manifest.h
}

namespace pipecut::runtime {

// A peer failed, vanished or stayed silent past the timeout: the error a rank
// reports when the root cause is probably elsewhere (so it first looks for the
// abort the peer may have posted).
class PeerError : public Error {
 public:
  // Stopped: this rank ended the wait itself (DistContext::interrupt), the
  // message being why (another rank's failure, or one of its own threads').
  enum class Why { Lost, Timeout, Silent, Stopped };
  PeerError(Why why, int peer, const std::string& where, const std::string& message)
      : Error(ErrorKind::Internal, "", where, message), why_(why), peer_(peer) {}
  Why why() const { return why_; }
  int peer() const { return peer_; }

 private:
  Why why_;
  int peer_;
};

struct DistEnv {
  int rank = 0, world = 1, localRank = 0;
  int localWorld = 0;        // LOCAL_WORLD_SIZE: processes per machine (0: not given)
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;    // 1..65535
  bool agentStore = false;   // TORCHELASTIC_USE_AGENT_STORE=True
  std::string attempt = "0"; // TORCHELASTIC_RESTART_COUNT (digits)
  // PIPECUT_RDZV_SECRET: seals every message pipecut leaves in the store
  // (runtime/control_messages.h). Never written to the store or printed.
  std::string secret;
  // Throws pipecut::Error (InvalidInput) naming the variable.
  static DistEnv fromEnvironment();
};



class DistContext {
 public:
  // backend: "gloo", "gloo-strict" or "nccl". The rendezvous: rank 0 hosts
  // the store on MASTER_ADDR's own address (loopback stays loopback); every
  // rank says hello and publishes its identity, waits for every other rank's
  // (a rank that never arrives within the timeout: RankFailed naming it),
  // and compares (runtime/run_identity.h; a difference: InvalidInput naming
  // the field and the rank); then the process group is made.
  DistContext(const DistEnv& env, const std::string& backend, std::chrono::milliseconds timeout,
              const RunIdentity& identity);
  ~DistContext();

  int rank() const { return env_.rank; }
  int world() const { return env_.world; }
  const std::string& backend() const { return backend_; }
  // This process hosts the TCPStore (rank 0 when torchrun's agent does not).
  bool hostsStore() const { return env_.rank == 0 && !env_.agentStore; }
  bool nccl() const { return backend_ == "nccl"; }

  // What a receiver knows of a value before it arrives. With a static shape
  // (every dimension known from the manifest) the tensor goes alone; else a
  // small header with its shape and dtype goes first.
  struct Shape {
    std::vector<int64_t> sizes;
    at::ScalarType dtype = at::kFloat;
    bool known = false;
  };

  // The shape a receiver expects for a value of the manifest's spec: known
  // when every dimension is static and the dtype is one of ours.
  static Shape shapeOf(const TensorSpec& spec);

  // Sends asynchronously; at most `window` sends stay outstanding (16 unless
  // setSendWindow says otherwise).
  void setSendWindow(size_t window) { window_ = std::max<size_t>(1, window); }
  void send(const at::Tensor& t, int dst, int tag, const Shape& shape);
  // Lands on `device` over NCCL; over Gloo in host memory, whatever `device`
  // says (Gloo carries host tensors): the caller moves it where it is used.
  at::Tensor recv(int src, int tag, const at::Device& device, const Shape& shape);
  void flush();  // waits for every outstanding send

  // A receive of a value of known shape, posted now and waited for later.
  struct PostedRecv {
    c10::intrusive_ptr<c10d::Work> work;
    at::Tensor tensor;
  };
  // Gloo moves a message's bytes once the receiver has posted its receive
  // and the sender's Gloo thread answers that; a receive posted only when
  // its value is needed therefore waits for the sender's thread to be
  // scheduled, which on a machine whose cores all compute (a rank per core)
  // is a scheduler's time slice: a 2-rank generation's token hand-back took
  // 1 ms at the median and 20 ms at p90. Posted ahead, the receive is
  // already there when the sender sends, and the sender's own thread writes
  // the bytes. Gloo only: NCCL runs a communicator's point-to-point
  // operations in issue order, so a receive posted early would hold back
  // every send issued after it (callers check nccl()). A source's messages
  // of one tag match its receives in posting order, so the caller waits for
  // posted receives from a source in the order it posted them and takes no
  // other receive of that tag from it meanwhile. interrupt() aborts posted
  // receives too.
  PostedRecv postRecv(int src, int tag, const Shape& shape);
  at::Tensor wait(PostedRecv& posted, int src);
  // The issuing thread is done (after flush): another may issue from now on.
  void releaseIssuer();

  // Small values between ranks (report values at the end of a run), sealed
  // (runtime/control_messages.h). get waits up to the timeout; what it
  // returns verified, and the caller decodes it strictly.
  void put(const std::string& key, const std::string& value);
  std::string get(const std::string& key);
  // Rank 0's process id, from its hello (a checkpoint's temporary directory
  // is named after it: runtime/train/checkpoint.cpp).
  int64_t rank0Pid() const { return rank0Pid_; }

  // Tells every rank to stop (the first notice posted stays); each prints
  // control::describe() of it and exits non-zero.
  void abort(const control::AbortNotice& notice);
  // Aborts the process group (NCCL: ncclCommAbort on its communicators, so
  // that no kernel waits forever on a dead peer; Gloo: nothing to do) before
  // this process exits. Safe from any thread; issues no message.
  void abortGroup();
  // The abort another rank posted, described (control::describe), if any
  // ("" when none): the root cause of a failure here is often a peer that
  // failed first. A posted abort that does not decode or verify reads as
  // "the store holds an abort that ...".
  std::string postedAbort();
  // Ends every c10d wait this rank is in, and any it starts later: each
  // throws PeerError (Why::Stopped) with `why` as its message. Gloo's sends
  // and receives are aborted one by one (c10d's Work::abort); under NCCL the
  // group is aborted. Safe from any thread; the first call's `why` is kept.
  // This is how a thread that learns the run is over (a peer's abort, a
  // failed stage worker) ends the others' blocked calls, so that every
  // thread unwinds to a typed error instead of the process exiting under it.
  void interrupt(const std::string& why);
  // False once this context is destroyed: a fallback that outlives the run
  // (rank_exit.h's stopRank) checks it, and touches nothing else.
  std::shared_ptr<const std::atomic<bool>> aliveFlag() const { return alive_; }
  // Starts the thread that watches for another rank's abort, the store's
  // loss, and peers' heartbeats, and calls onAbort, once.
  // Every rank writes its heartbeat counter to the store every 0.5 s, until
  // every rank has finished (finish()); a peer whose counter stands still
  // for `silence` (5 s, or the timeout when that is shorter) is declared
  // dead. This is what ends a run whose peer died under NCCL, which, unlike
  // Gloo's sockets, does not notice a dead peer. Nothing in the store turns
  // the check off for a peer: a rank that is done keeps beating until all are.
  void watch(std::function<void(const std::string&)> onAbort);
  // Orderly end: marks this rank finished and waits (heartbeats going on)
  // until every rank has (a rank missing past the timeout: RankFailed naming
  // it); then stops watching, and rank 0 (which may host the store) waits
  // for every rank to have left before it goes away.
  void finish();

 private:
  void rendezvous(const RunIdentity& identity);
  // Polls until every rank's `prefix/<rank>` is in the store or the timeout;
  // returns the ranks still missing.
  std::vector<int> waitForAll(const std::string& prefix, std::chrono::milliseconds timeout);
  void putSealed(const std::string& key, const std::string& payload);
  std::optional<std::string> readSealed(const std::string& key);
  void checkIssuer(const char* what);
  int wireTag(int tag, bool header) const;
  void sendUnchecked(const at::Tensor& t, int dst, int tag, const Shape& shape);
  at::Tensor recvUnchecked(int src, int tag, const at::Device& device, const Shape& shape);
  // A receive from `src` that began at `start` failed with `e`: a PeerError,
  // Timeout when the clock says so, else Lost.
  [[noreturn]] void throwReceiveFailure(int src, std::chrono::steady_clock::time_point start, const std::exception& e) const;
  // Waits for `work` where interrupt() can end the wait (see there).
  void waitWork(const c10::intrusive_ptr<c10d::Work>& work);

  DistEnv env_;
  std::string backend_;
  bool strict_ = false;  // gloo-strict: one tag for every message
  std::mutex issuerMu_;
  std::optional<std::thread::id> issuer_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> pg_;
  std::mutex sendMu_;
  std::deque<std::pair<c10::intrusive_ptr<c10d::Work>, std::vector<at::Tensor>>> pending_;
  size_t window_ = 16;
  control::MacKey key_;  // the run's key (empty without a secret)
  int64_t rank0Pid_ = 0;
  std::atomic<bool> stopWatch_{false};
  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);
  std::mutex inflightMu_;  // guards the three below
  std::vector<c10::intrusive_ptr<c10d::Work>> inflight_;  // works being waited for, and posted receives
  bool interrupted_ = false;
  std::string interruptWhy_;
  std::thread watcher_;
};

}  // namespace pipecut::runtime
