#include "runtime/distributed.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "manifest/manifest.h"
#include "runtime/inputs.h"
#include "support/error.h"

namespace pipecut::runtime {

namespace {

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  try {
    return std::stoi(v);
  } catch (...) {
    invalidInput(name, std::string("environment variable is not an integer: '") + v + "'");
  }
}

// Gloo's messages start with a source location in brackets; drop it.
std::string plainMessage(const std::exception& e) {
  const auto* c10e = dynamic_cast<const c10::Error*>(&e);
  std::string m = firstLine(c10e ? c10e->what_without_backtrace() : e.what());
  if (!m.empty() && m[0] == '[') {
    size_t close = m.find("] ");
    if (close != std::string::npos) m = m.substr(close + 2);
  }
  return m;
}

constexpr int kHeader = 12;  // ndim, up to 9 sizes, dtype, numel check

std::string threadName(std::thread::id id) {
  std::ostringstream s;
  s << id;
  return s.str();
}

}  // namespace

DistEnv DistEnv::fromEnvironment() {
  DistEnv e;
  e.rank = envInt("RANK", 0);
  e.world = envInt("WORLD_SIZE", 1);
  e.localRank = envInt("LOCAL_RANK", e.rank);
  e.localWorld = envInt("LOCAL_WORLD_SIZE", 0);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.masterAddr = a;
  e.masterPort = envInt("MASTER_PORT", 29500);
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  e.agentStore = agent && std::string(agent) == "True";
  if (const char* r = std::getenv("TORCHELASTIC_RESTART_COUNT"); r && *r) e.attempt = r;
  if (e.world < 1) invalidInput("WORLD_SIZE", "must be at least 1");
  if (e.rank < 0 || e.rank >= e.world) invalidInput("RANK", "must be in [0, WORLD_SIZE)");
  return e;
}

DistContext::DistContext(const DistEnv& env, const std::string& backend, std::chrono::milliseconds timeout)
    : env_(env), backend_(backend), timeout_(timeout) {
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(env.masterPort);
    so.isServer = env.rank == 0 && !env.agentStore;
    so.numWorkers = env.world;
    so.waitWorkers = false;
    so.timeout = timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(env.masterAddr, so);
    store_ = c10::make_intrusive<c10d::PrefixStore>("pipecut/attempt_" + env.attempt, tcp);
    strict_ = backend == "gloo-strict";
    if (backend == "gloo" || strict_) {
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else if (env.masterAddr.rfind("127.", 0) == 0 || env.masterAddr == "localhost")
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      else
        opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, env.rank, env.world, opts);
    } else if (backend == "nccl") {
#ifdef USE_C10D_NCCL
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      pg_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store_, env.rank, env.world, opts);
#else
      invalidInput("--backend", "this build has no NCCL support");
#endif
    } else {
      invalidInput("--backend", "unknown backend '" + backend + "' (gloo, gloo-strict, nccl)");
    }
  } catch (const c10::Error& e) {
    throw Error(ErrorKind::InvalidInput, "", "rendezvous at " + env.masterAddr + ":" + std::to_string(env.masterPort),
                firstLine(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    if (dynamic_cast<const Error*>(&e)) throw;
    throw Error(ErrorKind::InvalidInput, "", "rendezvous at " + env.masterAddr + ":" + std::to_string(env.masterPort),
                firstLine(e.what()));
  }
}

DistContext::~DistContext() {
  *alive_ = false;
  stopWatch_ = true;
  if (watcher_.joinable()) watcher_.join();
}

void DistContext::checkIssuer(const char* what) {
  std::lock_guard<std::mutex> lock(issuerMu_);
  auto me = std::this_thread::get_id();
  if (!issuer_) issuer_ = me;
  if (*issuer_ != me)
    internalError(std::string("c10d ") + what, "thread " + threadName(me) + " issued an operation on the process group "
                                                "that thread " + threadName(*issuer_) +
                                                " owns; every message of a rank must be issued by one thread");
}

void DistContext::releaseIssuer() {
  checkIssuer("release");
  std::lock_guard<std::mutex> lock(issuerMu_);
  issuer_.reset();
}

DistContext::Shape DistContext::shapeOf(const TensorSpec& spec) {
  Shape s;
  auto dtype = scalarTypeFromName(spec.dtype);
  s.known = dtype.has_value();
  if (dtype) s.dtype = *dtype;
  for (const auto& d : spec.shape) {
    if (!d.symbol.empty()) s.known = false;
    s.sizes.push_back(d.size);
  }
  return s;
}

// Gloo matches a receive to a send by (source, tag); NCCL by issue order only.
// The strict mode gives every message tag 0 so that Gloo matches as NCCL does.
int DistContext::wireTag(int tag, bool header) const { return strict_ ? 0 : tag * 2 + (header ? 0 : 1); }

void DistContext::send(const at::Tensor& t, int dst, int tag, const Shape& shape) {
  checkIssuer("send");
  try {
    sendUnchecked(t, dst, tag, shape);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw PeerError(PeerError::Why::Lost, dst, "sending to rank " + std::to_string(dst),
                    "rank " + std::to_string(dst) + " failed or is unreachable: " + plainMessage(e));
  }
}

void DistContext::sendUnchecked(const at::Tensor& t, int dst, int tag, const Shape& shape) {
  at::Tensor data = t.contiguous();
  if (shape.known) {
    if (data.sizes() != c10::IntArrayRef(shape.sizes) || data.scalar_type() != shape.dtype)
      throw Error(ErrorKind::Internal, "", "send", "value of shape " + c10::str(data.sizes()) +
                                                       " where the manifest says " + c10::str(shape.sizes));
    std::vector<at::Tensor> dv{data};
    std::lock_guard<std::mutex> lock(sendMu_);
    pending_.emplace_back(pg_->send(dv, dst, wireTag(tag, false)), dv);
    while (pending_.size() > window_) {
      waitWork(pending_.front().first);
      pending_.pop_front();
    }
    return;
  }
  auto headerOpts = at::TensorOptions().dtype(at::kLong).device(nccl() ? data.device() : at::Device("cpu"));
  at::Tensor header = at::zeros({kHeader}, at::TensorOptions().dtype(at::kLong));
  auto h = header.accessor<int64_t, 1>();
  if (data.dim() > kHeader - 3) invalidInput("send", "tensors of more than 9 dimensions cannot be sent");
  h[0] = data.dim();
  for (int64_t d = 0; d < data.dim(); ++d) h[1 + d] = data.size(d);
  h[kHeader - 2] = static_cast<int64_t>(data.scalar_type());
  h[kHeader - 1] = data.numel();
  header = header.to(headerOpts);
  std::vector<at::Tensor> hv{header}, dv{data};
  std::lock_guard<std::mutex> lock(sendMu_);
  auto w1 = pg_->send(hv, dst, wireTag(tag, true));
  auto w2 = pg_->send(dv, dst, wireTag(tag, false));
  pending_.emplace_back(w1, hv);
  pending_.emplace_back(w2, dv);
  while (pending_.size() > window_) {
    waitWork(pending_.front().first);
    pending_.pop_front();
  }
}

at::Tensor DistContext::recv(int src, int tag, const at::Device& device, const Shape& shape) {
  checkIssuer("recv");
  auto start = std::chrono::steady_clock::now();
  try {
    return recvUnchecked(src, tag, device, shape);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // A timeout is told by the clock, not by the backend's wording (Gloo and
    // NCCL phrase it differently, and across versions).
    bool timedOut = std::chrono::steady_clock::now() - start >= timeout_ * 9 / 10;
    std::string where = "receiving from rank " + std::to_string(src);
    if (timedOut)
      throw PeerError(PeerError::Why::Timeout, src, where,
                      "no data from rank " + std::to_string(src) + " within the timeout (" +
                          std::to_string(timeout_.count() / 1000) + " s): it failed, hung, or waits on another rank");
    throw PeerError(PeerError::Why::Lost, src, where,
                    "rank " + std::to_string(src) + " failed or is unreachable: " + plainMessage(e));
  }
}

at::Tensor DistContext::recvUnchecked(int src, int tag, const at::Device& device, const Shape& shape) {
  at::Device where = nccl() ? device : at::Device("cpu");
  if (shape.known) {
    std::vector<at::Tensor> dv{at::empty(shape.sizes, at::TensorOptions().dtype(shape.dtype).device(where))};
    waitWork(pg_->recv(dv, src, wireTag(tag, false)));
    return dv[0];
  }
  std::vector<at::Tensor> hv{at::empty({kHeader}, at::TensorOptions().dtype(at::kLong).device(where))};
  waitWork(pg_->recv(hv, src, wireTag(tag, true)));
  at::Tensor header = hv[0].to(at::kCPU);
  auto h = header.accessor<int64_t, 1>();
  // Under an order-matched transport a receive that pairs with the wrong send
  // reads data as a header: refuse what cannot be one.
  if (h[0] < 0 || h[0] > kHeader - 3 || h[kHeader - 2] < 0 ||
      h[kHeader - 2] >= static_cast<int64_t>(at::ScalarType::NumOptions))
    internalError("receiving from rank " + std::to_string(src), "a corrupt shape header (messages out of order?)");
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < h[0]; ++d) sizes.push_back(h[1 + d]);
  auto dtype = static_cast<at::ScalarType>(h[kHeader - 2]);
  std::vector<at::Tensor> dv{at::empty(sizes, at::TensorOptions().dtype(dtype).device(where))};
  waitWork(pg_->recv(dv, src, wireTag(tag, false)));
  return dv[0];
}

void DistContext::flush() {
  checkIssuer("flush");
  std::lock_guard<std::mutex> lock(sendMu_);
  try {
    while (!pending_.empty()) {
      waitWork(pending_.front().first);
      pending_.pop_front();
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw PeerError(PeerError::Why::Lost, -1, "sending", "a peer failed or is unreachable: " + plainMessage(e));
  }
}

void DistContext::barrier() {
  // A store barrier: works for every backend and honours the timeout.
  std::string key = "barrier/" + std::to_string(barrierCount_++);
  store_->add(key, 1);
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (store_->add(key, 0) < env_.world) {
    if (std::chrono::steady_clock::now() > deadline) throw Error(ErrorKind::Internal, "", "barrier", "timed out");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void DistContext::put(const std::string& key, const std::string& value) {
  store_->set("kv/" + key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string DistContext::get(const std::string& key) {
  store_->wait({"kv/" + key}, timeout_);
  auto v = store_->get("kv/" + key);
  return std::string(v.begin(), v.end());
}

void DistContext::abort(const std::string& why) {
  try {
    std::string msg = "rank " + std::to_string(env_.rank) + ": " + why;
    store_->set("abort", std::vector<uint8_t>(msg.begin(), msg.end()));
  } catch (...) {
    // The store itself may be what failed; the others notice that too.
  }
}

std::string DistContext::postedAbort() {
  try {
    if (!store_->check({"abort"})) return "";
    auto v = store_->get("abort");
    return std::string(v.begin(), v.end());
  } catch (...) {
    return "";
  }
}

void DistContext::waitWork(const c10::intrusive_ptr<c10d::Work>& work) {
  // Why the wait was ended, when interrupt() ended it; read under the lock.
  auto stopped = [this] {
    return PeerError(PeerError::Why::Stopped, -1, "", interruptWhy_.empty() ? "stopped" : interruptWhy_);
  };
  {
    std::lock_guard<std::mutex> lk(inflightMu_);
    if (interrupted_) throw stopped();
    inflight_.push_back(work);
  }
  bool done = false;
  std::exception_ptr failure;
  try {
    done = work->wait(timeout_);  // false: aborted
  } catch (...) {
    failure = std::current_exception();
  }
  std::lock_guard<std::mutex> lk(inflightMu_);
  inflight_.erase(std::find(inflight_.begin(), inflight_.end(), work));
  if (interrupted_ || (!done && !failure)) throw stopped();
  if (failure) std::rethrow_exception(failure);
}

void DistContext::interrupt(const std::string& why) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  {
    std::lock_guard<std::mutex> lk(inflightMu_);
    if (interrupted_) return;
    interrupted_ = true;
    interruptWhy_ = why;
    works = inflight_;
  }
  if (nccl()) {
    abortGroup();  // ends NCCL's kernels and the works waiting on them
    return;
  }
  for (const auto& w : works) {
    try {
      w->abort();
    } catch (...) {
      // A work that completed meanwhile, or cannot abort: its wait ends anyway.
    }
  }
}

void DistContext::abortGroup() {
  try {
    if (pg_) pg_->abort();
  } catch (...) {
    // Exiting anyway; a group that cannot abort is no reason to hang.
  }
}

void DistContext::watch(std::function<void(const std::string&)> onAbort) {
  auto store = store_;
  auto silence = std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(5));
  watcher_ = std::thread([this, store, onAbort, silence] {
    using Clock = std::chrono::steady_clock;
    const std::string me = std::to_string(env_.rank);
    // Per peer: the heartbeat counter last read, and when it last moved.
    std::map<int, std::pair<int64_t, Clock::time_point>> seen;
    for (int r = 0; r < env_.world; ++r)
      if (r != env_.rank) seen[r] = {-1, Clock::now()};
    // onAbort once: the watcher's work is done when it has told why.
    bool fired = false;
    auto fire = [&](const std::string& why) {
      fired = true;
      onAbort(why);
    };
    for (int tick = 0; !stopWatch_ && !fired; ++tick) {
      try {
        if (store->check({"abort"})) {
          auto v = store->get("abort");
          fire(std::string(v.begin(), v.end()));
          continue;
        }
        if (tick % 5 == 0) {
          // add() never blocks, unlike get() on a key not yet written.
          store->add("heartbeat/" + me, 1);
          auto now = Clock::now();
          for (auto& [peer, last] : seen) {
            int64_t beat = store->add("heartbeat/" + std::to_string(peer), 0);
            if (beat != last.first) {
              last = {beat, now};
            } else if (now - last.second > silence && store->add("done/" + std::to_string(peer), 0) == 0 && !stopWatch_) {
              std::string why = "rank " + std::to_string(peer) + " is dead or frozen: no heartbeat for " +
                                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - last.second).count()) +
                                " s";
              abort(why);  // so that every rank names the peer, not the store that may go with this rank
              fire(why);
              break;
            }
          }
        }
      } catch (const std::exception& e) {
        if (!stopWatch_) fire("lost contact with the rendezvous store (" + firstLine(e.what()) + ")");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

void DistContext::finish() {
  // Peers stop expecting heartbeats from a rank that says it is done.
  store_->add("done/" + std::to_string(env_.rank), 1);
  stopWatch_ = true;
  if (watcher_.joinable()) watcher_.join();
  store_->add("finished", 1);
  if (env_.rank != 0) return;
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (store_->add("finished", 0) < env_.world && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace pipecut::runtime
