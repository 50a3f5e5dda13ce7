#include "runtime/stage_program.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <ATen/Parallel.h>

#include <nlohmann/json.hpp>

#include "emit/dtypes.h"
#include "emit/libtorch_version.h"
#include "runtime/aoti_package.h"
#include "runtime/attention_kernels.h"
#include "runtime/linear_kernels.h"
#include "runtime/nativert_runner.h"
#include "runtime/inputs.h"

#include "runtime/stage_failure.h"
#include "runtime/stage_weights.h"
#include "emit/stored_tensors.h"
#include "pt2/package.h"
#include "support/error.h"
#include "support/files.h"
#include "support/mapped_file.h"
#include "support/private_dir.h"
#include "support/host_cpu.h"
#include "support/parallel.h"
#include "support/zip_directory.h"

namespace pipecut::runtime {

StageFormat resolveStageFormat(const Stage& st, StageFormat f, c10::Device device, bool stateOutside) {
  if (f != StageFormat::Auto) return f;
  const std::string kind = device.is_cuda() ? "cuda" : "cpu";
  bool torchscript = false, pt2 = false;
  for (const auto& file : st.files) {
    if (file.format == "aoti" && file.compiled->device == kind) return StageFormat::Aoti;
    torchscript |= file.format == "torchscript";
    pt2 |= file.format == "pt2";
  }
  if (torchscript) return StageFormat::TorchScript;
  std::string why;
  if (!pt2) why = "no .pt2 file";
  else if (!device.is_cpu()) why = "a .pt2 file, which NativeRT runs on the CPU only, not " + device.str();
  else if (!haveNativeRt()) why = "a .pt2 file, but this LibTorch has no NativeRT";
  else if (stateOutside && !st.state.empty()) why = "a .pt2 file, whose state NativeRT keeps inside, where --generate cannot keep one per slot";
  else return StageFormat::Pt2;
  throw Error(ErrorKind::InvalidInput, "", "stage " + std::to_string(st.index),
              "--stage-format auto: it has no AOTInductor package for " + kind + " (pipecut compile DIR --device " + kind +
                  "), no TorchScript file" + (st.missing.empty() ? "" : " (" + st.missing.front().reason + ")") + ", and " + why);
}

const StageFile& stageFileOf(const Stage& st, StageFormat f, c10::Device device) {
  f = resolveStageFormat(st, f, device);
  const std::string stage = "stage " + std::to_string(st.index);
  if (f == StageFormat::Aoti) {
    const std::string kind = device.is_cuda() ? "cuda" : "cpu";
    std::string others;
    for (const auto& file : st.files)
      if (file.format == "aoti") {
        if (file.compiled->device == kind) return file;
        others += (others.empty() ? "" : ", ") + file.compiled->device;
      }
    if (st.supported == false)
      throw Error(ErrorKind::InvalidInput, "", stage,
                  "has no AOTInductor package for " + kind + ": split --support marked it unsupported (" +
                      st.unsupportedReason + "); --stage-format auto runs it in another format");
    throw Error(ErrorKind::InvalidInput, "", stage,
                "has no AOTInductor package for " + kind +
                    (others.empty() ? "" : " (only for " + others + ")") + "; run pipecut compile DIR --device " + kind);
  }
  for (const auto& file : st.files)
    if (file.format == stageFormatName(f)) return file;
  for (const auto& missing : st.missing)
    if (missing.format == stageFormatName(f))
      throw Error(ErrorKind::InvalidInput, "", stage,
                  std::string("has no ") + (f == StageFormat::Pt2 ? ".pt2" : "TorchScript (.pt)") +
                      " file, the format cannot express it (" + missing.reason + ")" +
                      (f == StageFormat::TorchScript ? "; run its .pt2 with --stage-format pt2" : ""));
  throw Error(ErrorKind::InvalidInput, "", stage,
              f == StageFormat::Pt2 ? "has no .pt2 file; split with --format pt2 (or both)"
                                    : "has no TorchScript (.pt) file; split with --format torchscript");
}

const StageFile* weightsSourceOf(const Stage& st, const StageFile& package) {
  if (!package.compiled) return nullptr;
  const CompiledPackage& c = *package.compiled;
  // The manifest's options are the package's (they are part of its key).
  if (!weightsLeftOut(c.options)) return nullptr;
  const std::string stage = "stage " + std::to_string(st.index);
  for (const auto& f : st.files)
    if (f.path == c.source && f.format == "pt2") {
      if (!c.sourceXxh3_128.empty() && !f.xxh3_128.empty() && c.sourceXxh3_128 != f.xxh3_128)
        throw Error(ErrorKind::InvalidInput, "", stage,
                    "its package " + package.path + " was compiled from another " + c.source +
                        " than the one here, whose weights it would take; compile it again (pipecut compile)");
      return &f;
    }
  // The manifest's reader refuses a package whose source is not a .pt2 of its stage.
  internalError(stage, "its package " + package.path + " names " + c.source + ", not a .pt2 file of the stage");
}

bool readsStageFile(const Stage& st, const StageFile& file, StageFormat f, c10::Device device) {
  f = resolveStageFormat(st, f, device);
  const StageFile& own = stageFileOf(st, f, device);
  return &file == &own || (f == StageFormat::Aoti && &file == weightsSourceOf(st, own));
}

namespace {

// The module's attribute at `fqn` replaced by `value`: a parameter stays a
// parameter, a buffer a buffer.
void setAttribute(torch::jit::Module& m, const std::string& fqn, const at::Tensor& value, bool parameter,
                  const std::string& path) {
  torch::jit::Module owner = m;
  size_t start = 0;
  for (size_t dot; (dot = fqn.find('.', start)) != std::string::npos; start = dot + 1) {
    const std::string part = fqn.substr(start, dot - start);
    if (!owner.hasattr(part)) throw Error(ErrorKind::InvalidInput, path, fqn, "the module holds no '" + fqn + "' to bind");
    owner = owner.attr(part).toModule();
  }
  const std::string leaf = fqn.substr(start);
  if (!owner.hasattr(leaf) || !owner.attr(leaf).isTensor())
    throw Error(ErrorKind::InvalidInput, path, fqn, "the module holds no tensor '" + fqn + "' to bind");
  if (parameter) owner.register_parameter(leaf, value, false);
  else owner.register_buffer(leaf, value);
}

// A TorchScript stage's stand-ins (emit/stored_tensors.h) replaced by the
// bound tensors, before anything reads the module's weights.
void bindModule(torch::jit::Module& m, const Stage& st, const StageWeights& weights, c10::Device device,
                const std::string& path) {
  emit::StoredTensors tensors(weights.copies() ? emit::StoredTensors::Bytes::Copied : emit::StoredTensors::Bytes::Mapped);
  for (const auto& [fqn, t] : weights.bind(st)) {
    at::Tensor value = tensors.load(t);
    if (!device.is_cpu()) value = value.to(device).detach().requires_grad_(value.requires_grad());
    setAttribute(m, fqn, value, t.isParam, path);
  }
}

// A stage's .pt2 with its external tensors bound, written for NativeRT to
// read (it opens a path) in a private directory under $TMPDIR (else /tmp),
// and removed when this goes: NativeRT reads the weights into memory of its
// own as it loads.
class BoundStageFile {
 public:
  BoundStageFile(const std::string& stagePath, const Stage& st, const StageWeights& weights)
      : dir_("pipecut-bound", "the bound stage file", stagePath) {
    pt2::Package pkg = pt2::readPackage(stagePath);
    weights.bindPackage(st, pkg);
    support::HashingWriter w(dir_.file("stage.pt2"), /*sha256=*/false);
    pt2::writePackage(pkg, [&](const void* data, size_t n) { return w.write(data, n); });
    w.finish();
  }
  std::string path() const { return dir_.path() + "/stage.pt2"; }

 private:
  support::PrivateDir dir_;  // removed, file and all, when this goes
};

// A package's initial state: the manifest's zeros, or the value
// scripts/aoti_compile.py put in its metadata ("pipecut.state.K").
void packageState(const Stage& st, const std::unordered_map<std::string, std::string>& metadata, c10::Device device,
                  const std::string& path, std::vector<at::Tensor>& values, std::vector<bool>& zeros) {
  for (size_t k = 0; k < st.state.size(); ++k) {
    const StageState& ss = st.state[k];
    const std::string where = "state[" + std::to_string(k) + "] '" + ss.name + "'";
    const auto dtype = emit::scalarTypeFromTorchName(ss.tensor.dtype);
    if (!dtype) throw Error(ErrorKind::InvalidInput, path, where, "unknown dtype '" + ss.tensor.dtype + "'");
    std::vector<int64_t> shape;
    for (const DimSpec& d : ss.tensor.shape) {
      if (!d.symbol.empty()) throw Error(ErrorKind::InvalidInput, path, where, "has a symbolic size; state is static");
      shape.push_back(d.size);
    }
    const auto opts = at::TensorOptions().dtype(*dtype).device(device);
    zeros.push_back(ss.initial == "zeros");
    if (zeros.back()) {
      values.push_back(at::zeros(shape, opts));
      continue;
    }
    auto it = metadata.find("pipecut.state." + std::to_string(k));
    if (it == metadata.end())
      throw Error(ErrorKind::InvalidInput, path, where, "the package carries no initial value for it; compile it again");
    nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
    const std::string hex = j.is_object() && j.contains("hex") && j["hex"].is_string() ? j["hex"].get<std::string>() : "";
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(*dtype));
    if (hex.size() != 2 * static_cast<size_t>(t.nbytes()))
      throw Error(ErrorKind::InvalidInput, path, where,
                  "the package's initial value is not " + std::to_string(t.nbytes()) + " bytes of " + ss.tensor.dtype);
    auto nibble = [&](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      throw Error(ErrorKind::InvalidInput, path, where, "the package's initial value is not hexadecimal");
    };
    auto* out = static_cast<uint8_t*>(t.data_ptr());
    for (size_t i = 0; i < hex.size(); i += 2) out[i / 2] = static_cast<uint8_t>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
    values.push_back(t.to(device));
  }
}

}  // namespace

StageProgram::StageProgram() = default;
StageProgram::StageProgram(StageProgram&&) noexcept = default;
StageProgram& StageProgram::operator=(StageProgram&&) noexcept = default;
StageProgram::~StageProgram() = default;

std::vector<StageProgram> StageProgram::loadAll(const std::string& dir, const std::vector<const Stage*>& stages,
                                               StageFormat f, const std::vector<c10::Device>& devices, CpuMatmul matmul,
                                               const StageWeights* weights) {
  std::vector<StageProgram> programs(stages.size());
  support::parallelFor(stages.size(), 0,
                       [&](size_t i) { programs[i] = load(dir, *stages[i], f, devices.at(i), matmul, weights); });
  return programs;
}

StageProgram StageProgram::load(const std::string& dir, const Stage& st, StageFormat f, c10::Device device,
                                CpuMatmul matmul, const StageWeights* weights) {
  f = resolveStageFormat(st, f, device);
  const StageFile& file = stageFileOf(st, f, device);
  const std::string path = dir + "/" + file.path;
  // A FIFO or a device in a stage file's place would have the loader wait
  // for a writer forever (--no-verify reads nothing before this).
  support::requireRegularFile(path, "a stage file");
  if (weights && !weights->binds()) weights = nullptr;
  StageProgram p;
  p.format_ = f;
  p.stage_ = st.index;
  if (f == StageFormat::Pt2 && !device.is_cpu())
    throw Error(ErrorKind::InvalidInput, path, "",
                "a .pt2 stage runs on the CPU (NativeRT here places no weights on " + device.str() +
                    "); use --stage-format torchscript for GPU stages");
  if (file.compiled && emit::publicVersion(file.compiled->torchVersion) != emit::libtorchVersion())
    throw Error(ErrorKind::InvalidInput, path, "stage " + std::to_string(st.index),
                "was compiled by torch " + file.compiled->torchVersion + ", this pipecut-run links LibTorch " +
                    emit::libtorchVersion() + "; compile it again (pipecut compile)");
  try {
    if (f == StageFormat::Aoti) {
      // One runner: each stage's calls come from one thread at a time.
      const StageFile* pt2File = weightsSourceOf(st, file);
      const std::string weightsPath = pt2File ? dir + "/" + pt2File->path : "";
      if (pt2File) support::requireRegularFile(weightsPath, "a stage file");
      // Names, dtypes and shapes are checked as the weights are bound; the
      // identity also catches another .pt2 of the same layout put in this
      // one's place, which --no-verify would not see (kilobytes to read).
      const std::string& compiledFrom = file.compiled->sourceDirectorySha256;
      if (pt2File && !compiledFrom.empty() && support::zipDirectorySha256(weightsPath) != compiledFrom)
        throw Error(ErrorKind::InvalidInput, weightsPath, "",
                    "is not the file " + file.path + " was compiled from (its records' CRC-32s differ), and the "
                    "package takes its weights from it; compile it again (pipecut compile)");
      std::map<std::string, pt2::StoredTensor> bound;
      if (weights) bound = weights->bind(st);
      p.aoti_ = AotiPackage::load(path, device, weightsPath, bound);
    } else if (f == StageFormat::TorchScript) {
      p.module_ = torch::jit::load(path, device);
      if (weights) bindModule(*p.module_, st, *weights, device, path);
      p.module_->eval();
      if (!device.is_cpu()) widenMaskedGroupedAttention(*p.module_);  // runtime/attention_kernels.h says why
      if (device.is_cpu() && resolveCpuMatmul(matmul, support::hostCpuVendor()) == CpuMatmul::OneDnn) p.oneDnnLinears_ = routeLinearsToOneDnn(*p.module_);
    } else if (weights) {
      // NativeRT reads a file: the stage's .pt2 with its tensors bound,
      // written where only this process can see it, read, and unlinked.
      BoundStageFile bound(path, st, *weights);
      p.nativert_ = NativeRtRunner::open(bound.path());
    } else {
      // The archive's one program is "model" (models/model.json).
      p.nativert_ = NativeRtRunner::open(path);
    }
  } catch (const c10::Error& e) {
    throw Error(ErrorKind::InvalidInput, path, "",
                std::string(f == StageFormat::Pt2 ? "NativeRT cannot load it: "
                            : f == StageFormat::Aoti ? "AOTInductor cannot load it: "
                                                     : "cannot load: ") +
                    firstLine(e.what_without_backtrace()));
  } catch (const Error&) {
    throw;  // a package's library that could not be written (runtime/aoti_package.h)
  } catch (const std::exception& e) {  // NativeRT and AOTInductor also throw std::runtime_error
    throw Error(ErrorKind::InvalidInput, path, "",
                std::string(f == StageFormat::Aoti ? "AOTInductor" : "NativeRT") + " cannot load it: " + firstLine(e.what()));
  }
  p.stateful_ = !st.state.empty();
  if (p.aoti_ && p.stateful_) packageState(st, p.aoti_->metadata(), device, path, p.initialState_, p.zeros_);
  if (p.module_) {
    p.initialState_ = stateAttributes(*p.module_, st, path);
    for (const StageState& ss : st.state) p.zeros_.push_back(ss.initial == "zeros");
  }
  return p;
}

std::vector<at::Tensor> stateAttributes(const torch::jit::Module& m, const Stage& st, const std::string& path) {
  std::vector<at::Tensor> out;
  for (size_t k = 0; k < st.state.size(); ++k) {
    const std::string& fqn = st.state[k].name;
    torch::jit::Module owner = m;
    size_t start = 0;
    for (size_t dot; (dot = fqn.find('.', start)) != std::string::npos; start = dot + 1) {
      std::string part = fqn.substr(start, dot - start);
      if (!owner.hasattr(part)) throw Error(ErrorKind::InvalidInput, path, "state[" + std::to_string(k) + "]", "the module holds no '" + fqn + "'");
      owner = owner.attr(part).toModule();
    }
    std::string leaf = fqn.substr(start);
    if (!owner.hasattr(leaf) || !owner.attr(leaf).isTensor())
      throw Error(ErrorKind::InvalidInput, path, "state[" + std::to_string(k) + "]", "the module holds no tensor '" + fqn + "'");
    out.push_back(owner.attr(leaf).toTensor());
  }
  return out;
}

std::vector<at::Tensor> StageProgram::newState() const {
  std::vector<at::Tensor> out;
  for (size_t k = 0; k < initialState_.size(); ++k)
    out.push_back(zeros_[k] ? at::zeros_like(initialState_[k]) : initialState_[k].clone());
  return out;
}

void StageProgram::resetState(std::vector<at::Tensor>& state) const {
  at::NoGradGuard noGrad;
  for (size_t k = 0; k < state.size() && k < initialState_.size(); ++k) {
    if (zeros_[k]) state[k].zero_();
    else state[k].copy_(initialState_[k]);
  }
}

std::vector<c10::IValue> StageProgram::forward(std::vector<c10::IValue> args, const std::vector<at::Tensor>& state) {
  if (state.size() != initialState_.size())
    internalError("stage " + std::to_string(stage_), std::to_string(state.size()) + " state tensors given, the stage has " +
                                                         std::to_string(initialState_.size()));
  for (const auto& t : state) args.emplace_back(t);
  return run(std::move(args));
}

std::vector<c10::IValue> StageProgram::forward(std::vector<c10::IValue> args) {
  // A TorchScript stage with state, called without: its own set (one sequence).
  if ((module_ || aoti_) && !initialState_.empty()) {
    if (ownState_.empty()) ownState_ = newState();
    for (const auto& t : ownState_) args.emplace_back(t);
  }
  return run(std::move(args));
}

std::vector<c10::IValue> StageProgram::run(std::vector<c10::IValue> args) {
  auto failed = [&](const std::string& text) {
    StageFailure f = parseStageFailure(text);
    std::string node = describeFailingNode(f);
    throw Error(ErrorKind::InvalidInput, "", "stage " + std::to_string(stage_) + (node.empty() ? "" : ": " + node),
                f.cause);
  };
  try {
    if (nativert_) return nativert_->run(std::move(args));
    if (aoti_) {
      // A CPU package's kernels take OpenMP's thread count of the calling
      // thread (pipecut compile builds them with cpp.dynamic_threads): this
      // stage thread's, as the thread policy set it.
      at::init_num_threads();
      std::vector<at::Tensor> inputs;
      inputs.reserve(args.size());
      for (size_t i = 0; i < args.size(); ++i) {
        if (!args[i].isTensor())
          throw Error(ErrorKind::InvalidInput, "", "stage " + std::to_string(stage_) + " input " + std::to_string(i),
                      "is a " + args[i].tagKind() + "; an AOTInductor package takes tensors");
        at::Tensor t = std::move(args[i]).toTensor();
        // A package reads an input from its storage's start with the strides
        // it was compiled for: a view elsewhere in a storage (llama_kv's two
        // positions, 0-d selects of one tensor) read its neighbour's value.
        if (t.storage_offset() != 0 || !t.is_contiguous()) t = t.clone(at::MemoryFormat::Contiguous);
        inputs.push_back(std::move(t));
      }
      std::vector<at::Tensor> outs = aoti_->run(std::move(inputs));
      return std::vector<c10::IValue>(std::make_move_iterator(outs.begin()), std::make_move_iterator(outs.end()));
    }
    c10::IValue out = module_->forward(args);
    const auto& elements = out.toTupleRef().elements();
    return std::vector<c10::IValue>(elements.begin(), elements.end());
  } catch (const c10::OutOfMemoryError& e) {
    throw Error(ErrorKind::Environment, "", "stage " + std::to_string(stage_), firstLine(e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    failed(e.what_without_backtrace());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // NativeRT's own std::runtime_error
    failed(e.what());
  }
  return {};
}

}  // namespace pipecut::runtime
