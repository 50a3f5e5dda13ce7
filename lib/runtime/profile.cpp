#include "runtime/profile.h"
#include "runtime/stage_weights.h"
#include "support/mapped_file.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <unordered_map>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include "emit/torchscript_profile.h"
#include "manifest/directory.h"
#include "manifest/manifest.h"
#include "manifest/verify.h"
#include "pt2/package.h"
#include "runtime/clock.h"
#include "runtime/compare.h"
#include "runtime/distributed.h"
#include "runtime/inputs.h"
#include "runtime/linear_kernels.h"
#include "runtime/outputs.h"
#include "runtime/generate/decode_program.h"
#include "runtime/placement.h"
#include "runtime/rank_session.h"
#include "runtime/stage_program.h"
#include "support/error.h"
#include "support/host_cpu.h"

namespace pipecut::runtime {

namespace {

namespace jit = torch::jit;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Runs a straight-line forward graph one jit node at a time, so that the time
// of each program node's jit nodes can be read between them. Values live in
// numbered slots and are dropped after their last use, as TorchScript's own
// interpreter does, so memory stays what forward() needs.
class Interpreter {
 public:
  Interpreter(const emit::ProfiledModule& pm, const std::string& file) : pm_(pm), file_(file) {
    std::unordered_map<const jit::Value*, size_t> slotOf;
    auto slot = [&](const jit::Value* v) {
      auto [it, fresh] = slotOf.try_emplace(v, slotOf.size());
      return it->second;
    };
    for (const jit::Value* in : pm.graph->inputs()) inputs_.push_back(slot(in));
    ownerOf_.assign(pm.nodes.size(), nullptr);
    for (const auto& r : pm.ranges)
      for (size_t i = r.begin; i < r.end; ++i) ownerOf_[i] = &r;
    std::vector<size_t> lastUse;
    auto use = [&](size_t s, size_t step) {
      if (lastUse.size() <= s) lastUse.resize(s + 1, SIZE_MAX);
      lastUse[s] = step;
    };
    for (size_t i = 0; i < pm.nodes.size(); ++i) {
      const jit::Node* n = pm.nodes[i];
      Step st;
      for (const jit::Value* v : n->inputs()) {
        auto it = slotOf.find(v);
        if (it == slotOf.end()) fail(i, "reads a value defined later or in a block");
        st.in.push_back(it->second);
        use(it->second, i);
      }
      for (const jit::Value* v : n->outputs()) {
        st.out.push_back(slot(v));
        use(st.out.back(), i);  // an output nothing reads is dropped at once
      }
      if (!n->blocks().empty()) fail(i, "has nested blocks (control flow); the profiler runs straight-line graphs");
      if (n->kind() == c10::prim::Constant) {
        st.kind = Step::Constant;
        std::optional<c10::IValue> value = jit::toIValue(n->output());
        if (!value) fail(i, "is a constant without a value");
        st.constant = std::move(*value);
      } else if (n->kind() == c10::prim::GetAttr) {
        st.kind = Step::GetAttr;
        st.attr = n->s(c10::attr::name);
      } else if (n->kind() == c10::prim::ListConstruct) {
        // List and tuple packing are instructions of TorchScript's
        // interpreter, not operators: done here as it does them.
        st.kind = Step::ListConstruct;
        st.elementType = n->output()->type()->expectRef<c10::ListType>().getElementType();
      } else if (n->kind() == c10::prim::TupleConstruct) {
        st.kind = Step::TupleConstruct;
      } else if (n->kind() == c10::prim::ListUnpack || n->kind() == c10::prim::TupleUnpack) {
        st.kind = Step::Unpack;
      } else {
        if (!n->maybeOperator()) fail(i, "has no operator to run");
        st.op = n->getOperation();
      }
      steps_.push_back(std::move(st));
    }
    for (const jit::Value* v : pm.graph->outputs()) {
      auto it = slotOf.find(v);
      if (it == slotOf.end()) fail(pm.nodes.size(), "returns a value no node defines");
      results_.push_back(it->second);
      use(it->second, SIZE_MAX - 1);  // never dropped
    }
    lastUse.resize(slotOf.size(), SIZE_MAX);
    for (size_t s = 0; s < lastUse.size(); ++s)
      if (lastUse[s] < steps_.size()) steps_[lastUse[s]].drop.push_back(s);
    slots_.resize(slotOf.size());
  }

  // One pass over the graph. With `times`, appends each range's time (ms)
  // to times[range]; `sync` waits for the device before each clock read.
  c10::IValue run(const std::vector<c10::IValue>& args, std::vector<std::vector<double>>* times,
                  const std::function<void()>& sync) {
    if (args.size() != inputs_.size())
      internal(SIZE_MAX, "takes " + std::to_string(inputs_.size()) + " values with self, given " + std::to_string(args.size()));
    for (size_t k = 0; k < args.size(); ++k) slots_[inputs_[k]] = args[k];
    size_t pos = 0;
    for (size_t r = 0; r < pm_.ranges.size(); ++r) {
      const auto& range = pm_.ranges[r];
      runSteps(pos, range.begin);
      Clock::time_point t0;
      if (times) {
        sync();
        t0 = Clock::now();
      }
      runSteps(range.begin, range.end);
      if (times) {
        sync();
        (*times)[r].push_back(msBetween(t0, Clock::now()));
      }
      pos = range.end;
    }
    runSteps(pos, steps_.size());
    c10::IValue out = slots_[results_.at(0)];
    std::fill(slots_.begin(), slots_.end(), c10::IValue());
    return out;
  }

 private:
  struct Step {
    enum Kind { Constant, GetAttr, ListConstruct, TupleConstruct, Unpack, Op } kind = Op;
    std::vector<size_t> in, out, drop;
    c10::IValue constant;
    std::string attr;
    c10::TypePtr elementType;  // ListConstruct
    jit::Operation op{nullptr};
  };

  // "node 'NAME': jit node KIND": the program node that jit node i came from, if any.
  std::string where(size_t i) const {
    if (i >= pm_.nodes.size()) return "forward graph";
    std::string w = "jit node " + std::string(pm_.nodes[i]->kind().toQualString());
    if (const auto* r = i < ownerOf_.size() ? ownerOf_[i] : nullptr) w = "node '" + r->name + "': " + w;
    return w;
  }

  [[noreturn]] void fail(size_t i, const std::string& why) const {
    throw Error(ErrorKind::InvalidInput, file_, where(i), why);
  }
  [[noreturn]] void internal(size_t i, const std::string& why) const {
    throw Error(ErrorKind::Internal, file_, where(i), why);
  }

  void runSteps(size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      Step& st = steps_[i];
      switch (st.kind) {
        case Step::Constant: slots_[st.out[0]] = st.constant; break;
        case Step::GetAttr: slots_[st.out[0]] = slots_[st.in[0]].toObjectRef().getAttr(st.attr); break;
        case Step::ListConstruct: {
          c10::impl::GenericList list(st.elementType);
          list.reserve(st.in.size());
          for (size_t s : st.in) list.push_back(slots_[s]);
          slots_[st.out[0]] = std::move(list);
          break;
        }
        case Step::TupleConstruct: {
          std::vector<c10::IValue> items;
          for (size_t s : st.in) items.push_back(slots_[s]);
          slots_[st.out[0]] = c10::ivalue::Tuple::create(std::move(items));
          break;
        }
        case Step::Unpack: {
          const c10::IValue& whole = slots_[st.in[0]];
          c10::ArrayRef<c10::IValue> items = whole.isTuple() ? whole.toTupleRef().elements() : whole.toListRef();
          if (items.size() != st.out.size())
            internal(i, "unpacks " + std::to_string(items.size()) + " values into " + std::to_string(st.out.size()) +
                            " outputs");
          for (size_t k = 0; k < st.out.size(); ++k) slots_[st.out[k]] = items[k];
          break;
        }
        case Step::Op: {
          stack_.clear();
          for (size_t s : st.in) stack_.push_back(slots_[s]);
          try {
            st.op(stack_);
          } catch (const c10::Error& e) {
            internal(i, "failed: " + firstLine(e.what_without_backtrace()));
          }
          if (stack_.size() != st.out.size())
            internal(i, "left " + std::to_string(stack_.size()) + " values for " + std::to_string(st.out.size()) +
                            " outputs");
          for (size_t k = 0; k < st.out.size(); ++k) slots_[st.out[k]] = std::move(stack_[k]);
          break;
        }
      }
      for (size_t s : st.drop) slots_[s] = c10::IValue();
    }
  }

  const emit::ProfiledModule& pm_;
  std::string file_;
  std::vector<Step> steps_;
  std::vector<const emit::ProfiledModule::Range*> ownerOf_;  // per jit node
  std::vector<size_t> inputs_, results_;
  std::vector<c10::IValue> slots_;
  jit::Stack stack_;
};

std::vector<at::Tensor> tensorsOf(const c10::IValue& v, const std::string& what) {
  if (!v.isTuple()) internalError(what, std::string("returned a ") + v.tagKind() + ", expected a tuple");
  std::vector<at::Tensor> out;
  for (const auto& e : v.toTupleRef().elements()) {
    if (!e.isTensor()) internalError(what, std::string("returned a ") + e.tagKind() + " among its outputs");
    out.push_back(e.toTensor().to(at::kCPU));
  }
  return out;
}

}  // namespace

ProfileReport runProfile(const InferenceOptions& o, const std::string& profilePath) {
  const support::Destination out = profileDestination(profilePath, o.session, readPaths(o));
  support::checkDestination(out);  // before minutes of timing, not after
  Manifest m = openSplitDirectory(o.session.dir, o.session.expectManifestSha256).manifest;
  if (m.stages.size() != 1)
    throw Error(ErrorKind::InvalidInput, o.session.dir, "manifest",
                "lists " + std::to_string(m.stages.size()) + " stages; --profile times the nodes of a one-stage split "
                "(write one with `pipecut split MODEL --spec SPEC -o DIR`, SPEC holding {\"split_points\": {}})");
  DistEnv env = DistEnv::fromEnvironment();
  if (env.world > 1)
    invalidInput("WORLD_SIZE", "is " + std::to_string(env.world) + "; --profile runs in one process (start it without torchrun)");
  if (o.iterations < 1) invalidInput("--iterations", "must be at least 1");
  if (o.warmup < 0) invalidInput("--warmup", "must not be negative");
  const Stage& stage = m.stages[0];
  const StageFile* file = nullptr;
  for (const auto& f : stage.files)
    if (f.format == "pt2") file = &f;
  if (!file) invalidInput("stage 0", "has no .pt2 file (" + o.session.dir + "); split with --format pt2");
  if (o.session.verifyHashes) {
    StageFileCheck check;
    check.select = [](const Stage&, const StageFile& f) { return f.format == "pt2"; };
    check.sha256 = !o.session.expectManifestSha256.empty();  // a pin holds by SHA-256
    verifyStageFiles(o.session.dir, m, check);
  }
  c10::Device device = placeStages(m, o.session, 0, 1, 0).devices.at(0);
  setIntraOpThreads(o.session.threads, 1);  // one worker: every core unless told

  // Inputs first: a bad inputs file is named before the program is built.
  std::vector<at::Tensor> inputs;
  if (o.inputs.decodeStep) inputs = decodeStepInputs(m, o.session.dir, o.inputs.seed);
  else if (o.inputs.randomInputs) inputs = randomInputs(m, o.inputs.seed, o.inputs.batch > 0 ? o.inputs.batch : 2, 1, o.inputs.intHigh);
  else if (!o.inputs.inputsPath.empty()) inputs = loadInputs(o.inputs.inputsPath, m);
  else invalidInput("inputs", "give --inputs FILE, --random-inputs or (a KV-cache program) --decode-step");
  inputs = splitMicrobatches(inputs, m, 1).at(0);  // checks the exported shapes

  std::string path = o.session.dir + "/" + file->path;
  support::requireRegularFile(path, "a stage file");
  pt2::Package pkg = pt2::readPackage(path);
  StageWeights(m, o.session.dir, o.session.weights, /*copies=*/true).bindPackage(stage, pkg);
  emit::ProfiledModule pm;
  try {
    pm = emit::buildTorchScriptForProfile(pkg, std::filesystem::path(file->path).stem().string());
  } catch (const Error& e) {
    e.rethrowWithFile(path);
  }
  pm.module.to(device);
  // The kernels pipecut-run would run, so that --balance time weighs what runs.
  if (device.is_cpu() && resolveCpuMatmul(o.session.cpuMatmul, support::hostCpuVendor()) == CpuMatmul::OneDnn) {
    const size_t before = pm.nodes.size();
    if (routeLinearsToOneDnn(*pm.graph, pm.module._ivalue())) {
      // One call for one, and the shared arguments first (runtime/linear_kernels.h).
      pm.nodes.assign(pm.graph->nodes().begin(), pm.graph->nodes().end());
      const size_t added = pm.nodes.size() - before;
      for (auto& r : pm.ranges) r.begin += added, r.end += added;
    }
  }
  Interpreter interp(pm, path);

  std::vector<c10::IValue> args;  // self, then the stage inputs in manifest order
  args.emplace_back(pm.module._ivalue());
  for (const auto& in : stage.inputs) {
    if (in.source.kind != ValueSource::Kind::UserInput) internalError(o.session.dir, "a one-stage split reads another stage");
    args.emplace_back(inputs.at(in.source.userInput).to(device));
  }
  // State (a KV cache) comes last, as the emitter takes it: fresh tensors at
  // the manifest's initial values, updated in place by every run below as a
  // decode step updates its cache. Each run writes the same values at the
  // same positions, so the runs stay comparable bit for bit.
  std::vector<at::Tensor> initial = stateAttributes(pm.module, stage, path);
  for (size_t k = 0; k < initial.size(); ++k)
    args.emplace_back(stage.state[k].initial == "zeros" ? at::zeros_like(initial[k]) : initial[k].clone());
  std::vector<c10::IValue> forwardArgs(args.begin() + 1, args.end());
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };

  c10::InferenceMode inference;
  // The check uses forward's first call: the profiling executor runs that one
  // unoptimized, so no fusion has changed the rounding yet.
  std::vector<at::Tensor> want;
  try {
    want = tensorsOf(pm.module.forward(forwardArgs), "forward");
  } catch (const c10::Error& e) {
    internalError(path, "forward failed: " + firstLine(e.what_without_backtrace()));
  }
  Tolerance exact;
  exact.exact = true;
  Comparison c = compareOutputs(tensorsOf(interp.run(args, nullptr, sync), "the node-by-node run"), want, exact);
  if (!c.exact)
    internalError(path, "running the graph node by node does not give forward's outputs bit for bit: " + c.message);

  std::vector<std::vector<double>> times(pm.ranges.size());
  std::vector<double> forwardTimes;
  for (int it = 0; it < o.warmup + o.iterations; ++it) {
    bool measured = it >= o.warmup;
    auto timedForward = [&] {
      sync();
      auto t0 = Clock::now();
      pm.module.forward(forwardArgs);
      sync();
      if (measured) forwardTimes.push_back(msBetween(t0, Clock::now()));
    };
    // Alternate which side runs first, so that neither always finds the
    // caches the other left.
    if (it % 2) timedForward();
    interp.run(args, measured ? &times : nullptr, sync);
    if (!(it % 2)) timedForward();
  }

  ProfileReport r;
  r.path = profilePath;
  r.sourceModel = m.sourceModel;
  r.sourceSha256 = m.sourceSha256;
  r.sourceDirectorySha256 = m.sourceDirectorySha256;
  r.device = device.str();
  r.threads = at::get_num_threads();
  r.iterations = o.iterations;
  r.warmup = o.warmup;
  r.forwardMs = median(forwardTimes);
  for (size_t i = 0; i < pm.ranges.size(); ++i) {
    double ms = median(times[i]);
    r.nodes.push_back({pm.ranges[i].name, pm.ranges[i].module, ms});
    r.totalMs += ms;
  }
  if (device.is_cpu()) r.transfer = probeLoopbackTransfer();
  std::string text = profileJson(r);
  support::writeFileStaged(out, [&](const support::ByteSink& sink) { sink(text.data(), text.size()); });
  return r;
}

std::string profileJson(const ProfileReport& r) {
  nlohmann::ordered_json j;
  j["format"] = kProfileFormat;
  j["version"] = 1;
  j["source_model"] = r.sourceModel;
  j["source_sha256"] = r.sourceSha256;
  j["source_directory_sha256"] = r.sourceDirectorySha256;
  j["device"] = r.device;
  j["threads"] = r.threads;
  j["iterations"] = r.iterations;
  j["warmup"] = r.warmup;
  j["total_ms"] = r.totalMs;
  j["forward_ms"] = r.forwardMs;
  if (!r.transfer.method.empty())
    j["transfer"] = {{"method", r.transfer.method},
                     {"message_bytes", r.transfer.messageBytes},
                     {"send_ms_per_mib", r.transfer.sendMsPerMiB},
                     {"recv_ms_per_mib", r.transfer.recvMsPerMiB}};
  j["nodes"] = nlohmann::ordered_json::array();
  for (const auto& n : r.nodes) j["nodes"].push_back({{"name", n.name}, {"module", n.module}, {"ms", n.ms}});
  return j.dump(1) + "\n";
}

namespace {

std::vector<const NodeTime*> slowest(const ProfileReport& r, size_t k) {
  std::vector<const NodeTime*> v;
  for (const auto& n : r.nodes) v.push_back(&n);
  std::stable_sort(v.begin(), v.end(), [](const NodeTime* a, const NodeTime* b) { return a->ms > b->ms; });
  if (v.size() > k) v.resize(k);
  return v;
}

}  // namespace

std::string profileSummaryJson(const ProfileReport& r) {
  nlohmann::ordered_json j;
  j["profile"] = r.path;
  j["device"] = r.device;
  j["threads"] = r.threads;
  j["iterations"] = r.iterations;
  j["warmup"] = r.warmup;
  j["nodes"] = r.nodes.size();
  j["total_ms"] = r.totalMs;
  j["forward_ms"] = r.forwardMs;
  j["slowest"] = nlohmann::ordered_json::array();
  for (const NodeTime* n : slowest(r, 10)) j["slowest"].push_back({{"name", n->name}, {"module", n->module}, {"ms", n->ms}});
  return j.dump();
}

std::string profileText(const ProfileReport& r) {
  char buf[512];
  std::string s;
  std::snprintf(buf, sizeof buf, "%zu nodes on %s, %d thread%s, median of %d iterations after %d warmup: %s\n",
                r.nodes.size(), r.device.c_str(), r.threads, r.threads == 1 ? "" : "s", r.iterations, r.warmup,
                r.path.c_str());
  s += buf;
  std::snprintf(buf, sizeof buf, "sum of node times %.3f ms, forward() %.3f ms (%.0f%%)\n", r.totalMs, r.forwardMs,
                r.forwardMs > 0 ? 100 * r.totalMs / r.forwardMs : 0.0);
  s += buf;
  if (!r.transfer.method.empty()) {
    std::snprintf(buf, sizeof buf, "transfer (%s, %zu-byte messages): send %.3f ms/MiB, receive %.3f ms/MiB of CPU\n",
                  r.transfer.method.c_str(), r.transfer.messageBytes, r.transfer.sendMsPerMiB, r.transfer.recvMsPerMiB);
    s += buf;
  }
  for (const NodeTime* n : slowest(r, 10)) {
    std::snprintf(buf, sizeof buf, "  %9.4f ms %5.1f%%  %s%s%s\n", n->ms, r.totalMs > 0 ? 100 * n->ms / r.totalMs : 0.0,
                  n->name.c_str(), n->module.empty() ? "" : "  in ", n->module.c_str());
    s += buf;
  }
  return s;
}

}  // namespace pipecut::runtime
