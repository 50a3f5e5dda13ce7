#include "runtime/pipeline.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <ATen/Parallel.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/script.h>

#include "manifest/manifest.h"
#include "manifest/verify.h"
#include "runtime/compare.h"
#include "runtime/distributed.h"
#include "runtime/exchange.h"
#include "runtime/inputs.h"
#include "runtime/placement.h"
#include "runtime/reference.h"
#include "runtime/trace.h"
#include "support/error.h"

namespace pipecut::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct LocalStage {
  const Stage* info = nullptr;
  torch::jit::Module module;
  c10::Device device{c10::kCPU};
  std::unique_ptr<Mailbox> mailbox;
  std::vector<int> slot;  // per forward() argument: mailbox slot, or -1
  std::optional<c10::cuda::CUDAStream> stream, copyStream;
  double busyMs = 0;
};

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

class Engine {
 public:
  Engine(const RunOptions& o, Manifest m) : o_(o), m_(std::move(m)), P_(m_.stages.size()) {}

  RunReport run() {
    setupPlacement();
    if (world_ > 1) {
      std::string backend = o_.backend;
      if (backend == "auto") backend = allCuda_ ? "nccl" : "gloo";
      dist_ = std::make_unique<DistContext>(DistEnv::fromEnvironment(), backend,
                                            std::chrono::milliseconds(static_cast<int64_t>(o_.timeoutSeconds * 1000)));
      dist_->watch([this](const std::string& why) { die("stopping: " + why); });
    }
    loadStages();
    setThreads();
    loadInputs();
    buildEdges();
    try {
      if (o_.warmup > 0) runIterations(o_.warmup);
      resetMemoryStats();
      runIterations(o_.iterations);
    } catch (const std::exception& e) {
      if (dist_) stopAllRanks(firstLine(e.what()));
      throw;
    }
    RunReport r = report();
    if (dist_) dist_->finish();
    return r;
  }

 private:
  // In a multi-process run a blocked receive cannot be interrupted, so a
  // failure ends the process after telling the other ranks.
  [[noreturn]] void die(const std::string& why) {
    std::cerr << "pipecut-run: rank " << rank_ << ": " << why << std::endl;
    std::_Exit(5);
  }

  // Reports the root cause, posts it for the other ranks, and exits. A lost
  // connection is usually the echo of a peer that failed first and is about to
  // post why, so such an error waits a moment for that.
  [[noreturn]] void stopAllRanks(const std::string& why) {
    bool echo = why.find("failed or is unreachable") != std::string::npos;
    for (int i = 0; i < (echo ? 10 : 1); ++i) {
      std::string prior = dist_->postedAbort();
      if (!prior.empty()) die("stopping: " + prior + " (here: " + why + ")");
      if (echo) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    dist_->abort(why);
    die(why);
  }

  bool receivers() const { return dist_ && dist_->backend() == "gloo"; }

  static DistContext::Shape shapeOf(const TensorSpec& t) {
    DistContext::Shape s;
    auto dtype = scalarTypeFromName(t.dtype);
    s.known = dtype.has_value();
    if (dtype) s.dtype = *dtype;
    for (const auto& d : t.shape) {
      if (!d.symbol.empty()) s.known = false;
      s.sizes.push_back(d.size);
    }
    return s;
  }

  // Receives stage input k of micro-batch g from the rank that produces it,
  // on the consuming stage's device.
  Payload receiveInput(const LocalStage& st, size_t k, int64_t g, int traceTid) {
    const StageInput& in = st.info->inputs[k];
    auto r0 = Clock::now();
    at::Tensor t = dist_->recv(stageRank_[in.source.stage], tag(inEdge_[st.info->index][k], g), st.device,
                               wire_[in.source.stage][in.source.output]);
    if (trace_.enabled())
      trace_.add("recv " + in.name + " mb " + std::to_string(g), "transfer", traceTid, r0, Clock::now());
    return deliverTo(st, t, nullptr);
  }

  // Posts receives ahead of the worker, so transfers overlap compute; the
  // mailbox bounds how far ahead.
  void receive(LocalStage& st, size_t k) {
    for (int64_t g = 0; g < total_; ++g)
      st.mailbox->put(g, static_cast<size_t>(st.slot[k]), receiveInput(st, k, g, 2000 + static_cast<int>(st.info->index)));
  }

  void setupPlacement() {
    DistEnv env = DistEnv::fromEnvironment();
    rank_ = env.rank;
    world_ = env.world;
    localRank_ = env.localRank;
    Placement pl = placeStages(m_, o_, rank_, world_, localRank_);
    stageRank_ = std::move(pl.stageRank);
    devices_ = std::move(pl.devices);
    allCuda_ = pl.allCuda;
  }

  void loadStages() {
    if (o_.verifyHashes) {
      // This rank's stage files, hashed on every core before anything loads.
      StageFileCheck check;
      check.select = [&](const Stage& st, const StageFile& f) {
        return stageRank_[st.index] == rank_ && f.format == "torchscript";
      };
      auto start = Clock::now();
      verifyStageFiles(o_.dir, m_, check);
      verifyMs_ = msBetween(start, Clock::now());
      verifiedBytes_ = stageFileBytes(m_, check);
    }
    for (size_t s = 0; s < P_; ++s) {
      if (stageRank_[s] != rank_) continue;
      const Stage& st = m_.stages[s];
      const StageFile* file = nullptr;
      for (const auto& f : st.files)
        if (f.format == "torchscript") file = &f;
      if (!file) invalidInput("stage " + std::to_string(s), "has no TorchScript (.pt) file; split with --format torchscript");
      std::string path = o_.dir + "/" + file->path;
      auto ls = std::make_unique<LocalStage>();
      ls->info = &st;
      ls->device = devices_[s];
      try {
        ls->module = torch::jit::load(path, ls->device);
      } catch (const c10::Error& e) {
        throw Error(ErrorKind::InvalidInput, path, "", "cannot load: " + firstLine(e.what_without_backtrace()));
      }
      ls->module.eval();
      // Values from other stages arrive through the mailbox: local ones put
      // there by their producer, remote ones by a receiver thread (Gloo). With
      // NCCL, whose point-to-point order is the issue order, the worker
      // receives them itself, in order.
      size_t slots = 0;
      for (const auto& in : st.inputs) {
        bool fromStage = in.source.kind == ValueSource::Kind::StageOutput;
        bool local = fromStage && stageRank_[in.source.stage] == rank_;
        ls->slot.push_back(local || (fromStage && receivers()) ? static_cast<int>(slots++) : -1);
      }
      if (ls->device.is_cuda()) {
        ls->stream = c10::cuda::getStreamFromPool(false, ls->device.index());
        ls->copyStream = c10::cuda::getStreamFromPool(false, ls->device.index());
      }
      local_[s] = std::move(ls);
    }
  }

  // With ATen's OpenMP backend every stage thread gets its own team of this
  // many threads, so the default divides the cores among the local stages and
  // among the processes on this machine (LOCAL_WORLD_SIZE, set by torchrun).
  void setThreads() {
    int n = o_.threads;
    if (n <= 0) {
      int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      int localWorld = 1;
      if (const char* lw = std::getenv("LOCAL_WORLD_SIZE"); lw && *lw) localWorld = std::max(1, std::atoi(lw));
      n = std::max(1, cores / (std::max<int>(1, static_cast<int>(local_.size())) * localWorld));
    }
    at::set_num_threads(n);
  }

  void loadInputs() {
    std::vector<at::Tensor> inputs;
    if (o_.randomInputs) {
      inputs = randomInputs(m_, o_.seed, o_.batch > 0 ? o_.batch : 2, o_.microbatches, o_.intHigh);
    } else if (!o_.inputsPath.empty()) {
      inputs = runtime::loadInputs(o_.inputsPath, m_);
    } else {
      invalidInput("inputs", "give --inputs FILE or --random-inputs");
    }
    batch_ = inputs.empty() || inputs[0].dim() == 0 ? 1 : static_cast<uint64_t>(inputs[0].size(0));
    chunks_ = splitMicrobatches(inputs, m_, o_.microbatches);
    // Host tensors headed for a GPU go through pinned memory so that copies
    // can overlap compute.
    bool anyCuda = false;
    for (const auto& [s, ls] : local_) anyCuda |= ls->device.is_cuda();
    if (anyCuda)
      for (auto& mb : chunks_)
        for (auto& t : mb) t = t.pin_memory();
  }

  // Every stage-output -> consumer connection gets an id (ids make message
  // tags), and every stage output the shape it travels with; both are looked
  // up per message, so they are computed once here.
  void buildEdges() {
    int id = 0;
    outEdge_.resize(P_);
    inEdge_.resize(P_);
    wire_.resize(P_);
    userOutEdge_.assign(m_.outputs.size(), -1);
    for (const auto& st : m_.stages) inEdge_[st.index].assign(st.inputs.size(), -1);
    for (const auto& st : m_.stages) {
      outEdge_[st.index].resize(st.outputs.size());
      for (uint32_t o = 0; o < st.outputs.size(); ++o) {
        wire_[st.index].push_back(shapeOf(st.outputs[o].tensor));
        for (const auto& c : st.outputs[o].consumers) {
          outEdge_[st.index][o].push_back(id);
          if (c.kind == Consumer::Kind::StageInput) inEdge_[c.stage][c.input] = id;
          else userOutEdge_[c.userOutput] = id;
          ++id;
        }
      }
    }
    if (id >= 4096) invalidInput("manifest", "more than 4096 stage connections");
  }

  int tag(int edge, int64_t mb) const { return static_cast<int>((mb % 65536) * 4096 + edge); }

  void resetMemoryStats() {
    for (const auto& [s, ls] : local_)
      if (ls->device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(ls->device.index());
  }

  void runIterations(int iterations) {
    const int64_t M = o_.microbatches;
    total_ = static_cast<int64_t>(iterations) * M;
    gate_ = std::make_unique<Gate>(o_.schedule == Schedule::GPipe ? static_cast<int>(total_) : static_cast<int>(P_));
    sink_.reset(static_cast<size_t>(total_), m_.outputs.size());
    start_.assign(static_cast<size_t>(total_), Clock::time_point{});
    for (auto& [s, ls] : local_) {
      ls->mailbox = std::make_unique<Mailbox>(countSlots(*ls), std::max(1, o_.queueDepth));
      ls->busyMs = 0;
    }
    trace_.reset(rank_, !o_.tracePath.empty());
    failed_ = false;
    firstError_.clear();
    t0_ = Clock::now();

    std::vector<std::thread> threads;
    for (auto& [s, ls] : local_) {
      threads.emplace_back([this, st = ls.get()] { guarded([&] { work(*st); }); });
      for (size_t k = 0; k < ls->info->inputs.size(); ++k) {
        const auto& src = ls->info->inputs[k].source;
        if (src.kind == ValueSource::Kind::StageOutput && stageRank_[src.stage] != rank_ && ls->slot[k] >= 0)
          threads.emplace_back([this, st = ls.get(), k] { guarded([&] { receive(*st, k); }); });
      }
    }
    if (rank_ == 0) {
      feedPassthroughOutputs();
      std::set<int> remoteRanks;
      for (const auto& u : m_.outputs)
        if (u.source && u.source->kind == ValueSource::Kind::StageOutput && stageRank_[u.source->stage] != 0)
          remoteRanks.insert(stageRank_[u.source->stage]);
      for (int r : remoteRanks) threads.emplace_back([this, r] { guarded([&] { collect(r); }); });
    }
    std::thread progress;
    std::atomic<bool> finished{false};
    if (o_.progress && rank_ == 0) progress = std::thread([&] { showProgress(finished); });
    for (auto& t : threads) t.join();
    finished = true;
    if (progress.joinable()) progress.join();
    if (failed_) throw Error(ErrorKind::Internal, "", "pipeline", firstError_);
    t1_ = Clock::now();
    if (dist_) dist_->flush();
  }

  static size_t countSlots(const LocalStage& ls) {
    size_t n = 0;
    for (int s : ls.slot) n += s >= 0;
    return n;
  }

  template <class F>
  void guarded(F&& f) {
    try {
      f();
    } catch (const Aborted&) {
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }

  void fail(const std::string& what) {
    {
      std::lock_guard<std::mutex> lk(errMu_);
      if (failed_) return;
      failed_ = true;
      firstError_ = firstLine(what);
    }
    if (dist_) stopAllRanks(firstError_);
    gate_->abort();
    for (auto& [s, ls] : local_) ls->mailbox->abort();
  }

  void feedPassthroughOutputs() {
    for (int64_t g = 0; g < total_; ++g)
      for (size_t j = 0; j < m_.outputs.size(); ++j) {
        const auto& src = m_.outputs[j].source;
        if (src && src->kind == ValueSource::Kind::UserInput) complete(g, j, chunks_[static_cast<size_t>(g % o_.microbatches)][src->userInput]);
      }
  }

  void complete(int64_t g, size_t j, at::Tensor t) {
    if (sink_.put(g, j, t.to(at::kCPU)) && stageRank_[0] == rank_) gate_->release();
  }

  // Rank 0 receives final outputs computed on other ranks, in the order sent.
  void collect(int from) {
    for (int64_t g = 0; g < total_; ++g)
      for (size_t j = 0; j < m_.outputs.size(); ++j) {
        const auto& src = m_.outputs[j].source;
        if (!src || src->kind != ValueSource::Kind::StageOutput || stageRank_[src->stage] != from) continue;
        auto t0 = Clock::now();
        at::Tensor t = dist_->recv(from, tag(userOutEdge_[j], g), at::Device(at::kCPU), wire_[src->stage][src->output]);
        if (trace_.enabled()) trace_.add("recv output " + std::to_string(j) + " mb " + std::to_string(g), "transfer", 1000 + from, t0, Clock::now());
        complete(g, j, t);
      }
  }

  // Moves a value to the device of the stage that consumes it.
  Payload deliverTo(const LocalStage& dst, at::Tensor t, std::shared_ptr<at::cuda::CUDAEvent> ready) {
    if (dst.device.is_cpu()) {
      if (t.is_cuda()) {
        if (ready) ready->synchronize();
        t = t.to(at::kCPU);
      }
      return {t, nullptr};
    }
    if (t.device() == dst.device) return {t, ready};
    c10::cuda::CUDAStreamGuard guard(*dst.copyStream);
    if (ready) ready->block(*dst.copyStream);
    at::Tensor src = t.is_cuda() || t.is_pinned() ? t : t.pin_memory();
    at::Tensor out = src.to(dst.device, /*non_blocking=*/true);
    if (src.is_cuda()) c10::cuda::CUDACachingAllocator::recordStream(src.storage().data_ptr(), *dst.copyStream);
    auto ev = std::make_shared<at::cuda::CUDAEvent>();
    ev->record(*dst.copyStream);
    return {out, ev};
  }

  void work(LocalStage& st) {
    c10::InferenceMode inference;
    std::optional<c10::cuda::CUDAStreamGuard> streamGuard;
    if (st.stream) streamGuard.emplace(*st.stream);
    const Stage& info = *st.info;
    const bool gated = info.index == 0;
    for (int64_t g = 0; g < total_; ++g) {
      const auto& chunk = chunks_[static_cast<size_t>(g % o_.microbatches)];
      if (gated) {
        gate_->acquire();
        start_[static_cast<size_t>(g)] = Clock::now();
      }
      std::vector<Payload> local = st.mailbox->take(g);
      std::vector<c10::IValue> args;
      args.reserve(info.inputs.size());
      for (size_t k = 0; k < info.inputs.size(); ++k) {
        const StageInput& in = info.inputs[k];
        Payload p;
        if (in.source.kind == ValueSource::Kind::UserInput) {
          p = deliverTo(st, chunk.at(in.source.userInput), nullptr);
        } else if (st.slot[k] >= 0) {
          p = std::move(local[static_cast<size_t>(st.slot[k])]);
        } else {
          p = receiveInput(st, k, g, 1000 + static_cast<int>(info.index));
        }
        if (st.stream && p.ready) p.ready->block(*st.stream);
        if (st.stream && p.tensor.is_cuda())
          c10::cuda::CUDACachingAllocator::recordStream(p.tensor.storage().data_ptr(), *st.stream);
        args.emplace_back(std::move(p.tensor));
      }
      auto c0 = Clock::now();
      c10::IValue out = st.module.forward(args);
      std::shared_ptr<at::cuda::CUDAEvent> ready;
      if (st.stream) {
        ready = std::make_shared<at::cuda::CUDAEvent>();
        ready->record(*st.stream);
        // Busy time means device time; wait for it so the figure is real.
        st.stream->synchronize();
      }
      auto c1 = Clock::now();
      st.busyMs += msBetween(c0, c1);
      if (trace_.enabled()) trace_.add("stage " + std::to_string(info.index) + " mb " + std::to_string(g), "compute",
                 static_cast<int>(info.index), c0, c1);
      const auto& results = out.toTupleRef().elements();
      if (results.size() != info.outputs.size())
        throw Error(ErrorKind::Internal, "", "stage " + std::to_string(info.index),
                    "returned " + std::to_string(results.size()) + " values, the manifest lists " +
                        std::to_string(info.outputs.size()));
      for (uint32_t o = 0; o < info.outputs.size(); ++o) {
        at::Tensor t = results[o].toTensor();
        for (size_t ci = 0; ci < info.outputs[o].consumers.size(); ++ci) route(info.index, o, ci, g, t, ready);
      }
    }
  }

  void route(uint32_t stage, uint32_t output, size_t consumer, int64_t g, const at::Tensor& t,
             const std::shared_ptr<at::cuda::CUDAEvent>& ready) {
    const Consumer& c = m_.stages[stage].outputs[output].consumers[consumer];
    int dstRank = c.kind == Consumer::Kind::StageInput ? stageRank_[c.stage] : 0;
    if (dstRank == rank_) {
      if (c.kind == Consumer::Kind::UserOutput) {
        if (ready) ready->synchronize();
        complete(g, c.userOutput, t);
        return;
      }
      LocalStage& dst = *local_.at(c.stage);
      auto t0 = Clock::now();
      Payload p = deliverTo(dst, t, ready);
      if (dst.device != t.device())
        if (trace_.enabled()) trace_.add("copy to stage " + std::to_string(c.stage), "transfer", 1000 + static_cast<int>(stage), t0, Clock::now());
      dst.mailbox->put(g, static_cast<size_t>(dst.slot[c.input]), std::move(p));
      return;
    }
    if (ready) ready->synchronize();
    at::Tensor send = dist_->backend() == "gloo" && t.is_cuda() ? t.to(at::kCPU) : t;
    auto t0 = Clock::now();
    dist_->send(send, dstRank, tag(outEdge_[stage][output][consumer], g), wire_[stage][output]);
    if (trace_.enabled()) trace_.add("send to rank " + std::to_string(dstRank), "transfer", 1000 + static_cast<int>(stage), t0, Clock::now());
  }

  void showProgress(std::atomic<bool>& finished) {
    bool shown = false;
    while (!finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      double elapsed = msBetween(t0_, Clock::now());
      if (elapsed < 2000 || finished) continue;
      size_t done = sink_.complete();
      double rate = static_cast<double>(done) * static_cast<double>(batch_) / static_cast<double>(o_.microbatches) /
                    (elapsed / 1000.0);
      std::fprintf(stderr, "\rpipecut-run: %zu/%lld micro-batches, %.1f samples/s   ", done,
                   static_cast<long long>(total_), rate);
      shown = true;
    }
    if (shown) std::fprintf(stderr, "\n");
  }

  RunReport report() {
    RunReport r;
    r.rank = rank_;
    r.world = world_;
    r.backend = dist_ ? dist_->backend() : "none";
    r.stages = static_cast<uint32_t>(P_);
    r.microbatches = o_.microbatches;
    r.schedule = o_.schedule == Schedule::GPipe ? "gpipe" : "1f1b";
    r.samples = batch_ * static_cast<uint64_t>(o_.iterations);
    r.wallMs = msBetween(t0_, t1_);
    r.verifyMs = verifyMs_;
    r.verifiedBytes = verifiedBytes_;
    r.samplesPerSecond = r.wallMs > 0 ? static_cast<double>(r.samples) / (r.wallMs / 1000.0) : 0;
    double m = o_.microbatches, p = static_cast<double>(P_);
    r.bubbleTheoretical = (p - 1) / (m + p - 1);

    // Busy times and memory: every rank publishes its own; rank 0 reports all.
    std::map<uint32_t, double> busy;
    for (const auto& [s, ls] : local_) busy[static_cast<uint32_t>(s)] = ls->busyMs;
    std::vector<DeviceMemory> mem = localMemory();
    if (dist_) {
      for (const auto& [s, b] : busy) dist_->put("busy/" + std::to_string(s), std::to_string(b));
      nlohmann::json mj = nlohmann::json::array();
      for (const auto& d : mem) mj.push_back({d.device, d.peakBytes});
      dist_->put("mem/" + std::to_string(rank_), mj.dump());
      if (rank_ == 0) {
        for (uint32_t s = 0; s < P_; ++s) busy[s] = std::stod(dist_->get("busy/" + std::to_string(s)));
        mem.clear();
        for (int rk = 0; rk < world_; ++rk)
          for (const auto& e : nlohmann::json::parse(dist_->get("mem/" + std::to_string(rk))))
            mem.push_back(DeviceMemory{rk, e[0].get<std::string>(), e[1].get<uint64_t>()});
      }
    }
    double sumBusy = 0;
    for (uint32_t s = 0; s < P_; ++s) {
      StageStats ss;
      ss.stage = s;
      ss.rank = stageRank_[s];
      ss.device = devices_[s].str();
      ss.busyMs = busy.count(s) ? busy[s] : 0;
      ss.busyFraction = r.wallMs > 0 ? ss.busyMs / r.wallMs : 0;
      sumBusy += ss.busyMs;
      r.stageStats.push_back(ss);
    }
    r.memory = mem;
    r.bubbleMeasured = r.wallMs > 0 ? std::max(0.0, 1.0 - sumBusy / (p * r.wallMs)) : 0;

    if (rank_ == 0) {
      if (stageRank_[0] == 0) {
        std::vector<double> lat;
        for (size_t g = 0; g < start_.size(); ++g) lat.push_back(msBetween(start_[g], sink_.done_[g]));
        std::sort(lat.begin(), lat.end());
        auto pct = [&](double q) { return lat[std::min(lat.size() - 1, static_cast<size_t>(q * (lat.size() - 1) + 0.5))]; };
        if (!lat.empty()) {
          r.latencyP50Ms = pct(0.50);
          r.latencyP99Ms = pct(0.99);
        }
      }
      // The last iteration's micro-batches make the merged outputs.
      std::vector<std::vector<at::Tensor>> last(sink_.values_.end() - o_.microbatches, sink_.values_.end());
      outputs_ = mergeMicrobatches(last);
      if (!o_.outputPath.empty()) {
        std::vector<std::pair<std::string, at::Tensor>> named;
        for (size_t j = 0; j < outputs_.size(); ++j) named.emplace_back("output." + std::to_string(j), outputs_[j]);
        writeSafetensors(o_.outputPath, named, {{"format", "pipecut-run-1"}});
      }
      if (!o_.checkPath.empty()) check(r);
    }
    if (!o_.tracePath.empty()) {
      std::string path = o_.tracePath;
      if (world_ > 1) {
        size_t dot = path.rfind('.');
        std::string suffix = ".rank" + std::to_string(rank_);
        path = dot == std::string::npos ? path + suffix : path.substr(0, dot) + suffix + path.substr(dot);
      }
      trace_.write(path, stageNames());
    }
    return r;
  }

  std::map<int, std::string> stageNames() const {
    std::map<int, std::string> names;
    for (uint32_t s = 0; s < P_; ++s) {
      names[static_cast<int>(s)] = "stage " + std::to_string(s) + " (" + devices_[s].str() + ")";
      names[1000 + static_cast<int>(s)] = "stage " + std::to_string(s) + " transfers";
      names[2000 + static_cast<int>(s)] = "stage " + std::to_string(s) + " receives";
    }
    return names;
  }

  std::vector<DeviceMemory> localMemory() const {
    std::vector<DeviceMemory> out;
    std::set<std::string> seen;
    for (const auto& [s, ls] : local_) {
      std::string d = ls->device.str();
      if (!seen.insert(d).second) continue;
      DeviceMemory dm;
      dm.rank = rank_;
      dm.device = d;
      if (ls->device.is_cuda()) {
        auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(ls->device.index());
        dm.peakBytes = static_cast<uint64_t>(stats.allocated_bytes[0].peak);
      } else {
        struct rusage ru {};
        getrusage(RUSAGE_SELF, &ru);
        dm.peakBytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // process peak RSS
      }
      out.push_back(dm);
    }
    return out;
  }

  void check(RunReport& r) {
    ReferenceSet ref = readReference(o_.checkPath);
    Tolerance tol;
    tol.atol = o_.atol;
    tol.rtol = o_.rtol;
    tol.exact = o_.exact;
    if (auto it = ref.metadata.find("compute_dtype"); it != ref.metadata.end()) tol.computeDtype = it->second;
    Comparison c = compareOutputs(outputs_, ref.outputs, tol);
    r.checked = true;
    r.checkOk = c.ok;
    r.maxAbsError = c.maxAbsError;
    r.checkMessage = c.message;
  }

  RunOptions o_;
  Manifest m_;
  size_t P_;
  int rank_ = 0, world_ = 1, localRank_ = 0;
  std::vector<int> stageRank_;
  std::vector<c10::Device> devices_;
  bool allCuda_ = false;
  std::unique_ptr<DistContext> dist_;
  std::map<size_t, std::unique_ptr<LocalStage>> local_;
  std::vector<std::vector<at::Tensor>> chunks_;
  uint64_t batch_ = 0;
  std::vector<std::vector<std::vector<int>>> outEdge_;  // [stage][output][consumer] -> edge id
  std::vector<std::vector<int>> inEdge_;                // [stage][input] -> edge id (-1: a user input)
  std::vector<int> userOutEdge_;                        // [user output] -> edge id (-1: a user input)
  std::vector<std::vector<DistContext::Shape>> wire_;   // [stage][output]
  int64_t total_ = 0;
  std::unique_ptr<Gate> gate_;
  Sink sink_;
  std::vector<Clock::time_point> start_;
  Clock::time_point t0_, t1_;
  double verifyMs_ = -1;        // the pre-load check of stage files (-1: skipped)
  uint64_t verifiedBytes_ = 0;
  std::vector<at::Tensor> outputs_;
  Trace trace_;
  std::mutex errMu_;
  bool failed_ = false;
  std::string firstError_;
};

}  // namespace

RunReport runPipeline(const RunOptions& o) {
  Manifest m = readManifest(o.dir);
  if (m.stages.empty()) throw Error(ErrorKind::InvalidInput, o.dir, "manifest", "lists no stages");
  return Engine(o, std::move(m)).run();
}

}  // namespace pipecut::runtime
