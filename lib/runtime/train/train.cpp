// The training engine: each worker (a thread in one process, a process over
// c10d) runs its rank's action list from the plan (runtime/train/schedule.h),
// moving activations forward and gradients back through a transport
// (runtime/train/transport.h). A step ends with the tied-gradient sum and one
// optimizer step per stage.
//
// A stage's arithmetic is its StageCompute's (runtime/train/stage_compute.h):
// autograd over its TorchScript module, or pipecut compile --train's
// programs (--stage-format aoti). The backward stops at the stage boundary;
// the inputs' gradients are what the producers receive. The loss stage
// seeds its backward with 1/M, so parameter gradients accumulate to the
// gradient of the mean micro-batch loss, as eager training with
// (loss / M).backward() does.
#include "runtime/train/train.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include "emit/dtypes.h"
#include "manifest/checkpoint.h"
#include "manifest/directory.h"
#include "manifest/manifest.h"
#include "manifest/verify.h"
#include "runtime/clock.h"
#include "runtime/control_messages.h"
#include "runtime/distributed.h"
#include "runtime/exchange.h"
#include "runtime/host_allocator.h"
#include "runtime/inputs.h"
#include "runtime/outputs.h"
#include "runtime/placement.h"
#include "runtime/rank_session.h"
#include "runtime/tensor_io.h"
#include "runtime/stage_program.h"
#include "runtime/stage_weights.h"
#include "runtime/stage_stats.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/tied_gradients.h"
#include "runtime/trace.h"
#include "runtime/train/schedule.h"
#include "runtime/train/state.h"
#include "runtime/train/transport.h"
#include "runtime/train/compiled_stage.h"
#include "runtime/train/microbatch_seed.h"
#include "runtime/train/stage_compute.h"
#include "support/digest.h"
#include "support/error.h"
#include "support/files.h"
#include "support/sha256.h"
#include "support/staging.h"

namespace pipecut::runtime {

namespace {

// One stage as a worker trains it.
struct StageState {
  const Stage* info = nullptr;
  StageProgram program;  // its TorchScript module (autograd); empty for compiled programs
  c10::Device device{c10::kCPU};
  TrainableStage train;
  std::unique_ptr<StageCompute> compute;  // over `program` or the stage's training packages, updating `train`
  double busyMs = 0;
};

class Trainer {

 public:
  Trainer(const TrainOptions& o, SplitDirectory split)
      : o_(o), m_(std::move(split.manifest)), manifestSha256_(std::move(split.manifestSha256)),
        P_(static_cast<uint32_t>(m_.stages.size())) {}

  TrainReport run() {
    checkProgram();
    plan();
    checkOutputs();
    if (world_ > 1) {
      // The c10d calls are all this thread's: the watcher's interrupt ends
      // the one it waits in, and the failure unwinds to the catch below.
      session_ = std::make_unique<RankSession>(
          DistEnv::fromEnvironment(), backend_, o_.session,
          trainingIdentity(o_, manifestSha256_, plan_.stageRank, backend_, scheduleIdentity_));
      dist_ = &session_->dist();
    }
    // One worker per process, this thread: nothing else waits on a peer.
    return runAsRank(session_.get(), [&] {
      loadStages();
      if (!o_.loadCheckpoint.empty()) loadCheckpoint();
      loadData();
      indexEdges();
      if (dist_) setupComm();
      trace_.reset(rank_, !o_.session.tracePath.empty());
      t0_ = Clock::now();
      for (int k = 0; k < steps_; ++k) {
        auto begin = Clock::now();
        step(k);
        stepMs_.push_back(msBetween(begin, Clock::now()));
      }
      t1_ = Clock::now();
      if (!o_.saveCheckpoint.empty()) saveCheckpoint();
      if (!o_.dumpSchedule.empty() && rank_ == 0)
        support::writeFileStaged(scheduleDestination(o_.dumpSchedule, o_.session, readPaths(o_)),
                                 [&](const support::ByteSink& sink) {
                                   const std::string csv = planCsv(plan_);
                                   sink(csv.data(), csv.size());
                                 });
      return report();
    });
  }

 private:
  // Refusals of an output come before training, not after it.
  void checkOutputs() {
    const std::vector<std::string> inputs = readPaths(o_);
    if (!o_.saveCheckpoint.empty() && rank_ == 0)
      support::checkDestination(checkpointDestination(o_.saveCheckpoint, o_.session, inputs));
    if (!o_.dumpSchedule.empty() && rank_ == 0)
      support::checkDestination(scheduleDestination(o_.dumpSchedule, o_.session, inputs));
    if (!o_.session.tracePath.empty())
      support::checkDestination(traceDestination(rankTracePath(o_.session.tracePath, rank_, world_), o_.session, inputs));
  }

  // --train takes a program that ends in its loss: one scalar floating output.
  void checkProgram() {
    auto bad = [&](const std::string& what) {
      throw Error(ErrorKind::InvalidInput, o_.session.dir, "manifest outputs",
                  "--train needs a program whose single output is a scalar loss (export model + loss, e.g. a wrapper "
                  "whose forward returns F.cross_entropy(...)); " + what);
    };
    if (m_.outputs.size() != 1) bad("this one returns " + std::to_string(m_.outputs.size()) + " outputs");
    const UserValue& out = m_.outputs[0];
    if (!out.tensor.shape.empty()) bad("its output '" + out.name + "' has " + std::to_string(out.tensor.shape.size()) + " dimensions");
    auto dtype = emit::scalarTypeFromTorchName(out.tensor.dtype);
    if (!dtype || !at::isFloatingType(*dtype)) bad("its output '" + out.name + "' is " + out.tensor.dtype);
    if (!out.source) bad("its output '" + out.name + "' is an input passed through");
    lossStage_ = out.source->stage;
    if (o_.session.microbatches < 1) invalidInput("--microbatches", "must be at least 1");
    M_ = static_cast<uint32_t>(o_.session.microbatches);
  }

  // Workers: in one process one per stage (two stages each, round robin,
  // under interleaved-1f1b); across processes one per rank.
  void plan() {
    DistEnv env = DistEnv::fromEnvironment();
    rank_ = env.rank;
    world_ = env.world;
    uint32_t workers = world_ > 1                                         ? static_cast<uint32_t>(world_)
                       : o_.schedule == TrainScheduleKind::Interleaved1F1B ? std::max<uint32_t>(1, P_ / 2)
                                                                           : P_;
    std::vector<std::vector<uint32_t>> producers(P_);
    for (const auto& st : m_.stages)
      for (const auto& in : st.inputs)
        if (in.source.kind == ValueSource::Kind::StageOutput) {
          auto& p = producers[st.index];
          if (std::find(p.begin(), p.end(), in.source.stage) == p.end()) p.push_back(in.source.stage);
        }
    if (!o_.scheduleFile.empty()) {
      // Ranks agree on the file's bytes, not its path (each may read its own copy).
      const std::string text = support::readFile(o_.scheduleFile, "the schedule");
      plan_ = planFromCsv(text, o_.scheduleFile, producers, M_);
      if (world_ > 1 && plan_.ranks != static_cast<uint32_t>(world_))
        throw Error(ErrorKind::InvalidInput, o_.scheduleFile, "",
                    "lists actions for " + std::to_string(plan_.ranks) + " ranks (rows), but the run has " +
                        std::to_string(world_));
      Xxh3_128 h;
      h.update(text.data(), text.size());
      scheduleIdentity_ = "file, XXH3-128 " + h.hexDigest();
    } else {
      plan_ = planTraining(o_.schedule, producers, workers, M_);
      if (std::string why = validatePlan(plan_, producers); !why.empty()) internalError("--schedule", "invalid plan: " + why);
      scheduleIdentity_ = trainScheduleName(o_.schedule);
    }
    SessionOptions placement = o_.session;
    if (world_ > 1) placement.stageRanks = plan_.stageRank;
    else placement.stageRanks.clear();
    Placement pl = placeStages(m_, placement, rank_, world_, env.localRank, env.localWorld);
    devices_ = pl.devices;
    backend_ = pl.backend;
    for (uint32_t w = 0; w < plan_.perRank.size(); ++w)
      if (world_ == 1 || static_cast<int>(w) == rank_) localWorkers_.push_back(static_cast<int>(w));
  }

  bool isLocalStage(uint32_t s) const { return world_ == 1 || plan_.stageRank[s] == rank_; }

  // Workers run the stages' graphs unoptimized (runActions): the graph
  // executor's optimizations (differentiable subgraphs, fusion) change how
  // gradients are computed, and its first calls profile while later ones run
  // the optimized plan, so a resumed run (first calls) would not compute what
  // an uninterrupted one (later calls) does. The plain interpreter records
  // the program's own ATen ops: gradients are eager PyTorch's, op for op.
  void loadStages() {
    const bool compiled = o_.session.stageFormat == StageFormat::Aoti;
    if (o_.session.verifyHashes) {
      StageFileCheck check;
      check.select = [&](const Stage& st, const StageFile& f) {
        if (!isLocalStage(st.index)) return false;
        return compiled ? compiledStageReads(st, f, devices_[st.index].is_cuda() ? "cuda" : "cpu") : f.format == "torchscript";
      };
      check.sha256 = !o_.session.expectManifestSha256.empty();  // a pin holds by SHA-256
      verifyStageFiles(o_.session.dir, m_, check);
    }
    setIntraOpThreads(o_.session.threads, localWorkers_.size());
    std::vector<const Stage*> mine;
    std::vector<c10::Device> where;
    for (uint32_t s = 0; s < P_; ++s)
      if (isLocalStage(s)) mine.push_back(&m_.stages[s]), where.push_back(devices_[s]);
    // The loader every mode uses; training needs the TorchScript module
    // (autograd) with ATen's linear: oneDNN's has no backward (runtime/linear_kernels.h).
    // Bound weights are the optimizer's to update: copies of their own.
    const StageWeights weights(m_, o_.session.dir, o_.session.weights, /*copies=*/true);
    std::vector<StageProgram> programs;
    if (!compiled)
      programs = StageProgram::loadAll(o_.session.dir, mine, StageFormat::TorchScript, where, CpuMatmul::Blas, &weights);
    for (size_t i = 0; i < mine.size(); ++i) {
      const Stage& info = *mine[i];
      const uint32_t s = info.index;
      auto st = std::make_unique<StageState>();
      st->info = &info;
      st->device = where[i];
      if (compiled) {
        st->compute = compiledStage(o_.session.dir, info, where[i], weights, o_.optimizer, st->train);
      } else {
        st->program = std::move(programs[i]);
        std::vector<std::string> persistent;
        for (const auto& p : info.parameters)
          if (p.kind == "buffer") persistent.push_back(p.name);
        st->train = trainableStage(*st->program.module(), persistent, o_.optimizer);
        st->compute = autogradStage(st->program, st->train);
      }
      stages_[s] = std::move(st);
    }
    tied_ = std::make_unique<TiedGradients>(m_, plan_.stageRank, rank_, world_ > 1,
                                            [this](const TiedGradients::Copy& c) -> at::Tensor& { return paramOf(c); });
  }

  // dimension 0 of every input holds the steps' batches one after another;
  // a batch is M micro-batches of the exported size.
  void loadData() {
    if (o_.dataPath.empty()) invalidInput("--data", "--train needs --data FILE.safetensors (input.<i> keys)");
    std::vector<at::Tensor> all = loadInputs(o_.dataPath, m_);
    int64_t rows = -1, batch = -1;
    for (size_t i = 0; i < all.size(); ++i) {
      const auto& spec = m_.inputs[i].tensor.shape;
      if (all[i].dim() == 0 || spec.empty() || !spec[0].symbol.empty())
        throw Error(ErrorKind::InvalidInput, o_.dataPath, "input." + std::to_string(i),
                    "--train needs every input batched along dimension 0 with a static exported size");
      int64_t b = spec[0].size * M_;
      if (rows < 0) rows = all[i].size(0), batch = b;
      if (all[i].size(0) != rows || b != batch)
        throw Error(ErrorKind::InvalidInput, o_.dataPath, "input." + std::to_string(i),
                    "has " + std::to_string(all[i].size(0)) + " rows; input.0 has " + std::to_string(rows));
    }
    if (batch <= 0 || rows % batch != 0)
      throw Error(ErrorKind::InvalidInput, o_.dataPath, "input.0",
                  std::to_string(rows) + " rows do not make whole steps of " + std::to_string(batch) + " (" +
                      std::to_string(M_) + " micro-batches of " + std::to_string(batch / std::max<uint32_t>(1, M_)) + ")");
    int64_t available = rows / batch;
    steps_ = o_.steps > 0 ? o_.steps : static_cast<int>(available - static_cast<int64_t>(firstStep_));
    if (steps_ < 1 || static_cast<int64_t>(firstStep_) + steps_ > available)
      throw Error(ErrorKind::InvalidInput, o_.dataPath, "input.0",
                  "holds " + std::to_string(available) + " steps of " + std::to_string(batch) + " rows; this run needs steps " +
                      std::to_string(firstStep_) + " to " + std::to_string(firstStep_ + steps_ - 1));
    batch_ = batch;
    data_ = std::move(all);
  }

  void step(int k) {
    std::vector<at::Tensor> inputs;
    globalStep_ = firstStep_ + static_cast<uint64_t>(k);
    int64_t row = static_cast<int64_t>(globalStep_) * batch_;
    for (const auto& t : data_) inputs.push_back(t.narrow(0, row, batch_));
    chunks_ = splitMicrobatches(inputs, m_, static_cast<int>(M_));
    lossMb_.assign(M_, 0.0);
    failed_ = false;
    // A process of a multi-process run has one worker, which runs here,
    // beside the communication thread that issues the step's messages.
    if (comm_) {
      runWithComm();
    } else if (localWorkers_.size() == 1) {
      runActions(localWorkers_[0]);
    } else {
      std::vector<std::thread> threads;
      for (int w : localWorkers_)
        threads.emplace_back([this, w] {
          try {
            runActions(w);
          } catch (const Aborted&) {
          } catch (const std::exception&) {
            fail();
          }
        });
      for (auto& t : threads) t.join();
      if (failed_) std::rethrow_exception(error_);
    }
    if (!comm_) tied_->sync(nullptr);  // across processes: with the step's messages, in runWithComm
    local_->endStep();
    for (auto& [s, st] : stages_)
      if (st->train.optimizer) {
        st->train.optimizer->step();
        st->train.optimizer->zero_grad(/*set_to_none=*/true);
      }
    tied_->checkEqual();
    double sum = 0;
    for (double l : lossMb_) sum += l;
    losses_.push_back(sum / M_);
  }

  void fail() {
    {
      std::lock_guard<std::mutex> lk(errMu_);
      if (failed_) return;
      failed_ = true;
      error_ = std::current_exception();
    }
    local_->abort();
  }

  // The trace row of this rank's sends and receives, beside its worker's
  // (runActions uses the worker's index).
  int messageRow() const { return 1000 + rank_; }

  TrainTransport& transportTo(int worker) {
    return world_ == 1 || worker == rank_ ? static_cast<TrainTransport&>(*local_) : *commTransport_;
  }

  // The rank's communication thread (runtime/comm.h) and its channels: per
  // edge, its activations towards the consumer's device and its gradients
  // towards the producer's (where NCCL receives; Gloo receives on the host).
  void setupComm() {
    const size_t E = edges_.size(), T = tied_->messages().size();
    if (2 * E + T >= CommThread::kMaxChannels) invalidInput("manifest", "more than 4096 stage connections and tied copies");
    std::vector<Channel> channels(2 * E + T);
    const auto dev = [&](uint32_t s) { return dist_->nccl() ? devices_[s] : c10::Device(c10::kCPU); };
    for (const auto& e : edges_) {
      Channel& a = channels[static_cast<size_t>(e.id)];
      a.wire = DistContext::shapeOf(e.tensor);
      a.recvDevice = dev(e.consumer);
      a.sendRow = a.recvRow = messageRow();
      a.recvName = "recv activation " + std::to_string(e.producer) + "->" + std::to_string(e.consumer);
      Channel& g = channels[E + static_cast<size_t>(e.id)];
      g = a;
      g.recvDevice = dev(e.producer);
      g.recvName = "recv gradient " + std::to_string(e.consumer) + "->" + std::to_string(e.producer);
    }
    for (size_t i = 0; i < T; ++i) {
      const TiedGradients::Copy* held = tied_->heldCopy(i);
      if (!held) continue;  // a message between two other ranks
      Channel& c = channels[2 * E + i];
      c.wire = shapeOf(paramOf(*held));  // the copies are alike
      c.recvDevice = dev(tied_->landsOn(i));
      c.sendRow = c.recvRow = messageRow();
      c.recvName = std::string("recv tied gradient ") + (tied_->messages()[i].up ? "up" : "down");
    }
    comm_ = std::make_unique<CommThread>(*dist_, std::move(channels), trace_, [this](int64_t g, int channel, Payload p) {
      commTransport_->deliver(g, channel, std::move(p));
    });
    commTransport_ = std::make_unique<CommTransport>(*comm_, *local_, E);
    stepOps_ = stepCommOrder(plan_, edges_, rank_, tied_->messages());
    // Every send of a step may be outstanding at once: the plan, not a window,
    // bounds them, and a window could hold a send back behind one whose
    // receiver first needs this rank's later work.
    size_t sends = 0;
    for (const CommOp& op : stepOps_) sends += op.send;
    dist_->setSendWindow(sends + 1);
  }

  // This rank's actions here, the step's messages on the communication
  // thread. A failure on either side stops the other: the thread's ends the
  // worker's waits (its inbox is aborted), the worker's ends the thread's
  // (its c10d waits are interrupted); the first failure is the one reported.
  void runWithComm() {
    std::exception_ptr commError;
    std::thread comm([&] {
      try {
        OpList order(stepOps_);
        comm_->run(order);
      } catch (...) {
        commError = std::current_exception();
        local_->abort();
      }
    });
    try {
      runActions(rank_);
      tied_->sync(commTransport_.get());
    } catch (const Aborted&) {
      comm.join();  // aborted by the thread's failure, which is the one to report
      if (commError) std::rethrow_exception(commError);
      throw;
    } catch (const std::exception& e) {
      dist_->interrupt(firstLine(e.what()));
      comm_->abort();
      comm.join();
      throw;
    }
    comm.join();
    if (commError) std::rethrow_exception(commError);
  }

  int workerOf(uint32_t stage) const { return plan_.stageRank[stage]; }

  void runActions(int w) {
    // Thread-local in TorchScript: every worker thread turns it off itself.
    torch::jit::GraphOptimizerEnabledGuard plainInterpreter(false);
    const auto& actions = plan_.perRank[static_cast<size_t>(w)];
    // Where the cool-down begins: the backwards after the rank's last forward.
    size_t coolDown = 0;
    for (size_t i = 0; i < actions.size(); ++i)
      if (actions[i].type == ActionType::F) coolDown = i + 1;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      // Busy time is compute only: from the last value received to the
      // first value sent. Waiting for a peer is bubble, shown apart.
      Span span;
      span.begin = span.end = Clock::now();
      auto start = span.begin;
      std::optional<Span> weights;  // a backward run as I then W: its W part
      StageState& st = *stages_.at(a.stage);
      switch (a.type) {
        case ActionType::F: forward(st, a.microbatch, span); break;
        case ActionType::B:
          if (i >= coolDown && sendsGradients(*st.info)) {
            // In the cool-down, as I then W: what ends the step is the chain
            // of the last backwards down to stage 0 (then its optimizer
            // step and next forward, which the last stage waits for), and a
            // producer waits on the inputs' gradients, not on this stage's
            // weight gradients (on the loss stage ~40% of the backward).
            // Same arithmetic as one backward pass (WeightGradCapture), and W
            // follows at once. Not in the steady state: split, a backward
            // costs ~5% more, and there the producer is not what waits.
            // backward() sends the input gradients as it ends.
            backward(st, a.microbatch, true, false, span);
            weights.emplace();
            backward(st, a.microbatch, false, true, *weights);
          } else {
            backward(st, a.microbatch, true, true, span);
          }
          break;
        case ActionType::I: backward(st, a.microbatch, true, false, span); break;
        case ActionType::W: backward(st, a.microbatch, false, true, span); break;
      }
      st.busyMs += msBetween(span.begin, weights ? weights->end : span.end);
      if (msBetween(start, span.begin) > 0.05) trace_.add("wait", "transfer", w, start, span.begin);
      if (weights) {  // traced as what ran: "1I3" then "1W3" for the plan's 1B3
        trace_.add(actionName({ActionType::I, a.stage, a.microbatch}), "compute", w, span.begin, span.end);
        trace_.add(actionName({ActionType::W, a.stage, a.microbatch}), "compute", w, weights->begin, weights->end);
      } else {
        trace_.add(actionName(a), "compute", w, span.begin, span.end);
      }
    }
  }

  struct Span {
    Clock::time_point begin, end;
  };

  // Whether the stage's backward sends gradients to a producer stage.
  bool sendsGradients(const Stage& info) const {
    for (uint32_t k = 0; k < info.inputs.size(); ++k)
      if (info.inputs[k].source.kind == ValueSource::Kind::StageOutput && edgeInto(info.index, k).carriesGradient)
        return true;
    return false;
  }

  void forward(StageState& st, uint32_t mb, Span& span) {
    const Stage& info = *st.info;
    std::vector<at::Tensor> inputs;
    std::vector<bool> needsGrad;
    for (uint32_t k = 0; k < info.inputs.size(); ++k) {
      const StageInput& in = info.inputs[k];
      at::Tensor t;
      bool grad = false;
      if (in.source.kind == ValueSource::Kind::UserInput) {
        t = chunks_[mb].at(in.source.userInput).to(st.device);
      } else {
        const TrainEdge& e = edgeInto(info.index, k);
        t = transportTo(workerOf(e.producer)).recv({TrainMessage::Kind::Activation, e.id, mb}, workerOf(e.producer));
        t = t.to(st.device);
        grad = e.carriesGradient;
      }
      inputs.push_back(std::move(t));
      needsGrad.push_back(grad);
    }
    span.begin = Clock::now();
    std::vector<at::Tensor> results =
        st.compute->forward(mb, std::move(inputs), needsGrad, microbatchSeed(o_.seed, globalStep_, info.index, mb));
    span.end = Clock::now();
    if (results.size() != info.outputs.size())
      internalError("stage " + std::to_string(info.index), "returned " + std::to_string(results.size()) +
                                                               " values, the manifest lists " + std::to_string(info.outputs.size()));
    for (uint32_t o = 0; o < results.size(); ++o) {
      const at::Tensor& t = results[o];
      for (const auto& c : info.outputs[o].consumers) {
        if (c.kind == Consumer::Kind::UserOutput) {
          lossMb_[mb] = t.detach().to(at::kCPU).item<double>();
          continue;
        }
        const TrainEdge& e = edgeInto(c.stage, c.input);
        transportTo(workerOf(c.stage)).send({TrainMessage::Kind::Activation, e.id, mb}, workerOf(c.stage), t.detach());
      }
    }
  }

  // inputGrads: compute and send the inputs' gradients (B, I); weightGrads:
  // accumulate the parameters' (B, W). B does both in one backward pass.
  void backward(StageState& st, uint32_t mb, bool inputGrads, bool weightGrads, Span& span) {
    const Stage& info = *st.info;
    if (!inputGrads) {
      span.begin = Clock::now();
      st.compute->weights(mb);
      span.end = Clock::now();
      return;
    }
    // Gradients of the outputs: 1/M for the loss, the sum of what the
    // consumers send (in consumer order) for the rest. Every gradient
    // message is taken, even for an output that does not need it.
    std::vector<at::Tensor> outGrads(info.outputs.size());
    for (uint32_t o = 0; o < info.outputs.size(); ++o) {
      at::Tensor grad;
      for (const auto& c : info.outputs[o].consumers) {
        at::Tensor g;
        if (c.kind == Consumer::Kind::UserOutput) {
          g = at::full({}, 1.0 / M_, at::TensorOptions().dtype(dtypeOfOutput(info, o)).device(st.device));
        } else {
          const TrainEdge& e = edgeInto(c.stage, c.input);
          if (!e.carriesGradient) continue;
          g = transportTo(workerOf(c.stage)).recv({TrainMessage::Kind::Gradient, e.id, mb}, workerOf(c.stage)).to(st.device);
        }
        grad = grad.defined() ? grad + g : g;
      }
      if (grad.defined() && st.compute->takesGradient(mb, o)) outGrads[o] = grad;
    }
    span.begin = Clock::now();
    std::vector<at::Tensor> inGrads = st.compute->backward(mb, std::move(outGrads), weightGrads);
    span.end = Clock::now();
    for (uint32_t k = 0; k < info.inputs.size(); ++k) {
      const StageInput& in = info.inputs[k];
      if (in.source.kind != ValueSource::Kind::StageOutput) continue;
      const TrainEdge& e = edgeInto(info.index, k);
      if (!e.carriesGradient) continue;
      if (!inGrads[k].defined()) internalError("stage " + std::to_string(info.index), "no gradient for input " + std::to_string(k));
      transportTo(workerOf(e.producer)).send({TrainMessage::Kind::Gradient, e.id, mb}, workerOf(e.producer), inGrads[k].detach());
    }
  }

  // The loss is the program's one output, scalar and floating (checkProgram).
  at::ScalarType dtypeOfOutput(const Stage& info, uint32_t o) const {
    auto t = emit::scalarTypeFromTorchName(info.outputs[o].tensor.dtype);
    return t ? *t : at::kFloat;
  }

  void indexEdges() {
    edges_ = trainEdges(m_);
    edgeOf_.assign(m_.stages.size(), {});
    for (size_t i = 0; i < edges_.size(); ++i) {
      auto& row = edgeOf_.at(edges_[i].consumer);
      if (row.size() <= edges_[i].input) row.resize(edges_[i].input + 1, kNoEdge);
      row[edges_[i].input] = i;
    }
    local_ = std::make_unique<LocalTransport>(edges_.size(), tied_->messages().size());
  }

  const TrainEdge& edgeInto(uint32_t stage, uint32_t input) const {
    if (stage < edgeOf_.size() && input < edgeOf_[stage].size() && edgeOf_[stage][input] != kNoEdge)
      return edges_[edgeOf_[stage][input]];
    internalError("stage " + std::to_string(stage), "input " + std::to_string(input) + " comes from no stage");
  }

  at::Tensor& paramOf(const TiedGradients::Copy& c) {
    StageState& st = *stages_.at(c.stage);
    for (size_t i = 0; i < st.train.params.size(); ++i)
      if (st.train.paramNames[i] == c.name) return st.train.params[i];
    internalError("tied group", "stage " + std::to_string(c.stage) + " holds no parameter '" + c.name + "'");
  }

  // Gloo carries host tensors; NCCL device ones.
  static DistContext::Shape shapeOf(const at::Tensor& like) {
    DistContext::Shape s;
    s.known = true;
    s.dtype = like.scalar_type();
    s.sizes = like.sizes().vec();
    return s;
  }

  std::map<uint32_t, TrainableStage*> localState() {
    std::map<uint32_t, TrainableStage*> out;
    for (auto& [s, st] : stages_) out[s] = &st->train;
    return out;
  }

  void loadCheckpoint() {
    auto local = localState();
    firstStep_ = loadTrainCheckpoint(o_.loadCheckpoint, m_, o_.optimizer, local);
  }

  void saveCheckpoint() {
    saveTrainCheckpoint(checkpointDestination(o_.saveCheckpoint, o_.session, readPaths(o_)),
                        m_, firstStep_ + static_cast<uint64_t>(steps_), o_.optimizer, localState(), dist_);
    checkpointWritten_ = o_.saveCheckpoint;
  }

  // Every rank publishes its stages' busy time (and the loss stage's rank
  // the losses); rank 0 reports them all.
  TrainReport report() {
    TrainReport r;
    r.rank = rank_;
    r.world = world_;
    r.backend = dist_ ? dist_->backend() : "none";
    r.stages = P_;
    r.workers = static_cast<uint32_t>(plan_.perRank.size());
    r.microbatches = static_cast<int>(M_);
    r.schedule = o_.scheduleFile.empty() ? trainScheduleName(o_.schedule) : "file " + o_.scheduleFile;
    r.optimizer = o_.optimizer.name;
    r.firstStep = firstStep_;
    r.samples = static_cast<uint64_t>(batch_) * static_cast<uint64_t>(steps_);
    r.wallMs = msBetween(t0_, t1_);
    r.samplesPerSecond = r.wallMs > 0 ? static_cast<double>(r.samples) / (r.wallMs / 1000) : 0;
    r.stepsPerSecond = r.wallMs > 0 ? steps_ / (r.wallMs / 1000) : 0;
    r.stepMs = stepMs_;
    if (stepMs_.size() > 1) {
      double later = 0;
      for (size_t k = 1; k < stepMs_.size(); ++k) later += stepMs_[k];
      r.steadySamplesPerSecond = static_cast<double>(batch_) * static_cast<double>(stepMs_.size() - 1) / (later / 1000);
    }
    r.peakActivations = peakActivations(plan_);
    r.plan = planText(plan_);
    r.checkpoint = checkpointWritten_;
    std::map<uint32_t, double> busy;
    for (const auto& [s, st] : stages_) busy[s] = st->busyMs;
    r.losses = losses_;
    if (dist_) {
      if (isLocalStage(lossStage_)) dist_->put("train/losses", control::encodeNumbers(losses_));
      if (rank_ == 0) {
        r.losses = control::decodeNumbers(dist_->get("train/losses"), static_cast<size_t>(steps_), false, "losses");
        if (r.losses.size() != static_cast<size_t>(steps_))
          throw Error(ErrorKind::RankFailed, "", "rendezvous store", "the losses message lists another number of steps");
      }
    }
    // In one process the plan's workers are threads of rank 0.
    std::vector<int> stageRank = plan_.stageRank;
    if (world_ == 1) stageRank.assign(P_, 0);
    std::map<uint32_t, HeldBytes> held;
    for (const auto& [s, st] : stages_)
      held[s] = {st->compute->savedActivationBytes(), st->compute->heldForWeightsBytes()};
    r.stageStats = gatherStageStats(dist_, rank_, "train/busy", busy, stageRank, devices_, r.wallMs, held);
    for (auto& ss : r.stageStats) ss.format = o_.session.stageFormat == StageFormat::Aoti ? "aoti" : "torchscript";
    // Idle share of the workers (a worker runs its stages one at a time).
    r.bubbleMeasured = measuredBubble(r.stageStats, plan_.perRank.size(), r.wallMs);
    if (!o_.session.tracePath.empty()) {
      std::map<int, std::string> names;
      for (int w : localWorkers_) names[w] = r.plan[static_cast<size_t>(w)];  // "rank 1: 1F0 1F1 1B0 ..."
      if (comm_) names[messageRow()] = "rank " + std::to_string(rank_) + " messages";
      trace_.write(traceDestination(rankTracePath(o_.session.tracePath, rank_, world_), o_.session, readPaths(o_)),
                   names);
    }
    return r;
  }

  TrainOptions o_;
  Manifest m_;
  std::string manifestSha256_;
  uint32_t P_, M_ = 1;
  uint32_t lossStage_ = 0;
  int rank_ = 0, world_ = 1;
  std::string backend_;
  TrainPlan plan_;
  std::string scheduleIdentity_;  // what ranks agree on: the schedule's name, or the file's digest
  std::vector<c10::Device> devices_;
  std::vector<int> localWorkers_;
  std::unique_ptr<RankSession> session_;  // across processes: the rendezvous, watcher, failure and finish
  DistContext* dist_ = nullptr;           // session_'s
  std::map<uint32_t, std::unique_ptr<StageState>> stages_;
  std::unique_ptr<TiedGradients> tied_;
  std::vector<TrainEdge> edges_;
  // edgeOf_[stage][input]: the index in edges_ of the edge into that input
  // (kNoEdge for user inputs), looked up on every action.
  static constexpr size_t kNoEdge = SIZE_MAX;
  std::vector<std::vector<size_t>> edgeOf_;
  std::unique_ptr<LocalTransport> local_;  // made once edges_ is known
  std::unique_ptr<CommThread> comm_;
  std::unique_ptr<CommTransport> commTransport_;
  std::vector<CommOp> stepOps_;  // this rank's c10d operations in every step
  std::vector<at::Tensor> data_;
  int64_t batch_ = 0;
  int steps_ = 0;
  uint64_t firstStep_ = 0;
  uint64_t globalStep_ = 0;  // the step running, counted from the first run's first
  std::vector<std::vector<at::Tensor>> chunks_;
  std::vector<double> lossMb_, losses_;
  std::vector<double> stepMs_;  // wall time of each step on this rank
  Trace trace_;
  Clock::time_point t0_, t1_;
  std::mutex errMu_;
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::string checkpointWritten_;
};

}  // namespace

TrainReport runTraining(const TrainOptions& o) {
  keepFreedHostMemory();
  if (o.steps < 0) throw Error(ErrorKind::Usage, "", "--steps", "must be at least 1");
  SplitDirectory split = openSplitDirectory(o.session.dir, o.session.expectManifestSha256);
  if (split.manifest.stages.empty()) throw Error(ErrorKind::InvalidInput, o.session.dir, "manifest", "lists no stages");
  return Trainer(o, std::move(split)).run();
}

}  // namespace pipecut::runtime
