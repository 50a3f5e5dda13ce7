#include "runtime/inference.h"
#include "runtime/stage_weights.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
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
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include "manifest/directory.h"
#include "manifest/manifest.h"
#include "manifest/shapes.h"
#include "manifest/verify.h"
#include "runtime/clock.h"
#include "runtime/comm.h"
#include "runtime/control_messages.h"
#include "runtime/comm_schedule.h"
#include "runtime/compare.h"
#include "runtime/distributed.h"
#include "runtime/exchange.h"
#include "runtime/host_allocator.h"
#include "runtime/inputs.h"
#include "runtime/local_stage.h"
#include "runtime/output_drain.h"
#include "runtime/outputs.h"
#include "runtime/placement.h"
#include "runtime/rank_session.h"
#include "runtime/tensor_io.h"
#include "runtime/stage_stats.h"
#include "runtime/trace.h"
#include "support/error.h"

namespace pipecut::runtime {

namespace {

class Engine {
 public:
  Engine(const InferenceOptions& o, SplitDirectory split)
      : o_(o), m_(std::move(split.manifest)), manifestSha256_(std::move(split.manifestSha256)), P_(m_.stages.size()) {}

  RunReport run() {
    setupPlacement();
    checkOutputs();
    if (world_ > 1) {
      session_ = std::make_unique<RankSession>(DistEnv::fromEnvironment(), backend_, o_.session,
                                               inferenceIdentity(o_, manifestSha256_, stageRank_, backend_));
      dist_ = &session_->dist();
    }
    return runAsRank(session_.get(), [&] {
      loadStages();
      setIntraOpThreads(o_.session.threads, local_.size());
      loadInputs();
      buildEdges();
      if (o_.warmup > 0) runIterations(o_.warmup);
      resetMemoryStats();
      runIterations(o_.iterations);
      return report();
    });
  }

 private:
  void setupPlacement() {
    DistEnv env = DistEnv::fromEnvironment();
    rank_ = env.rank;
    world_ = env.world;
    localRank_ = env.localRank;
    Placement pl = placeStages(m_, o_.session, rank_, world_, localRank_, env.localWorld);
    stageRank_ = std::move(pl.stageRank);
    devices_ = std::move(pl.devices);
    backend_ = pl.backend;
  }

  // Refusals of an output come before the run, not after it.
  void checkOutputs() {
    const std::vector<std::string> inputs = readPaths(o_);
    if (rank_ == 0 && !o_.outputPath.empty())
      support::checkDestination(runOutputDestination(o_.outputPath, o_.session, inputs));
    if (!o_.session.tracePath.empty())
      support::checkDestination(traceDestination(rankTracePath(o_.session.tracePath, rank_, world_), o_.session, inputs));
  }

  void loadStages() {
    if (o_.session.verifyHashes) {
      // This rank's stage files, hashed on every core before anything loads.
      StageFileCheck check;
      check.select = [&](const Stage& st, const StageFile& f) {
        return stageRank_[st.index] == rank_ && readsStageFile(st, f, o_.session.stageFormat, devices_[st.index]);
      };
      // A pinned manifest pins its stage files by their SHA-256 (XXH3-128
      // guards against accidents, not a forger).
      check.sha256 = !o_.session.expectManifestSha256.empty();
      auto start = Clock::now();
      verifyStageFiles(o_.session.dir, m_, check);
      verifyMs_ = msBetween(start, Clock::now());
      verifiedBytes_ = stageFileBytes(m_, check);
    }
    // TorchScript fuses elementwise chains into generated kernels on GPUs (not
    // on CPUs, by default): off, so that CUDA stages run ATen's kernels, the
    // path the CPU tests check. Process-wide, so only when a stage is on CUDA.
    for (size_t s = 0; s < P_; ++s)
      if (stageRank_[s] == rank_ && devices_[s].is_cuda()) torch::jit::setTensorExprFuserEnabled(false);
    std::vector<const Stage*> mine;
    std::vector<c10::Device> where;
    for (size_t s = 0; s < P_; ++s)
      if (stageRank_[s] == rank_) mine.push_back(&m_.stages[s]), where.push_back(devices_[s]);
    const StageWeights weights(m_, o_.session.dir, o_.session.weights, /*copies=*/false);
    std::vector<StageProgram> programs = StageProgram::loadAll(o_.session.dir, mine, o_.session.stageFormat, where,
                                                               o_.session.cpuMatmul, &weights);
    for (size_t i = 0; i < mine.size(); ++i) {
      const Stage& st = *mine[i];
      auto ls = std::make_unique<LocalStage>();
      ls->info = &st;
      ls->device = where[i];
      ls->program = std::move(programs[i]);
      // Values from other stages arrive through the mailbox: local ones put
      // there by their producer, remote ones by the communication thread.
      size_t slots = 0;
      for (const auto& in : st.inputs)
        ls->slot.push_back(in.source.kind == ValueSource::Kind::StageOutput ? static_cast<int>(slots++) : -1);
      if (ls->device.is_cuda()) {
        ls->stream = c10::cuda::getStreamFromPool(false, ls->device.index());
        ls->copyStream = c10::cuda::getStreamFromPool(false, ls->device.index());
      }
      local_[st.index] = std::move(ls);
    }
  }

  void loadInputs() {
    std::vector<at::Tensor> inputs;
    if (o_.inputs.randomInputs) {
      inputs = randomInputs(m_, o_.inputs.seed, o_.inputs.batch > 0 ? o_.inputs.batch : 2, o_.session.microbatches, o_.inputs.intHigh);
    } else if (!o_.inputs.inputsPath.empty()) {
      inputs = runtime::loadInputs(o_.inputs.inputsPath, m_);
    } else {
      invalidInput("inputs", "give --inputs FILE or --random-inputs");
    }
    batch_ = inputs.empty() || inputs[0].dim() == 0 ? 1 : static_cast<uint64_t>(inputs[0].size(0));
    chunks_ = splitMicrobatches(inputs, m_, o_.session.microbatches);
    // Host tensors headed for a GPU go through pinned memory so that copies
    // can overlap compute.
    bool anyCuda = false;
    for (const auto& [s, ls] : local_) anyCuda |= ls->device.is_cuda();
    if (anyCuda)
      for (auto& mb : chunks_)
        for (auto& t : mb) t = t.pin_memory();
  }

  // Every stage-output -> consumer connection gets an id in the manifest's
  // order (runtime/comm_schedule.h); ids make message tags and the order of
  // messages between ranks. Per edge: the shape it travels with, and where a
  // receive lands under NCCL (the consumer's device; final outputs on rank 0's
  // output device, then copied to the host).
  void buildEdges() {
    edges_ = commEdges(m_, stageRank_);
    if (edges_.size() >= CommThread::kMaxChannels) invalidInput("manifest", "more than 4096 stage connections");
    outEdge_.assign(P_, {});
    for (const auto& st : m_.stages) outEdge_[st.index].resize(st.outputs.size());
    channels_.clear();
    for (const auto& e : edges_) {
      outEdge_[e.producer][e.output].push_back(e.id);
      Channel c;
      c.wire = DistContext::shapeOf(m_.stages[e.producer].outputs[e.output].tensor);
      const bool output = e.consumer.kind == Consumer::Kind::UserOutput;
      c.recvDevice = output ? outputDevice() : devices_[e.consumer.stage];
      c.sendRow = 1000 + static_cast<int>(e.producer);
      c.recvRow = output ? 3000 : 2000 + static_cast<int>(e.consumer.stage);
      c.recvName = output ? "recv output " + std::to_string(e.consumer.userOutput) : "recv input " + std::to_string(e.consumer.input);
      channels_.push_back(std::move(c));
    }
  }

  // NCCL receives only into CUDA tensors: final outputs land on rank 0's
  // first CUDA stage device, or its LOCAL_RANK GPU when it runs no stage.
  c10::Device outputDevice() const {
    if (backend_ != "nccl") return c10::Device(c10::kCPU);
    for (size_t s = 0; s < P_; ++s)
      if (stageRank_[s] == 0 && devices_[s].is_cuda()) return devices_[s];
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(localRank_));
  }

  // How far ahead a local producer may put into a mailbox. In one process,
  // the queue depth. Across processes at least the number of stages P: a
  // producer p blocked putting micro-batch g for a local consumer c waits
  // for c to take g - window, which waits for messages with keys up to
  // g - window + c - 1; with window >= P those precede every message p would
  // send for g (key g + p), so the rank's communication thread never waits on
  // a send that the blocked producer holds back (test_comm_schedule.cpp
  // simulates this and shows a window of 1 deadlocking).
  int64_t mailboxWindow() const {
    int64_t w = std::max(1, o_.queueDepth);
    return dist_ ? std::max<int64_t>(w, static_cast<int64_t>(P_)) : w;
  }

  void resetMemoryStats() {
    for (const auto& [s, ls] : local_)
      if (ls->device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(ls->device.index());
  }

  void runIterations(int iterations) {
    const int64_t M = o_.session.microbatches;
    total_ = static_cast<int64_t>(iterations) * M;
    // 1F1B's gate is released as rank 0 collects outputs; a stage 0 placed on
    // another rank is not gated (nothing there would release it): it runs
    // ahead as under GPipe, its outputs waiting for their turn to be sent.
    bool gated = o_.schedule == Schedule::OneFOneB && stageRank_[0] == 0;
    gate_ = std::make_unique<Gate>(gated ? static_cast<int>(P_) : static_cast<int>(total_));
    sink_.reset(static_cast<size_t>(total_), m_.outputs.size(), static_cast<size_t>(total_ - M));
    trace_.reset(rank_, !o_.session.tracePath.empty());
    start_.assign(static_cast<size_t>(total_), Clock::time_point{});
    for (auto& [s, ls] : local_) {
      ls->mailbox = std::make_unique<Mailbox>(countSlots(*ls), mailboxWindow());
      ls->timer.start(ls->stream, trace_.enabled() || ls->device.is_cuda());
    }
    failed_ = false;
    firstError_ = nullptr;
    firstText_.clear();
    t0_ = Clock::now();

    // One worker per local stage, and in a multi-process run the one thread
    // that issues every c10d operation of this rank (runtime/comm.h).
    if (dist_)
      comm_ = std::make_unique<CommThread>(*dist_, channels_, trace_, [this](int64_t g, int channel, Payload p) {
        arrived(g, edges_[static_cast<size_t>(channel)], std::move(p));
      });
    if (rank_ == 0) feedPassthroughOutputs();
    // Final outputs land on the host off the producers' threads (runtime/output_drain.h).
    drain_ = std::make_unique<OutputDrain>([this](int64_t g, size_t j, at::Tensor host) { complete(g, j, std::move(host)); });
    std::thread drainThread([this] { guarded([&] { drain_->run(); }); });
    std::vector<std::thread> threads;
    for (auto& [s, ls] : local_) threads.emplace_back([this, st = ls.get()] { guarded([&] { work(*st); }); });
    if (comm_)
      threads.emplace_back([this] {
        guarded([&] {
          CommSchedule order(edges_, rank_, total_);
          comm_->run(order);
        });
      });
    std::thread progress;
    std::atomic<bool> finished{false};
    if (o_.session.progress && rank_ == 0) progress = std::thread([&] { showProgress(finished); });
    for (auto& t : threads) t.join();
    drain_->close();
    drainThread.join();
    finished = true;
    if (progress.joinable()) progress.join();
    if (failed_) rethrowFirstError();
    for (auto& [s, ls] : local_) {
      ls->timer.finish();  // the GPU's last kernels: the run ends when they do
      if (trace_.enabled())
        for (const auto& sp : ls->timer.spans())
          trace_.add("stage " + std::to_string(s) + " mb " + std::to_string(sp.microbatch), "compute",
                     static_cast<int>(s), sp.begin, sp.end);
    }
    t1_ = Clock::now();
    comm_.reset();
  }

  static size_t countSlots(const LocalStage& ls) {
    size_t n = 0;
    for (int s : ls.slot) n += s >= 0;
    return n;
  }

  // Runs a worker's or the communication thread's body; its failure (the
  // first of the rank's) stops every other thread of the rank.
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
      firstError_ = std::current_exception();
      firstText_ = firstLine(what);
    }
    // Every thread of this rank ends: those in c10d calls by the interrupt,
    // those waiting on each other by the aborts. The run then ends in run()'s
    // failRank, which tells the other ranks.
    if (dist_) dist_->interrupt(firstText_);
    gate_->abort();
    if (drain_) drain_->abort();
    for (auto& [s, ls] : local_) ls->mailbox->abort();
    if (comm_) comm_->abort();
  }

  // The rank's first failure as it was thrown: bad input keeps its kind
  // (exit 2), a lost peer stays a PeerError (the others are told which peer);
  // anything else that stopped a stage is the pipeline's failure.
  [[noreturn]] void rethrowFirstError() {
    try {
      std::rethrow_exception(firstError_);
    } catch (const Error&) {
      throw;
    } catch (const std::exception&) {
      throw Error(ErrorKind::Internal, "", "pipeline", firstText_);
    }
  }

  void feedPassthroughOutputs() {
    for (int64_t g = 0; g < total_; ++g)
      for (size_t j = 0; j < m_.outputs.size(); ++j) {
        const auto& src = m_.outputs[j].source;
        if (src && src->kind == ValueSource::Kind::UserInput) complete(g, j, chunks_[static_cast<size_t>(g % o_.session.microbatches)][src->userInput]);
      }
  }

  void complete(int64_t g, size_t j, at::Tensor t) {
    if (sink_.put(g, j, t.to(at::kCPU)) && stageRank_[0] == rank_) gate_->release();
  }

  // From the communication thread: a value received from another rank. Never
  // blocks (runtime/comm.h): into a mailbox without a capacity bound, or into
  // rank 0's output sink after a copy to the host.
  void arrived(int64_t g, const CommEdge& e, Payload p) {
    if (e.consumer.kind == Consumer::Kind::UserOutput) {
      drain_->put(g, e.consumer.userOutput, p.tensor, p.ready);
      return;
    }
    LocalStage& dst = *local_.at(e.consumer.stage);
    dst.mailbox->deliver(g, static_cast<size_t>(dst.slot[e.consumer.input]), deliverTo(dst, p.tensor, p.ready));
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
    ShapeBinder shapes(m_.symbols);
    for (int64_t g = 0; g < total_; ++g) {
      const auto& chunk = chunks_[static_cast<size_t>(g % o_.session.microbatches)];
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
        if (in.source.kind == ValueSource::Kind::UserInput) p = deliverTo(st, chunk.at(in.source.userInput), nullptr);
        else p = std::move(local[static_cast<size_t>(st.slot[k])]);
        if (st.stream && p.ready) p.ready->block(*st.stream);
        if (st.stream && p.tensor.is_cuda())
          c10::cuda::CUDACachingAllocator::recordStream(p.tensor.storage().data_ptr(), *st.stream);
        checkShape(shapes, info, k, p.tensor);
        args.emplace_back(std::move(p.tensor));
      }
      shapes.reset();
      // No host sync on CUDA: the loop goes on to queue the next micro-batch's
      // copies (on the copy stream) while this one computes.
      st.timer.before(g);
      std::vector<c10::IValue> results = st.program.forward(std::move(args));
      std::shared_ptr<at::cuda::CUDAEvent> ready;
      if (st.stream) {
        ready = std::make_shared<at::cuda::CUDAEvent>();
        ready->record(*st.stream);
      }
      st.timer.after(g);
      if (results.size() != info.outputs.size())
        throw Error(ErrorKind::Internal, "", "stage " + std::to_string(info.index),
                    "returned " + std::to_string(results.size()) + " values, the manifest lists " +
                        std::to_string(info.outputs.size()));
      for (uint32_t o = 0; o < info.outputs.size(); ++o) {
        at::Tensor t = results[o].toTensor();
        for (int e : outEdge_[info.index][o]) route(edges_[static_cast<size_t>(e)], g, t, ready);
      }
    }
  }

  // What arrives must be what the manifest says flows there: the same static
  // sizes, and symbolic sizes consistent across the stage's inputs. A stage
  // given other sizes would fail deep inside an operator, or not at all.
  static void checkShape(ShapeBinder& shapes, const Stage& info, size_t k, const at::Tensor& t) {
    const StageInput& in = info.inputs[k];
    std::string wrong = shapes.bind(in.name, in.tensor, {t.sizes().data(), t.sizes().size()});
    if (!wrong.empty())
      throw Error(ErrorKind::InvalidInput, "", "stage " + std::to_string(info.index) + " input '" + in.name + "'",
                  "shape " + c10::str(t.sizes()) + ": " + wrong);
  }

  void route(const CommEdge& e, int64_t g, const at::Tensor& t, const std::shared_ptr<at::cuda::CUDAEvent>& ready) {
    if (e.crossesRanks()) {
      comm_->hand(g, e.id, Payload{t, ready});  // sent in its turn by the communication thread
      return;
    }
    const Consumer& c = e.consumer;
    if (c.kind == Consumer::Kind::UserOutput) {
      drain_->put(g, c.userOutput, t, ready);
      return;
    }
    LocalStage& dst = *local_.at(c.stage);
    auto t0 = Clock::now();
    Payload p = deliverTo(dst, t, ready);
    if (dst.device != t.device() && trace_.enabled())
      trace_.add("copy to stage " + std::to_string(c.stage), "transfer", 1000 + static_cast<int>(e.producer), t0, Clock::now());
    dst.mailbox->put(g, static_cast<size_t>(dst.slot[c.input]), std::move(p));
  }

  void showProgress(std::atomic<bool>& finished) {
    bool shown = false;
    while (!finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      double elapsed = msBetween(t0_, Clock::now());
      if (elapsed < 2000 || finished) continue;
      size_t done = sink_.complete();
      double rate = static_cast<double>(done) * static_cast<double>(batch_) / static_cast<double>(o_.session.microbatches) /
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
    r.microbatches = o_.session.microbatches;
    r.schedule = o_.schedule == Schedule::GPipe ? "gpipe" : "1f1b";
    r.samples = batch_ * static_cast<uint64_t>(o_.iterations);
    r.wallMs = msBetween(t0_, t1_);
    r.verifyMs = verifyMs_;
    r.verifiedBytes = verifiedBytes_;
    r.samplesPerSecond = r.wallMs > 0 ? static_cast<double>(r.samples) / (r.wallMs / 1000.0) : 0;
    double m = o_.session.microbatches, p = static_cast<double>(P_);
    r.bubbleTheoretical = (p - 1) / (m + p - 1);

    // Busy times, bubbles and memory: every rank publishes its own; rank 0 reports all.
    std::map<uint32_t, double> busy;
    for (const auto& [s, ls] : local_) busy[static_cast<uint32_t>(s)] = ls->timer.busyMs();
    std::vector<const LocalStage*> stages;
    for (const auto& [s, ls] : local_) stages.push_back(ls.get());
    std::vector<DeviceMemory> mem = deviceMemory(stages, rank_);
    r.deviceBubbles = deviceBubbles(stages, rank_, r.wallMs);
    if (dist_) {
      // Numbers only: a device goes as its CUDA index (-1: the CPU), so that
      // nothing a peer sends is shown as text (runtime/control_messages.h).
      std::vector<double> bubbles, peaks;
      for (const auto& b : r.deviceBubbles)
        bubbles.insert(bubbles.end(), {deviceCode(b.device), b.busyMs, b.bubble});
      for (const auto& d : mem) peaks.insert(peaks.end(), {deviceCode(d.device), static_cast<double>(d.peakBytes)});
      dist_->put("bubble/" + std::to_string(rank_), control::encodeNumbers(bubbles));
      dist_->put("mem/" + std::to_string(rank_), control::encodeNumbers(peaks));
      if (rank_ == 0) {
        mem.clear();
        r.deviceBubbles.clear();
        for (int rk = 0; rk < world_; ++rk) {
          auto b = decodeDeviceRows(dist_->get("bubble/" + std::to_string(rk)), 3, "device bubbles of rank " + std::to_string(rk));
          for (size_t i = 0; i < b.size(); i += 3) r.deviceBubbles.push_back(DeviceBubble{rk, deviceName(b[i]), b[i + 1], b[i + 2]});
          auto p = decodeDeviceRows(dist_->get("mem/" + std::to_string(rk)), 2, "peak memory of rank " + std::to_string(rk));
          for (size_t i = 0; i < p.size(); i += 2) mem.push_back(DeviceMemory{rk, deviceName(p[i]), static_cast<uint64_t>(p[i + 1])});
        }
      }
    }
    r.stageStats = gatherStageStats(dist_, rank_, "busy", busy, stageRank_, devices_, r.wallMs);
    for (auto& s : r.stageStats)
      s.format = stageFormatName(resolveStageFormat(m_.stages.at(s.stage), o_.session.stageFormat, devices_.at(s.stage)));
    r.memory = mem;
    r.bubbleMeasured = measuredBubble(r.stageStats, P_, r.wallMs);

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
      std::vector<std::vector<at::Tensor>> last(sink_.values_.end() - o_.session.microbatches, sink_.values_.end());
      outputs_ = mergeMicrobatches(last);
      if (!o_.outputPath.empty()) {
        std::vector<std::pair<std::string, at::Tensor>> named;
        for (size_t j = 0; j < outputs_.size(); ++j) named.emplace_back("output." + std::to_string(j), outputs_[j]);
        support::writeStaged(runOutputDestination(o_.outputPath, o_.session, readPaths(o_)), [&](const std::filesystem::path& tmp) {
          writeSafetensors(tmp.string(), named, {{"format", kRunOutputFormat}});
        });
      }
      if (!o_.checkPath.empty()) check(r);
    }
    if (!o_.session.tracePath.empty()) {
      trace_.write(traceDestination(rankTracePath(o_.session.tracePath, rank_, world_), o_.session, readPaths(o_)),
                   stageNames());
    }
    return r;
  }

  static double deviceCode(const std::string& device) {
    c10::Device d(device);
    return d.is_cuda() ? d.index() : -1;
  }
  static std::string deviceName(double code) { return code < 0 ? "cpu" : "cuda:" + std::to_string(static_cast<int>(code)); }
  // Rows of `width` numbers whose first is a device code: -1 or a CUDA index.
  static std::vector<double> decodeDeviceRows(const std::string& bytes, size_t width, const std::string& what) {
    std::vector<double> v = control::decodeNumbers(bytes, 64 * width, false, what);
    bool ok = v.size() % width == 0;
    for (size_t i = 0; ok && i < v.size(); i += width) {
      ok = (v[i] == -1 || (v[i] >= 0 && v[i] < 1024 && v[i] == static_cast<int>(v[i])));
      for (size_t k = 1; k < width; ++k) ok &= std::isfinite(v[i + k]) && v[i + k] >= 0;
    }
    if (!ok) throw Error(ErrorKind::RankFailed, "", "rendezvous store", "the " + what + " message holds values that cannot be");
    return v;
  }

  std::map<int, std::string> stageNames() const {
    std::map<int, std::string> names;
    for (uint32_t s = 0; s < P_; ++s) {
      names[static_cast<int>(s)] = "stage " + std::to_string(s) + " (" + devices_[s].str() + ")";
      names[1000 + static_cast<int>(s)] = "stage " + std::to_string(s) + " transfers";
      names[2000 + static_cast<int>(s)] = "stage " + std::to_string(s) + " receives";
    }
    names[3000] = "final outputs received";
    return names;
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

  InferenceOptions o_;
  Manifest m_;
  std::string manifestSha256_;
  size_t P_;
  int rank_ = 0, world_ = 1, localRank_ = 0;
  std::vector<int> stageRank_;
  std::vector<c10::Device> devices_;
  std::string backend_;  // resolved; empty in one process
  std::unique_ptr<RankSession> session_;  // across processes: the rendezvous, watcher, failure and finish
  DistContext* dist_ = nullptr;           // session_'s
  std::unique_ptr<CommThread> comm_;
  std::map<size_t, std::unique_ptr<LocalStage>> local_;
  std::vector<std::vector<at::Tensor>> chunks_;
  uint64_t batch_ = 0;
  std::vector<CommEdge> edges_;                         // every stage output -> consumer connection
  std::vector<std::vector<std::vector<int>>> outEdge_;  // [stage][output][consumer] -> edge id
  std::vector<Channel> channels_;                       // per edge: its shape, where an NCCL receive lands, trace rows
  int64_t total_ = 0;
  std::unique_ptr<Gate> gate_;
  std::unique_ptr<OutputDrain> drain_;  // one per runIterations
  Sink sink_;
  std::vector<Clock::time_point> start_;
  Clock::time_point t0_, t1_;
  double verifyMs_ = -1;        // the pre-load check of stage files (-1: skipped)
  uint64_t verifiedBytes_ = 0;
  std::vector<at::Tensor> outputs_;
  Trace trace_;
  std::mutex errMu_;
  bool failed_ = false;
  std::exception_ptr firstError_;  // the rank's first failure (rethrowFirstError)
  std::string firstText_;          // its first line
};

}  // namespace

RunReport runInference(const InferenceOptions& o) {
  keepFreedHostMemory();
  if (o.iterations < 1) throw Error(ErrorKind::Usage, "", "--iterations", "must be at least 1");
  if (o.warmup < 0) throw Error(ErrorKind::Usage, "", "--warmup", "must not be negative");
  if (o.session.microbatches < 1) throw Error(ErrorKind::Usage, "", "--microbatches", "must be at least 1");
  SplitDirectory split = openSplitDirectory(o.session.dir, o.session.expectManifestSha256);
  if (split.manifest.stages.empty()) throw Error(ErrorKind::InvalidInput, o.session.dir, "manifest", "lists no stages");
  return Engine(o, std::move(split)).run();
}

}  // namespace pipecut::runtime
