#include "runtime/distributed.h"

#include <netdb.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
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

#include "emit/dtypes.h"
#include "manifest/manifest.h"
#include "runtime/inputs.h"
#include "support/error.h"
#include "support/sha256.h"

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
  if (const char* k = std::getenv("PIPECUT_RDZV_SECRET"); k) e.secret = k;  // empty: unset
  if (e.world < 1) invalidInput("WORLD_SIZE", "must be at least 1");
  if (e.rank < 0 || e.rank >= e.world) invalidInput("RANK", "must be in [0, WORLD_SIZE)");
  if (e.localWorld < 0) invalidInput("LOCAL_WORLD_SIZE", "must not be negative");
  if (e.masterPort < 1 || e.masterPort > 65535)
    invalidInput("MASTER_PORT", "must be a port in [1, 65535], not " + std::to_string(e.masterPort));
  if (e.attempt.size() > 9 || e.attempt.find_first_not_of("0123456789") != std::string::npos)
    invalidInput("TORCHELASTIC_RESTART_COUNT", "must be a number");
  if (!e.secret.empty() && e.secret.size() < 16)
    invalidInput("PIPECUT_RDZV_SECRET", "must hold at least 16 characters (e.g. `openssl rand -hex 32`)");
  return e;
}

namespace {

// A socket listening on MASTER_ADDR's own address and MASTER_PORT, for the
// store to take over: loopback stays loopback, one interface stays one.
// TCPStore alone listens on every interface.
int listenOn(const std::string& addr, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    invalidInput("MASTER_ADDR", "cannot resolve '" + addr + "': " + ::gai_strerror(rc));
  int err = 0;
  for (addrinfo* a = found; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 2048) == 0) {
      ::freeaddrinfo(found);
      return fd;
    }
    err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  const std::string where = addr + ":" + std::to_string(port);
  if (err == EADDRNOTAVAIL)
    invalidInput("MASTER_ADDR", "'" + addr + "' is not an address of this machine; rank 0 hosts the store there");
  throw Error(osErrorKind(err) == ErrorKind::InvalidInput ? ErrorKind::Environment : osErrorKind(err), "",
              "rendezvous at " + where, std::string("cannot listen: ") + std::strerror(err));
}

std::string randomBytes(size_t n) {
  std::string out(n, '\0');
  for (size_t got = 0; got < n;) {
    ssize_t k = ::getrandom(out.data() + got, n - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) throw Error(ErrorKind::Environment, "", "getrandom", std::strerror(errno));
    got += static_cast<size_t>(k);
  }
  return out;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i)
    out += (i ? (i + 1 == ranks.size() ? " and " : ", ") : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

DistContext::DistContext(const DistEnv& env, const std::string& backend, std::chrono::milliseconds timeout,
                         const RunIdentity& identity)
    : env_(env), backend_(backend), timeout_(timeout) {
  const std::string where = "rendezvous at " + env.masterAddr + ":" + std::to_string(env.masterPort);
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(env.masterPort);
    so.isServer = hostsStore();
    so.numWorkers = env.world;
    so.waitWorkers = false;
    so.timeout = timeout;
    if (so.isServer) so.masterListenFd = listenOn(env.masterAddr, env.masterPort);
    c10::intrusive_ptr<c10d::TCPStore> tcp;
    try {
      tcp = c10::make_intrusive<c10d::TCPStore>(env.masterAddr, so);
    } catch (const std::exception& e) {
      if (so.isServer) throw;
      throw Error(ErrorKind::RankFailed, "", where,
                  "cannot reach the rendezvous store, which rank 0 hosts (" + plainMessage(e) + ")");
    }
    store_ = c10::make_intrusive<c10d::PrefixStore>("pipecut/attempt_" + env.attempt, tcp);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorKind::Environment, "", where, plainMessage(e));
  }
  rendezvous(identity);
  try {
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
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // Every rank said hello: a process group that cannot form now lost a peer.
    throw Error(ErrorKind::RankFailed, "", where, "the process group did not form: " + plainMessage(e));
  }
}

void DistContext::putSealed(const std::string& key, const std::string& payload) {
  std::string sealed = control::seal(key_, key, payload);
  store_->set(key, std::vector<uint8_t>(sealed.begin(), sealed.end()));
}

std::optional<std::string> DistContext::readSealed(const std::string& key) {
  if (!store_->check({key})) return std::nullopt;
  auto v = store_->get(key);
  return control::unseal(key_, key, std::string(v.begin(), v.end()));
}

std::vector<int> DistContext::waitForAll(const std::string& prefix, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing;
  for (int r = 0; r < env_.world; ++r) missing.push_back(r);
  for (;;) {
    std::vector<int> still;
    for (int r : missing)
      if (!store_->check({prefix + "/" + std::to_string(r)})) still.push_back(r);
    missing = std::move(still);
    if (missing.empty() || std::chrono::steady_clock::now() > deadline) return missing;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void DistContext::rendezvous(const RunIdentity& identity) {
  const std::string where = "rendezvous at " + env_.masterAddr + ":" + std::to_string(env_.masterPort);
  const std::string seconds = std::to_string(timeout_.count() / 1000) + " s";
  try {
    // Hellos: sealed with the secret alone; they bring the nonces of the run's key.
    control::MacKey hello = control::helloKey(env_.secret);
    control::Hello mine{env_.rank, static_cast<int64_t>(::getpid()), randomBytes(control::kNonceBytes)};
    const std::string me = "hello/" + std::to_string(env_.rank);
    std::string sealed = control::seal(hello, me, control::encodeHello(mine));
    store_->set(me, std::vector<uint8_t>(sealed.begin(), sealed.end()));
    std::vector<int> missing = waitForAll("hello", timeout_);
    if (!missing.empty())
      throw Error(ErrorKind::RankFailed, "", where,
                  std::string(missing.size() == 1 ? "rank " : "ranks ") + rankList(missing) +
                      " never arrived within the timeout (" + seconds + ")");
    std::vector<std::string> nonces;
    for (int r = 0; r < env_.world; ++r) {
      const std::string key = "hello/" + std::to_string(r);
      auto v = store_->get(key);
      control::Hello h = control::decodeHello(control::unseal(hello, key, std::string(v.begin(), v.end())), r);
      if (r == 0) rank0Pid_ = h.pid;
      nonces.push_back(h.nonce);
    }
    key_ = control::runKey(env_.secret, nonces);

    // What each rank is about to run, field by field.
    std::vector<std::string> digests;
    for (const auto& [name, value] : identity) digests.push_back(sha256Bytes(value.data(), value.size()));
    putSealed("identity/" + std::to_string(env_.rank), control::encodeIdentity(digests));
    missing = waitForAll("identity", timeout_);
    if (!missing.empty())
      throw Error(ErrorKind::RankFailed, "", where,
                  std::string(missing.size() == 1 ? "rank " : "ranks ") + rankList(missing) +
                      " stopped during the rendezvous");
    std::string disagreement;
    for (int r = 0; r < env_.world && disagreement.empty(); ++r) {
      if (r == env_.rank) continue;
      std::vector<std::string> theirs = control::decodeIdentity(*readSealed("identity/" + std::to_string(r)));
      if (theirs.size() != digests.size()) {
        disagreement = "rank " + std::to_string(r) + " runs another pipecut (" + identity[0].first + ")";
        break;
      }
      for (size_t i = 0; i < digests.size(); ++i)
        if (theirs[i] != digests[i]) {
          std::string mine = identity[i].second.size() <= 80 ? " (here: " + identity[i].second + ")" : "";
          disagreement = "rank " + std::to_string(r) + " was started with another " + identity[i].first + " than rank " +
                         std::to_string(env_.rank) + mine + "; every rank must be given the same";
          break;
        }
    }
    // Every rank reads every identity before the store's host may go.
    putSealed("checked/" + std::to_string(env_.rank), control::encodeCounter(disagreement.empty() ? 0 : 1));
    if (!disagreement.empty()) {
      if (hostsStore()) waitForAll("checked", std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(10)));
      throw Error(ErrorKind::InvalidInput, "", where, disagreement);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorKind::RankFailed, "", where, "lost the rendezvous store: " + plainMessage(e));
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
  auto dtype = emit::scalarTypeFromTorchName(spec.dtype);
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
    throwReceiveFailure(src, start, e);
  }
}

void DistContext::throwReceiveFailure(int src, std::chrono::steady_clock::time_point start, const std::exception& e) const {
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

DistContext::PostedRecv DistContext::postRecv(int src, int tag, const Shape& shape) {
  checkIssuer("postRecv");
  if (nccl() || !shape.known) internalError("postRecv", "a posted receive takes Gloo and a known shape");
  std::vector<at::Tensor> dv{at::empty(shape.sizes, at::TensorOptions().dtype(shape.dtype))};
  PostedRecv posted;
  try {
    posted.work = pg_->recv(dv, src, wireTag(tag, false));
  } catch (const std::exception& e) {
    throw PeerError(PeerError::Why::Lost, src, "receiving from rank " + std::to_string(src),
                    "rank " + std::to_string(src) + " failed or is unreachable: " + plainMessage(e));
  }
  posted.tensor = dv[0];
  std::lock_guard<std::mutex> lk(inflightMu_);
  inflight_.push_back(posted.work);  // so that interrupt() aborts it, waited for or not
  if (interrupted_) posted.work->abort();
  return posted;
}

at::Tensor DistContext::wait(PostedRecv& posted, int src) {
  checkIssuer("recv");
  {
    // waitWork lists it again; an interrupt() in between finds interrupted_ set there.
    std::lock_guard<std::mutex> lk(inflightMu_);
    if (auto it = std::find(inflight_.begin(), inflight_.end(), posted.work); it != inflight_.end()) inflight_.erase(it);
  }
  auto start = std::chrono::steady_clock::now();
  try {
    waitWork(posted.work);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throwReceiveFailure(src, start, e);
  }
  posted.work.reset();
  return std::move(posted.tensor);
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

void DistContext::put(const std::string& key, const std::string& value) { putSealed("kv/" + key, value); }

std::string DistContext::get(const std::string& key) {
  store_->wait({"kv/" + key}, timeout_);
  return *readSealed("kv/" + key);
}

void DistContext::abort(const control::AbortNotice& notice) {
  try {
    // The first notice stays: it is the root cause the others name.
    std::string sealed = control::seal(key_, "abort", control::encodeAbort(notice));
    store_->compareSet("abort", {}, std::vector<uint8_t>(sealed.begin(), sealed.end()));
  } catch (...) {
    // The store itself may be what failed; the others notice that too.
  }
}

std::string DistContext::postedAbort() {
  std::optional<std::string> payload;
  try {
    payload = readSealed("abort");
  } catch (const Error&) {
    return "the store holds an abort message that does not verify";
  } catch (...) {
    return "";
  }
  if (!payload) return "";
  try {
    return control::describe(control::decodeAbort(*payload, env_.world));
  } catch (const Error&) {
    return "the store holds an abort message that does not decode";
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
  auto silence = std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(5));
  watcher_ = std::thread([this, onAbort, silence] {
    using Clock = std::chrono::steady_clock;
    const std::string me = "hb/" + std::to_string(env_.rank);
    // Per peer: the heartbeat counter last read, and when it last moved.
    std::map<int, std::pair<int64_t, Clock::time_point>> seen;
    for (int r = 0; r < env_.world; ++r)
      if (r != env_.rank) seen[r] = {-1, Clock::now()};
    uint64_t beats = 0;
    // onAbort once: the watcher's work is done when it has told why.
    bool fired = false;
    auto fire = [&](const std::string& why) {
      fired = true;
      onAbort(why);
    };
    for (int tick = 0; !stopWatch_ && !fired; ++tick) {
      try {
        if (store_->check({"abort"})) {
          fire(postedAbort());
          continue;
        }
        if (tick % 5 == 0) {
          putSealed(me, control::encodeCounter(++beats));
          auto now = Clock::now();
          for (auto& [peer, last] : seen) {
            auto payload = readSealed("hb/" + std::to_string(peer));
            int64_t beat = payload ? static_cast<int64_t>(control::decodeCounter(*payload)) : -1;
            if (beat != last.first) {
              last = {beat, now};
            } else if (now - last.second > silence && !stopWatch_) {
              control::AbortNotice notice{control::AbortCode::PeerSilent, env_.rank, peer, 0};
              abort(notice);  // so that every rank names the peer, not the store that may go with this rank
              fire(control::describe(notice));
              break;
            }
          }
        }
      } catch (const Error& e) {
        // A message that does not decode or verify: the others learn it by a code.
        if (!stopWatch_) {
          abort(control::AbortNotice{control::AbortCode::BadMessage, env_.rank, -1, 0});
          fire(e.what());
        }
      } catch (const std::exception& e) {
        if (!stopWatch_) fire("lost contact with the rendezvous store (" + firstLine(e.what()) + ")");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

void DistContext::finish() {
  // Heartbeats go on (the watcher runs) until every rank is done: a peer is
  // never exempt from the check on the store's word.
  putSealed("finished/" + std::to_string(env_.rank), control::encodeCounter(0));
  std::vector<int> missing = waitForAll("finished", timeout_);
  if (!missing.empty())
    throw PeerError(PeerError::Why::Timeout, missing[0], "finishing",
                    std::string(missing.size() == 1 ? "rank " : "ranks ") + rankList(missing) +
                        " did not finish within the timeout");
  stopWatch_ = true;
  if (watcher_.joinable()) watcher_.join();
  putSealed("left/" + std::to_string(env_.rank), control::encodeCounter(0));
  if (hostsStore()) waitForAll("left", std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(10)));
}

}  // namespace pipecut::runtime
