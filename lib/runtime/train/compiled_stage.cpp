#include "runtime/train/compiled_stage.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "emit/libtorch_version.h"
#include "emit/stored_tensors.h"
#include "pt2/package.h"
#include "runtime/aoti_package.h"
#include "runtime/stage_weights.h"
#include "support/error.h"

namespace pipecut::runtime {

namespace {

namespace fs = std::filesystem;

// A value a program reads or writes (compiled_stage.h lists the spellings).
struct Ref {
  enum class Kind { Param, Buffer, Input, Rng, Tangent, Output, Saved, Live, GradInput, Grad } kind = Kind::Input;
  uint32_t index = 0;  // Input, Rng (0: the micro-batch's seed), Tangent, Output, Saved, Live, GradInput
  std::string name;    // Param, Buffer, Grad
};

struct Program {
  std::string name;  // F, I, W or B
  std::string path;
  std::unique_ptr<AotiPackage> package;
  std::vector<Ref> inputs, outputs;
  bool reads(Ref::Kind kind, uint32_t index) const {
    return std::any_of(inputs.begin(), inputs.end(), [&](const Ref& r) { return r.kind == kind && r.index == index; });
  }
  bool returns(Ref::Kind kind) const {
    return std::any_of(outputs.begin(), outputs.end(), [&](const Ref& r) { return r.kind == kind; });
  }
};

Ref parseRef(const std::string& text, const std::string& path, const std::string& where) {
  static const std::map<std::string, Ref::Kind> kinds = {
      {"param", Ref::Kind::Param},   {"buffer", Ref::Kind::Buffer}, {"input", Ref::Kind::Input}, {"rng", Ref::Kind::Rng},
      {"tangent", Ref::Kind::Tangent}, {"output", Ref::Kind::Output}, {"saved", Ref::Kind::Saved},
      {"live", Ref::Kind::Live},     {"grad_input", Ref::Kind::GradInput}, {"grad", Ref::Kind::Grad}};
  const auto colon = text.find(':');
  auto kind = colon == std::string::npos ? kinds.end() : kinds.find(text.substr(0, colon));
  if (kind == kinds.end())
    throw Error(ErrorKind::InvalidInput, path, where, "'" + text + "' is not a value of a training program; compile it again");
  Ref r;
  r.kind = kind->second;
  const std::string rest = text.substr(colon + 1);
  if (r.kind == Ref::Kind::Param || r.kind == Ref::Kind::Buffer || r.kind == Ref::Kind::Grad) {
    r.name = rest;
    return r;
  }
  if (rest.empty() || rest.size() > 9 || rest.find_first_not_of("0123456789") != std::string::npos)
    throw Error(ErrorKind::InvalidInput, path, where, "'" + text + "' is not a value of a training program; compile it again");
  r.index = static_cast<uint32_t>(std::stoul(rest));
  return r;
}

class CompiledStage final : public StageCompute {
 public:
  CompiledStage(const Stage& info, c10::Device device, std::map<std::string, Program> programs, TrainableStage& train,
                std::map<std::string, at::Tensor> others)
      : info_(info), device_(device), train_(train), others_(std::move(others)) {
    f_ = std::move(programs.at("F"));
    if (programs.count("B")) b_ = std::move(programs.at("B"));
    if (programs.count("I") && programs.count("W")) i_ = std::move(programs.at("I")), w_ = std::move(programs.at("W"));
    for (size_t i = 0; i < train_.params.size(); ++i) paramIndex_[train_.paramNames[i]] = i;
    for (size_t i = 0; i < train_.buffers.size(); ++i) others_[train_.bufferNames[i]] = train_.buffers[i];
    for (const Program* p : backwardPrograms())
      for (const Ref& r : p->inputs)
        if (r.kind == Ref::Kind::Tangent) tangents_.insert(r.index);
    for (const Program* p : {&f_, &i_, &w_, &b_}) readsSeed_ = readsSeed_ || p->reads(Ref::Kind::Rng, 0);
  }

  std::vector<at::Tensor> forward(uint32_t mb, std::vector<at::Tensor> inputs, const std::vector<bool>&, int64_t seed) override {
    Live live;
    live.inputs = std::move(inputs);
    // The seed is a tensor on the stage's device, as the programs' other
    // inputs: F and a backward program recomputing a random op read the same.
    if (readsSeed_) live.rng = {at::scalar_tensor(seed, at::TensorOptions().dtype(at::kLong).device(device_))};
    std::vector<at::Tensor> results = run(f_, live);
    for (size_t o = 0; o < f_.outputs.size(); ++o) {
      const Ref& r = f_.outputs[o];
      if (r.kind == Ref::Kind::Output) put(live.outputs, r.index, results[o]);
      else put(live.saved, r.index, results[o]);
    }
    for (const at::Tensor& t : live.outputs) live.outputShapes.push_back({t.sizes().vec(), t.options()});
    std::vector<at::Tensor> outputs = std::move(live.outputs);
    live.outputs.clear();
    // What no backward program reads goes now.
    keepOnly(live, backwardPrograms());
    mostSaved_ = std::max(mostSaved_, bytesOf(live));
    live_[mb] = std::move(live);
    return outputs;
  }

  bool takesGradient(uint32_t, uint32_t output) const override { return tangents_.count(output) > 0; }

  std::vector<at::Tensor> backward(uint32_t mb, std::vector<at::Tensor> outGrads, bool weightsToo) override {
    Live& live = live_.at(mb);
    for (uint32_t o : tangents_) {
      at::Tensor g = o < outGrads.size() ? outGrads[o] : at::Tensor();
      if (!g.defined()) g = at::zeros(live.outputShapes.at(o).first, live.outputShapes.at(o).second);
      put(live.tangents, o, g);
    }
    std::vector<at::Tensor> inGrads(info_.inputs.size());
    // B (I and W as one program: nothing handed from one to the other)
    // where the schedule runs W at once, or where the stage has no I.
    if (b_.package && (weightsToo || !i_.package)) {
      if (!weightsToo && !b_.returns(Ref::Kind::GradInput)) return inGrads;  // the first stage's I: W runs B
      finish(mb, b_, &inGrads);
      return inGrads;
    }
    std::vector<at::Tensor> results = run(i_, live);
    for (size_t o = 0; o < i_.outputs.size(); ++o) {
      const Ref& r = i_.outputs[o];
      if (r.kind == Ref::Kind::GradInput) inGrads.at(r.index) = results[o];
      else put(live.live, r.index, results[o]);
    }
    keepOnly(live, {&w_});
    mostForWeights_ = std::max(mostForWeights_, bytesOf(live));
    if (weightsToo) weights(mb);
    return inGrads;
  }

  void weights(uint32_t mb) override {
    if (!live_.count(mb)) return;  // B ran at I
    finish(mb, i_.package ? w_ : b_, nullptr);
  }

  int64_t savedActivationBytes() const override { return static_cast<int64_t>(mostSaved_); }
  int64_t heldForWeightsBytes() const override { return static_cast<int64_t>(mostForWeights_); }

  // Checks, once, that every reference resolves (the stage holds each named
  // tensor; gradients only of parameters; indices within the stage).
  void check(const std::string& dir) const {
    for (const Program* p : {&f_, &i_, &w_, &b_}) {
      if (!p->package) continue;
      auto bad = [&](const std::string& what) {
        throw Error(ErrorKind::InvalidInput, p->path, "program " + p->name, what + "; compile the stage again (" + dir + ")");
      };
      for (const Ref& r : p->inputs) {
        if (r.kind == Ref::Kind::Param && !paramIndex_.count(r.name)) bad("reads parameter '" + r.name + "', which the stage does not train");
        if (r.kind == Ref::Kind::Buffer && !others_.count(r.name)) bad("reads '" + r.name + "', which the stage does not hold");
        if ((r.kind == Ref::Kind::Input && r.index >= info_.inputs.size()) ||
            (r.kind == Ref::Kind::Tangent && r.index >= info_.outputs.size()) || (r.kind == Ref::Kind::Rng && r.index != 0))
          bad("reads a value the stage does not have");
      }
      for (const Ref& r : p->outputs) {
        if (r.kind == Ref::Kind::Grad && !paramIndex_.count(r.name)) bad("returns the gradient of '" + r.name + "', which the stage does not train");
        if ((r.kind == Ref::Kind::Output && r.index >= info_.outputs.size()) ||
            (r.kind == Ref::Kind::GradInput && r.index >= info_.inputs.size()))
          bad("returns a value the stage does not have");
      }
    }
  }

 private:
  struct Live {
    std::vector<at::Tensor> inputs, rng, outputs, saved, live, tangents;
    std::vector<std::pair<std::vector<int64_t>, at::TensorOptions>> outputShapes;
  };

  static void put(std::vector<at::Tensor>& v, uint32_t i, at::Tensor t) {
    if (v.size() <= i) v.resize(i + 1);
    v[i] = std::move(t);
  }

  const at::Tensor& value(const Live& live, const Ref& r, const Program& p) const {
    const std::vector<at::Tensor>* from = nullptr;
    switch (r.kind) {
      case Ref::Kind::Param: return train_.params[paramIndex_.at(r.name)];
      case Ref::Kind::Buffer: return others_.at(r.name);
      case Ref::Kind::Input: from = &live.inputs; break;
      case Ref::Kind::Rng: from = &live.rng; break;
      case Ref::Kind::Tangent: from = &live.tangents; break;
      case Ref::Kind::Saved: from = &live.saved; break;
      case Ref::Kind::Live: from = &live.live; break;
      default: break;
    }
    if (!from || r.index >= from->size() || !(*from)[r.index].defined())
      throw Error(ErrorKind::InvalidInput, p.path, "program " + p.name, "reads a value no earlier program made; compile the stage again");
    return (*from)[r.index];
  }

  std::vector<at::Tensor> run(const Program& p, const Live& live) const {
    // A CPU package's kernels take OpenMP's thread count of the calling
    // thread: this worker's, as the thread policy set it (as inference's
    // packages, runtime/stage_program.cpp).
    at::init_num_threads();
    std::vector<at::Tensor> args;
    args.reserve(p.inputs.size());
    for (const Ref& r : p.inputs) {
      // Plain tensors (the package neither records nor needs autograd's
      // view of a parameter), read from their storage's start with the
      // strides they were compiled for: contiguous. A value one program
      // returns may be a view that another would misread (AOTInductor
      // checks neither offset nor strides).
      at::Tensor t = value(live, r, p).detach();
      if (t.storage_offset() != 0 || !t.is_contiguous()) t = t.clone(at::MemoryFormat::Contiguous);
      args.push_back(std::move(t));
    }
    std::vector<at::Tensor> out;
    try {
      out = p.package->run(std::move(args));
    } catch (const c10::OutOfMemoryError& e) {
      throw Error(ErrorKind::Environment, p.path, "stage " + std::to_string(info_.index) + " program " + p.name,
                  e.what_without_backtrace());
    } catch (const c10::Error& e) {
      throw Error(ErrorKind::InvalidInput, p.path, "stage " + std::to_string(info_.index) + " program " + p.name,
                  e.what_without_backtrace());
    }
    if (out.size() != p.outputs.size())
      throw Error(ErrorKind::InvalidInput, p.path, "program " + p.name,
                  "returned " + std::to_string(out.size()) + " values, its signature lists " + std::to_string(p.outputs.size()));
    return out;
  }

  std::vector<const Program*> backwardPrograms() const {
    std::vector<const Program*> out;
    for (const Program* p : {&i_, &w_, &b_})
      if (p->package) out.push_back(p);
    return out;
  }

  // Runs W or B for micro-batch mb: parameter gradients accumulate (as
  // AccumulateGrad would), input gradients (B) go to inGrads; then nothing
  // of mb is held.
  void finish(uint32_t mb, const Program& p, std::vector<at::Tensor>* inGrads) {
    std::vector<at::Tensor> results = run(p, live_.at(mb));
    at::NoGradGuard noGrad;
    for (size_t o = 0; o < p.outputs.size(); ++o) {
      const Ref& r = p.outputs[o];
      if (r.kind == Ref::Kind::GradInput) {
        if (inGrads) inGrads->at(r.index) = std::move(results[o]);
        continue;
      }
      at::Tensor& acc = train_.params[paramIndex_.at(r.name)].mutable_grad();
      if (acc.defined()) acc.add_(results[o]);
      else acc = std::move(results[o]);
    }
    live_.erase(mb);
  }

  // Drops the values of `live` that none of `later` reads.
  static void keepOnly(Live& live, const std::vector<const Program*>& later) {
    auto prune = [&](std::vector<at::Tensor>& v, Ref::Kind kind) {
      for (uint32_t i = 0; i < v.size(); ++i)
        if (std::none_of(later.begin(), later.end(), [&](const Program* p) { return p->reads(kind, i); })) v[i] = at::Tensor();
    };
    prune(live.inputs, Ref::Kind::Input);
    prune(live.rng, Ref::Kind::Rng);
    prune(live.saved, Ref::Kind::Saved);
    prune(live.live, Ref::Kind::Live);
    prune(live.tangents, Ref::Kind::Tangent);
  }

  static uint64_t bytesOf(const Live& live) {
    uint64_t bytes = 0;
    for (const auto* v : {&live.inputs, &live.rng, &live.saved, &live.live, &live.tangents})
      for (const at::Tensor& t : *v)
        if (t.defined()) bytes += t.nbytes();
    return bytes;
  }

  const Stage& info_;
  c10::Device device_;
  TrainableStage& train_;
  std::map<std::string, at::Tensor> others_;  // buffers and constants by FQN (persistent ones are train_'s)
  std::map<std::string, size_t> paramIndex_;
  Program f_, i_, w_, b_;
  std::set<uint32_t> tangents_;  // outputs whose gradient the backward reads
  std::map<uint32_t, Live> live_;
  uint64_t mostSaved_ = 0, mostForWeights_ = 0;
  bool readsSeed_ = false;  // the stage has random ops: a program reads rng:0
};

std::string deviceKind(c10::Device d) { return d.is_cuda() ? "cuda" : d.is_cpu() ? "cpu" : c10::DeviceTypeName(d.type(), true); }

}  // namespace

bool compiledStageReads(const Stage& info, const StageFile& file, const std::string& deviceType) {
  (void)info;
  return file.format == "pt2" || (file.format == "aoti-train" && file.compiled && file.compiled->device == deviceType);
}

std::unique_ptr<StageCompute> compiledStage(const std::string& dir, const Stage& info, c10::Device device,
                                            const StageWeights& weights, const OptimizerOptions& optimizer,
                                            TrainableStage& train) {
  const std::string kind = deviceKind(device);
  const std::string where = "stage " + std::to_string(info.index);
  std::map<std::string, const StageFile*> files;
  const StageFile* pt2 = nullptr;
  std::string recompute;
  for (const StageFile& f : info.files) {
    if (f.format == "pt2") pt2 = &f;
    if (f.format == "aoti-train" && f.compiled && f.compiled->device == kind) files[f.compiled->program] = &f;
  }
  const bool complete = files.count("F") && (files.count("B") || (files.count("I") && files.count("W")));
  if (!complete)
    throw Error(ErrorKind::InvalidInput, dir, where,
                "has no training programs for " + kind + " (--train --stage-format aoti runs what `pipecut compile " + dir +
                    " --train --device " + kind + "` writes)");
  if (!pt2) throw Error(ErrorKind::InvalidInput, dir, where, "has no .pt2 file to take its parameters from");
  std::map<std::string, Program> programs;
  for (const auto& [name, f] : files) {
    if (name != "F" && name != "I" && name != "W" && name != "B") continue;
    const std::string path = (fs::path(dir) / f->path).string();
    if (emit::publicVersion(f->compiled->torchVersion) != emit::libtorchVersion())
      throw Error(ErrorKind::InvalidInput, path, where,
                  "was compiled by torch " + f->compiled->torchVersion + ", this pipecut-run links LibTorch " +
                      emit::libtorchVersion() + "; compile it again with that torch");
    Program p;
    p.name = name;
    p.path = path;
    p.package = AotiPackage::load(path, device);
    auto meta = p.package->metadata().find("pipecut.train");
    if (meta == p.package->metadata().end())
      throw Error(ErrorKind::InvalidInput, path, where, "is not a training program (its metadata has no pipecut.train)");
    nlohmann::json sig;
    try {
      sig = nlohmann::json::parse(meta->second);
      if (sig.at("program").get<std::string>() != name) throw std::runtime_error("another program");
      for (const auto& r : sig.at("inputs")) p.inputs.push_back(parseRef(r.get<std::string>(), path, where));
      for (const auto& r : sig.at("outputs")) p.outputs.push_back(parseRef(r.get<std::string>(), path, where));
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(ErrorKind::InvalidInput, path, where, std::string("has a pipecut.train signature pipecut cannot read: ") + e.what());
    }
    programs[name] = std::move(p);
  }

  // The stage's tensors: bound from --weights, else the .pt2's; copies of
  // their own on the stage's device.
  const std::string pt2Path = (fs::path(dir) / pt2->path).string();
  const pt2::Package source = pt2::readPackage(pt2Path);
  const std::map<std::string, pt2::StoredTensor> bound = weights.binds() ? weights.bind(info) : std::map<std::string, pt2::StoredTensor>{};
  emit::StoredTensors stored;
  auto load = [&](const std::string& name) {
    auto b = bound.find(name);
    const pt2::StoredTensor* t = b != bound.end() ? &b->second : source.find(name);
    if (!t) throw Error(ErrorKind::InvalidInput, pt2Path, name, "is listed by the manifest for " + where + " but not in the file");
    at::Tensor v;
    try {
      v = stored.load(*t);
    } catch (const Error& e) {
      e.rethrowWithFile(pt2Path);
    }
    at::NoGradGuard noGrad;
    return v.detach().to(device).clone().contiguous();
  };
  std::vector<std::string> paramNames, bufferNames;
  std::vector<at::Tensor> params, buffers;
  std::map<std::string, at::Tensor> others;
  std::set<std::string> read;  // what the programs name
  for (const auto& [name, p] : programs)
    for (const Ref& r : p.inputs)
      if (r.kind == Ref::Kind::Param || r.kind == Ref::Kind::Buffer) read.insert(r.name);
  for (const StageParameter& sp : info.parameters) {
    if (sp.kind == "parameter") {
      paramNames.push_back(sp.name);
      params.push_back(load(sp.name).requires_grad_(true));
    } else if (sp.kind == "buffer") {
      bufferNames.push_back(sp.name);
      buffers.push_back(load(sp.name));
    } else if (read.count(sp.name)) {
      others[sp.name] = load(sp.name);
    }
  }
  train = trainableStage(std::move(paramNames), std::move(params), std::move(bufferNames), std::move(buffers), optimizer);
  auto stage = std::make_unique<CompiledStage>(info, device, std::move(programs), train, std::move(others));
  stage->check(dir);
  return stage;
}

}  // namespace pipecut::runtime
