// The generation engine (runtime/generate/generate.h).
//
// Workers: in one process a thread per stage; across processes a rank, its
// stages (a contiguous block) run in stage order on its one thread. The
// first stage's worker also schedules: it issues each step (GenerationPlan),
// sends its descriptor to every other worker, runs its own stages, and when
// the step's tokens come back advances the plan. Each other worker loops:
// the next descriptor, the step's inputs from the workers below it, its
// stages, their outputs to the workers above; the worker of the stage that
// makes the logits samples each row's token and sends the tokens back to the
// first worker.
//
// Why it cannot deadlock: every worker handles steps in issue order; a
// worker receives a step's values only from workers of lower stages
// (placement in contiguous blocks, edges forward), which send them as soon as
// they ran the step and never wait on a later message to do so; the first
// worker waits only for the tokens of its oldest outstanding step, which the
// others produce from what it has sent. So every pair's messages follow one
// order on both sides, which is all an order-matched transport (NCCL,
// gloo-strict) needs.
#include "runtime/generate/generate.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>

#include "emit/dtypes.h"
#include "manifest/directory.h"
#include "manifest/verify.h"
#include "runtime/clock.h"
#include "runtime/generate/decode_program.h"
#include "runtime/exchange.h"
#include "runtime/generate/plan.h"
#include "runtime/host_allocator.h"
#include "runtime/inputs.h"
#include "runtime/outputs.h"
#include "runtime/placement.h"
#include "runtime/generate/prompts.h"
#include "runtime/rank_session.h"
#include "runtime/generate/sampler.h"
#include "runtime/stage_program.h"
#include "runtime/stage_weights.h"
#include "runtime/stage_stats.h"
#include "runtime/generate/step_channels.h"
#include "runtime/trace.h"
#include "support/digest.h"
#include "support/error.h"

namespace pipecut::runtime {

namespace {

// A step on the wire: int64 [8 + 2 rows]: index, slot, position, length,
// flags, then per row the sequence's key and how many tokens it has.
constexpr int64_t kReset = 1, kPrefill = 2, kSamples = 4, kStop = 8;
constexpr int64_t kStepHeader = 8;

struct StepInfo {
  int64_t index = 0;
  uint32_t slot = 0;
  int64_t position = 0, length = 1, flags = 0;
  std::vector<uint64_t> keys;
  std::vector<int64_t> generated;
};

// A value that crosses workers: output `output` of stage `producer` is input
// `input` of stage `consumer`.
struct Edge {
  uint32_t producer, output, consumer, input;
};

// The run on this rank; internal, like the types its members use.
class Generation {
 public:
  Generation(const GenerateOptions& o, SplitDirectory split)
      : o_(o), m_(std::move(split.manifest)), manifestSha256_(std::move(split.manifestSha256)),
        P_(static_cast<uint32_t>(m_.stages.size())) {}

  GenerateReport run() {
    program_ = readDecodeProgram(m_, o_.session.dir, "--generate");
    prompts_ = readPrompts(o_.promptsPath);
    checkPrompts();
    place();
    makePlan();
    checkOutputs();
    if (world_ > 1) {
      session_ = std::make_unique<RankSession>(DistEnv::fromEnvironment(), backend_, o_.session, identity());
      dist_ = &session_->dist();
      dist_->setSendWindow(static_cast<size_t>(4 * slots_ + 16));
      channels_ = std::make_unique<CommStepChannels>(*dist_);
    } else {
      channels_ = std::make_unique<LocalStepChannels>();
    }
    return runAsRank(session_.get(), [&] {
      loadStages();
      setIntraOpThreads(o_.session.threads, localWorkers_.size());
      trace_.reset(rank_, !o_.session.tracePath.empty());
      t0_ = Clock::now();
      std::vector<std::thread> threads;
      for (int w : localWorkers_) threads.emplace_back([this, w] { guarded(w); });
      for (auto& t : threads) t.join();
      t1_ = Clock::now();
      if (failed_) std::rethrow_exception(error_);
      return report();
    });
  }

 private:
  // ---- set-up ---------------------------------------------------------------

  void checkPrompts() {
    for (const auto& p : prompts_)
      for (size_t k = 0; k < p.tokens.size(); ++k)
        if (p.tokens[k] >= program_.vocab)
          throw Error(ErrorKind::InvalidInput, o_.promptsPath, "prompt " + p.id + ": prompt[" + std::to_string(k) + "]",
                      "token " + std::to_string(p.tokens[k]) + " is outside the vocabulary of " +
                          std::to_string(program_.vocab));
  }

  // Every rank makes the plan (and refuses a prompt that does not fit the
  // cache) before any waits on another; only the first stage's follows it.
  void makePlan() {
    GenerationConfig c;
    c.rows = program_.rows;
    c.slots = slots_;
    c.chunk = o_.prefillChunk > 0 ? std::min(program_.chunk, o_.prefillChunk) : program_.chunk;
    c.cacheLength = program_.cacheLength;
    c.maxNewTokens = o_.maxNewTokens;
    c.eos = o_.eos;
    try {
      plan_ = std::make_unique<GenerationPlan>(c, prompts_);
    } catch (const Error& e) {
      e.rethrowWithFile(o_.promptsPath);
    }
  }

  void place() {
    DistEnv env = DistEnv::fromEnvironment();
    rank_ = env.rank;
    world_ = env.world;
    Placement pl = placeStages(m_, o_.session, rank_, world_, env.localRank, env.localWorld);
    devices_ = pl.devices;
    backend_ = pl.backend;
    stageWorker_.resize(P_);
    for (uint32_t s = 0; s < P_; ++s) stageWorker_[s] = world_ > 1 ? pl.stageRank[s] : static_cast<int>(s);
    for (uint32_t s = 1; s < P_; ++s)
      if (stageWorker_[s] < stageWorker_[s - 1])
        invalidInput("--stage-ranks", "--generate places stages on ranks in contiguous blocks, in stage order");
    if (world_ > 1 && stageWorker_[0] != 0) invalidInput("--stage-ranks", "--generate runs stage 0 on rank 0");
    if (o_.session.stageFormat == StageFormat::Pt2)
      invalidInput("--stage-format", "--generate runs TorchScript stages or AOTInductor packages: a .pt2 stage through "
                                     "NativeRT keeps its KV cache inside, where a runner cannot keep one per slot");
    for (const Stage& st : m_.stages)  // auto: what each stage would run in, refused here rather than at load
      resolveStageFormat(st, o_.session.stageFormat, devices_.at(st.index), /*stateOutside=*/true);
    for (uint32_t s = 0; s < P_; ++s)
      if (world_ == 1 || stageWorker_[s] == rank_)
        if (std::find(localWorkers_.begin(), localWorkers_.end(), stageWorker_[s]) == localWorkers_.end())
          localWorkers_.push_back(stageWorker_[s]);
    // One slot more than stages: with one a stage, a slot's next step waits
    // for its tokens to come back from the last stage, and any unevenness
    // between stages idles the first (bench/generate.py, 2 stages: 2 slots
    // ran 785-822 tokens/s, 3 slots 987-1132, 4 slots 1069-1103).
    slots_ = o_.slots > 0 ? o_.slots : P_ > 1 ? static_cast<int>(P_) + 1 : 1;
    // A slot holds a prompt at least: more would only hold caches.
    slots_ = std::min(slots_, static_cast<int>(std::min<size_t>(prompts_.size(), 1 << 20)));
  }

  // Refusals of an output come before the run, not after it.
  void checkOutputs() {
    if (rank_ == 0 && !o_.outputPath.empty()) support::checkDestination(outputDestination());
    if (!o_.session.tracePath.empty())
      support::checkDestination(traceDestination(rankTracePath(o_.session.tracePath, rank_, world_), o_.session, reads()));
  }
  std::vector<std::string> reads() const { return readPaths(o_.session, {o_.promptsPath, o_.checkTokensPath}); }
  support::Destination outputDestination() const {
    support::Destination d;
    d.path = o_.outputPath;
    d.what = "--output tokens file";
    d.previousOutput = [](const std::filesystem::path& p) { return sequencesInTheWay(p.string()); };
    const auto in = reads();
    d.inputs.assign(in.begin(), in.end());
    d.force = o_.session.force;
    return d;
  }

  RunIdentity identity() const {
    RunIdentity id = commonIdentity("generation", o_.session, manifestSha256_, stageWorker_, backend_);
    id.push_back({"--prompts (XXH3-128)", digestFile(Digest::Xxh3_128, o_.promptsPath)});
    id.push_back({"--max-new-tokens", std::to_string(o_.maxNewTokens)});
    id.push_back({"--eos", o_.eos ? std::to_string(*o_.eos) : "none"});
    id.push_back({"--sampling", o_.sampling == Sampling::Greedy ? "greedy" : "top-p"});
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.17g %.17g %llu", o_.temperature, o_.topP, static_cast<unsigned long long>(o_.seed));
    id.push_back({"--temperature --top-p --seed", buf});
    id.push_back({"--slots", std::to_string(slots_)});
    id.push_back({"--prefill-chunk", std::to_string(o_.prefillChunk)});
    return id;
  }

  void loadStages() {
    if (o_.session.verifyHashes) {
      StageFileCheck check;
      check.select = [&](const Stage& st, const StageFile& f) {
        return isLocal(st.index) && readsStageFile(st, f, o_.session.stageFormat, devices_[st.index]);
      };
      check.sha256 = !o_.session.expectManifestSha256.empty();
      verifyStageFiles(o_.session.dir, m_, check);
    }
    programs_.resize(P_);
    state_.assign(static_cast<size_t>(slots_), std::vector<std::vector<at::Tensor>>(P_));
    busyMs_.assign(P_, 0);
    std::vector<const Stage*> mine;
    std::vector<c10::Device> where;
    for (uint32_t s = 0; s < P_; ++s)
      if (isLocal(s)) mine.push_back(&m_.stages[s]), where.push_back(devices_[s]);
    const StageWeights weights(m_, o_.session.dir, o_.session.weights, /*copies=*/false);
    std::vector<StageProgram> loaded = StageProgram::loadAll(o_.session.dir, mine, o_.session.stageFormat, where,
                                                             o_.session.cpuMatmul, &weights);
    for (size_t i = 0; i < mine.size(); ++i)
      programs_[mine[i]->index] = std::make_unique<StageProgram>(std::move(loaded[i]));
    for (uint32_t s = 0; s < P_; ++s) {
      if (!isLocal(s)) continue;
      for (int k = 0; k < slots_; ++k) {
        state_[static_cast<size_t>(k)][s] = programs_[s]->newState();
        for (const auto& t : state_[static_cast<size_t>(k)][s])
          if (k == 0) stateBytesPerSlot_ += static_cast<uint64_t>(t.nbytes());
      }
    }
    // Cross-worker connections, in the one order senders send and receivers
    // receive them: by producer stage, output, consumer.
    for (const auto& st : m_.stages)
      for (uint32_t o = 0; o < st.outputs.size(); ++o)
        for (const auto& c : st.outputs[o].consumers)
          if (c.kind == Consumer::Kind::StageInput && stageWorker_[st.index] != stageWorker_[c.stage])
            edges_.push_back({st.index, o, c.stage, c.input});
    for (uint32_t s = 0; s < P_; ++s)
      for (const auto& in : m_.stages[s].inputs)
        if (in.source.kind == ValueSource::Kind::UserInput && in.source.userInput == 0 && stageWorker_[s] != stageWorker_[0] &&
            std::find(idsWorkers_.begin(), idsWorkers_.end(), stageWorker_[s]) == idsWorkers_.end())
          idsWorkers_.push_back(stageWorker_[s]);
    // Values between workers take their sizes from the step: the sequence
    // length is the one symbol they may have.
    const std::string& length = m_.inputs[0].tensor.shape[1].symbol;
    for (const Edge& e : edges_)
      for (const auto& d : m_.stages[e.producer].outputs[e.output].tensor.shape)
        if (!d.symbol.empty() && d.symbol != length)
          invalidInput("stage " + std::to_string(e.producer) + " output '" + m_.stages[e.producer].outputs[e.output].name + "'",
                       "has a dimension of symbol " + d.symbol + "; --generate passes values whose only symbolic "
                       "dimension is the sequence length");
  }

  bool isLocal(uint32_t stage) const { return world_ == 1 || stageWorker_[stage] == rank_; }
  int scheduler() const { return stageWorker_[0]; }
  int sampler() const { return stageWorker_[program_.logitsStage]; }
  c10::Device wireDevice(int worker) const {
    // NCCL moves CUDA tensors: a worker's first stage's device.
    if (!dist_ || !dist_->nccl()) return c10::Device(c10::kCPU);
    for (uint32_t s = 0; s < P_; ++s)
      if (stageWorker_[s] == worker) return devices_[s];
    return c10::Device(c10::kCPU);
  }
  std::vector<WireSpec> stepSpec() const { return {WireSpec{{kStepHeader + 2 * program_.rows}, at::kLong}}; }
  std::vector<WireSpec> tokensSpec() const { return {WireSpec{{program_.rows}, at::kLong}}; }

  // ---- workers --------------------------------------------------------------

  void guarded(int w) {
    try {
      c10::InferenceMode inference;
      if (w == scheduler()) schedule(w);
      else follow(w);
    } catch (const Aborted&) {
    } catch (...) {
      {
        std::lock_guard<std::mutex> lk(errMu_);
        if (failed_) return;
        failed_ = true;
        error_ = std::current_exception();
      }
      channels_->abort();
      if (dist_) dist_->interrupt("a generation worker failed");
    }
  }

  double nowMs() const { return msBetween(t0_, Clock::now()); }

  void schedule(int w) {
    std::deque<GenerationStep> outstanding;
    for (auto& step : plan_->start(nowMs())) {
      issue(w, step);
      outstanding.push_back(std::move(step));
    }
    while (!outstanding.empty()) {
      GenerationStep step = std::move(outstanding.front());
      outstanding.pop_front();
      std::vector<int64_t> sampled = takeTokens(w, step.index);
      if (auto next = plan_->advance(step, sampled, nowMs())) {
        issue(w, *next);
        outstanding.push_back(std::move(*next));
      }
    }
    StepInfo stop;
    stop.flags = kStop;
    stop.index = static_cast<int64_t>(plan_->stepsIssued());
    at::Tensor wire = encode(stop).to(wireDevice(w));
    for (int other : otherWorkers(w)) channels_->send(w, other, {wire});
  }

  std::vector<int> otherWorkers(int self) const {
    std::vector<int> out;
    for (int x : stageWorker_)
      if (x != self && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
    return out;
  }

  void issue(int w, const GenerationStep& step) {
    StepInfo info;
    info.index = step.index;
    info.slot = step.slot;
    info.position = step.position;
    info.length = step.length;
    info.flags = (step.reset ? kReset : 0) | (step.prefill ? kPrefill : 0) | (step.samples ? kSamples : 0);
    for (size_t r = 0; r < step.sequence.size(); ++r) {
      const int64_t q = step.sequence[r] < 0 ? step.sequence[0] : step.sequence[r];
      info.keys.push_back(sequenceKey(plan_->prompts()[static_cast<size_t>(q)].id));
      info.generated.push_back(step.generated[r]);
    }
    at::Tensor ids = at::tensor(step.tokens, at::kLong).view({program_.rows, step.length});
    at::Tensor wire = encode(info).to(wireDevice(w));
    auto sendFrom = Clock::now();
    for (int other : otherWorkers(w)) channels_->send(w, other, {wire});
    trace_.add("send step", "transfer", 1000 + w, sendFrom, Clock::now());
    // The step's tokens are taken in issue order (schedule()'s queue), and
    // nothing else comes from the sampler: posted now, they land while this
    // worker computes the steps in between.
    if (sampler() != w) channels_->prepost(w, sampler(), tokensSpec(), wireDevice(w));
    runStep(w, info, ids);
  }

  void follow(int w) {
    // Every message is received preposted (StepChannels::prepost), in the
    // order its source sends them: from the scheduler a step's descriptor,
    // then its values when this worker reads them, then the next
    // descriptor; from another worker, each step's values.
    channels_->prepost(w, scheduler(), stepSpec(), wireDevice(w));
    for (;;) {
      auto waitFrom = Clock::now();
      StepInfo info = decode(channels_->recv(w, scheduler(), stepSpec(), wireDevice(w)).at(0));
      trace_.add("wait for step", "transfer", 1000 + w, waitFrom, Clock::now());
      if (info.flags & kStop) return;
      for (int src = 0; src < w; ++src)
        if (std::vector<WireSpec> specs = payloadSpec(src, w, info.length); !specs.empty())
          channels_->prepost(w, src, specs, wireDevice(w));
      channels_->prepost(w, scheduler(), stepSpec(), wireDevice(w));
      runStep(w, info, at::Tensor());
    }
  }

  // The tokens of the step, in issue order: from the sampling worker, or made here.
  std::vector<int64_t> takeTokens(int w, int64_t index) {
    at::Tensor t;
    if (sampler() == w) {
      std::lock_guard<std::mutex> lk(localMu_);
      t = localTokens_.at(index);
      localTokens_.erase(index);
    } else {
      auto waitFrom = Clock::now();
      t = channels_->recv(w, sampler(), tokensSpec(), wireDevice(w)).at(0).to(at::kCPU);
      trace_.add("wait for tokens", "transfer", 1000 + w, waitFrom, Clock::now());
    }
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  }

  // Which values go from worker `src` to worker `dst` in a step, in one
  // order both derive: the token ids first (from the first stage's worker,
  // when `dst` runs a stage that reads them), then the cross-worker edges in
  // edges_ order.
  bool sendsIds(int src, int dst) const {
    return src == scheduler() && std::find(idsWorkers_.begin(), idsWorkers_.end(), dst) != idsWorkers_.end();
  }
  std::vector<WireSpec> payloadSpec(int src, int dst, int64_t length) const {
    std::vector<WireSpec> specs;
    if (sendsIds(src, dst)) specs.push_back(WireSpec{{program_.rows, length}, at::kLong});
    for (const Edge& e : edges_)
      if (stageWorker_[e.producer] == src && stageWorker_[e.consumer] == dst) specs.push_back(wireSpec(e, length));
    return specs;
  }
  // An edge's value at this step's sequence length (the one symbol --generate allows).
  WireSpec wireSpec(const Edge& e, int64_t length) const {
    const TensorSpec& t = m_.stages[e.producer].outputs[e.output].tensor;
    WireSpec w;
    w.dtype = emit::scalarTypeFromTorchName(t.dtype).value_or(at::kFloat);
    for (const auto& d : t.shape) w.sizes.push_back(d.symbol.empty() ? d.size : length);
    return w;
  }

  // Runs worker w's stages for one step: its values from the workers below
  // it (one message each), its stages in order, one message to each worker
  // above it.
  void runStep(int w, const StepInfo& info, at::Tensor ids) {
    std::map<std::pair<uint32_t, uint32_t>, at::Tensor> values;    // (stage, output) -> value, this step
    std::map<std::pair<uint32_t, uint32_t>, at::Tensor> received;  // (stage, input)
    auto waitFrom = Clock::now();
    for (int src = 0; src < w; ++src) {
      std::vector<WireSpec> specs = payloadSpec(src, w, info.length);
      if (specs.empty()) continue;
      c10::Device device = wireDevice(w) == c10::Device(c10::kCPU) ? devices_[firstStageOf(w)] : wireDevice(w);
      std::vector<at::Tensor> got = channels_->recv(w, src, specs, device);
      size_t k = 0;
      if (sendsIds(src, w)) ids = got[k++];
      for (const Edge& e : edges_)
        if (stageWorker_[e.producer] == src && stageWorker_[e.consumer] == w) received[{e.consumer, e.input}] = got.at(k++);
    }
    trace_.add("receive step values", "transfer", 1000 + w, waitFrom, Clock::now());
    std::map<int, std::vector<at::Tensor>> outgoing;  // dst worker -> values, in payloadSpec's order
    for (int dst : otherWorkers(w))
      if (sendsIds(w, dst)) outgoing[dst].push_back(ids);
    auto& slotState = state_.at(info.slot);
    for (uint32_t s = 0; s < P_; ++s) {
      if (stageWorker_[s] != w) continue;
      const Stage& st = m_.stages[s];
      std::vector<c10::IValue> args;
      for (uint32_t k = 0; k < st.inputs.size(); ++k) {
        const StageInput& in = st.inputs[k];
        if (in.source.kind == ValueSource::Kind::UserInput)
          args.emplace_back(in.source.userInput == 0 ? ids.to(devices_[s])
                                                     : at::arange(info.position, info.position + info.length,
                                                                  at::TensorOptions().dtype(at::kLong).device(devices_[s])));
        else if (stageWorker_[in.source.stage] == w)
          args.emplace_back(values.at({in.source.stage, in.source.output}).to(devices_[s]));
        else
          args.emplace_back(received.at({s, k}).to(devices_[s]));
      }
      if (info.flags & kReset) {
        programs_[s]->resetState(slotState[s]);
        for (const auto& t : slotState[s]) stateBytesZeroed_ += static_cast<uint64_t>(t.nbytes());  // atomic: stage threads
      }
      auto begin = Clock::now();
      std::vector<c10::IValue> out = programs_[s]->forward(std::move(args), slotState[s]);
      auto end = Clock::now();
      busyMs_[s] += msBetween(begin, end);
      trace_.add("stage " + std::to_string(s) + " slot " + std::to_string(info.slot) + ((info.flags & kPrefill) ? " prefill" : " decode"),
                 "compute", static_cast<int>(s), begin, end);
      for (uint32_t o = 0; o < out.size(); ++o) values[{s, o}] = out[o].toTensor();
      for (const Edge& e : edges_)
        if (e.producer == s) outgoing[stageWorker_[e.consumer]].push_back(values.at({s, e.output}));
      if (s == program_.logitsStage) sample(w, info, values.at({s, program_.logitsOutput}));
    }
    for (auto& [dst, vals] : outgoing) {
      if (dist_ && !dist_->nccl())
        for (auto& t : vals) t = t.to(at::kCPU);
      auto sendFrom = Clock::now();
      channels_->send(w, dst, vals);
      trace_.add("send step values", "transfer", 1000 + w, sendFrom, Clock::now());
    }
  }

  uint32_t firstStageOf(int w) const {
    for (uint32_t s = 0; s < P_; ++s)
      if (stageWorker_[s] == w) return s;
    return 0;
  }

  void sample(int w, const StepInfo& info, const at::Tensor& logits) {
    auto begin = Clock::now();
    at::Tensor tokens = at::zeros({program_.rows}, at::kLong);
    if (info.flags & kSamples) {
      at::Tensor last = logits.select(1, logits.size(1) - 1).to(at::kCPU, at::kFloat).contiguous();
      SamplerOptions so{o_.sampling, o_.temperature, o_.topP, o_.seed};
      const float* rows = last.data_ptr<float>();
      int64_t* out = tokens.data_ptr<int64_t>();
      const auto vocab = static_cast<size_t>(program_.vocab);
      for (int64_t r = 0; r < program_.rows; ++r)
        out[r] = sampleToken(rows + static_cast<size_t>(r) * vocab, vocab, so, info.keys[static_cast<size_t>(r)],
                             info.generated[static_cast<size_t>(r)]);
    }
    trace_.add("sample", "sample", static_cast<int>(program_.logitsStage), begin, Clock::now());
    if (w == scheduler()) {
      std::lock_guard<std::mutex> lk(localMu_);
      localTokens_[info.index] = tokens;
    } else {
      channels_->send(w, scheduler(), {tokens.to(wireDevice(w))});
    }
  }

  at::Tensor encode(const StepInfo& info) const {
    at::Tensor t = at::zeros({kStepHeader + 2 * program_.rows}, at::kLong);
    auto a = t.accessor<int64_t, 1>();
    a[0] = info.index;
    a[1] = info.slot;
    a[2] = info.position;
    a[3] = info.length;
    a[4] = info.flags;
    for (size_t r = 0; r < info.keys.size(); ++r) {
      a[kStepHeader + 2 * static_cast<int64_t>(r)] = static_cast<int64_t>(info.keys[r]);
      a[kStepHeader + 2 * static_cast<int64_t>(r) + 1] = info.generated[r];
    }
    return t;
  }

  StepInfo decode(const at::Tensor& wire) const {
    at::Tensor t = wire.to(at::kCPU);
    auto a = t.accessor<int64_t, 1>();
    StepInfo info;
    info.index = a[0];
    info.flags = a[4];
    if (info.flags & kStop) return info;
    if (a[1] < 0 || a[1] >= slots_ || a[3] < 1 || a[3] > std::max<int64_t>(1, program_.chunk) || a[2] < 0)
      internalError("generation", "a step descriptor out of range (messages out of order?)");
    info.slot = static_cast<uint32_t>(a[1]);
    info.position = a[2];
    info.length = a[3];
    for (int64_t r = 0; r < program_.rows; ++r) {
      info.keys.push_back(static_cast<uint64_t>(a[kStepHeader + 2 * r]));
      info.generated.push_back(a[kStepHeader + 2 * r + 1]);
    }
    return info;
  }


  // ---- report ---------------------------------------------------------------

  GenerateReport report() {
    GenerateReport r;
    r.rank = rank_;
    r.world = world_;
    r.backend = dist_ ? dist_->backend() : "none";
    r.stages = P_;
    r.slots = slots_;
    r.rowsPerSlot = program_.rows;
    r.sampling = o_.sampling == Sampling::Greedy ? "greedy" : "top-p";
    r.wallMs = msBetween(t0_, t1_);
    r.stateBytesPerSlot = stateBytesPerSlot_;
    std::map<uint32_t, double> busy;
    for (uint32_t s = 0; s < P_; ++s)
      if (isLocal(s)) busy[s] = busyMs_[s];
    std::vector<int> stageRank(P_, 0);
    if (world_ > 1) stageRank = stageWorker_;
    r.stageStats = gatherStageStats(dist_, rank_, "generate/busy", busy, stageRank, devices_, r.wallMs);
    for (auto& s : r.stageStats)
      s.format = stageFormatName(
          resolveStageFormat(m_.stages.at(s.stage), o_.session.stageFormat, devices_.at(s.stage), /*stateOutside=*/true));
    r.bubbleMeasured = measuredBubble(r.stageStats, P_, r.wallMs);
    if (rank_ == 0) {
      r.sequences = plan_->prompts().size();
      r.promptTokens = plan_->promptTokens();
      r.generatedTokens = plan_->generatedTokens();
      r.steps = plan_->stepsIssued();
      r.stateBytesZeroed = stateBytesZeroed_;
      r.stateBytesCopiedPerToken = 0;  // no state is copied: slots pass their own by reference
      double seconds = r.wallMs / 1000;
      r.prefillTokensPerSecond = seconds > 0 ? static_cast<double>(r.promptTokens) / seconds : 0;
      r.decodeTokensPerSecond = seconds > 0 ? static_cast<double>(r.generatedTokens) / seconds : 0;
      std::vector<double> ttft, itl;
      for (const auto& t : plan_->timings()) {
        if (!t.tokenMs.empty() && t.admittedMs >= 0) ttft.push_back(t.tokenMs[0] - t.admittedMs);
        for (size_t k = 1; k < t.tokenMs.size(); ++k) itl.push_back(t.tokenMs[k] - t.tokenMs[k - 1]);
      }
      auto pct = [](std::vector<double> v, double q) {
        if (v.empty()) return -1.0;
        std::sort(v.begin(), v.end());
        return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
      };
      r.ttftP50Ms = pct(ttft, 0.5);
      r.ttftP99Ms = pct(ttft, 0.99);
      r.itlP50Ms = pct(itl, 0.5);
      r.itlP99Ms = pct(itl, 0.99);
      std::vector<GeneratedSequence> sequences = plan_->sequences();
      if (!o_.outputPath.empty()) {
        std::string text = sequencesJsonl(sequences);
        support::writeFileStaged(outputDestination(), [&](const support::ByteSink& sink) { sink(text.data(), text.size()); });
      }
      if (!o_.checkTokensPath.empty()) {
        r.checked = true;
        r.checkMessage = compareSequences(sequences, readSequences(o_.checkTokensPath));
        r.checkOk = r.checkMessage.empty();
      }
    }
    if (!o_.session.tracePath.empty()) {
      std::map<int, std::string> names;
      for (uint32_t s = 0; s < P_; ++s) names[static_cast<int>(s)] = "stage " + std::to_string(s) + " (" + devices_[s].str() + ")";
      trace_.write(traceDestination(rankTracePath(o_.session.tracePath, rank_, world_), o_.session, reads()), names);
    }
    return r;
  }

  GenerateOptions o_;
  Manifest m_;
  std::string manifestSha256_;
  uint32_t P_;
  DecodeProgram program_;
  std::vector<PromptRequest> prompts_;
  int rank_ = 0, world_ = 1, slots_ = 1;
  std::string backend_;
  std::vector<c10::Device> devices_;
  std::vector<int> stageWorker_;   // per stage: its worker (stage index in one process, rank across processes)
  std::vector<int> localWorkers_;  // this process's
  std::vector<int> idsWorkers_;    // other workers whose stages read the token ids
  std::vector<Edge> edges_;        // cross-worker, in send order
  std::unique_ptr<RankSession> session_;
  DistContext* dist_ = nullptr;
  std::unique_ptr<StepChannels> channels_;
  std::vector<std::unique_ptr<StageProgram>> programs_;           // local stages
  std::vector<std::vector<std::vector<at::Tensor>>> state_;       // [slot][stage]: its state tensors
  std::unique_ptr<GenerationPlan> plan_;
  std::vector<double> busyMs_;
  uint64_t stateBytesPerSlot_ = 0;
  std::atomic<uint64_t> stateBytesZeroed_{0};
  std::mutex localMu_;
  std::map<int64_t, at::Tensor> localTokens_;  // sampled on the scheduler's own worker
  Trace trace_;
  Clock::time_point t0_, t1_;
  std::mutex errMu_;
  bool failed_ = false;
  std::exception_ptr error_;
};

}  // namespace

GenerateReport runGeneration(const GenerateOptions& o) {
  if (o.maxNewTokens < 1) throw Error(ErrorKind::Usage, "", "--max-new-tokens", "must be at least 1");
  SplitDirectory split = openSplitDirectory(o.session.dir, o.session.expectManifestSha256);
  if (split.manifest.stages.empty()) throw Error(ErrorKind::InvalidInput, o.session.dir, "manifest", "lists no stages");
  keepFreedHostMemory();  // every step allocates and frees the same activation-sized blocks
  return Generation(o, std::move(split)).run();
}

}  // namespace pipecut::runtime
