#pragma once
// What runs one stage's forward: its TorchScript module (`.pt`, the default),
// its `.pt2` run by LibTorch's NativeRT (`pipecut-run --stage-format pt2`),
// or its AOTInductor package (`--stage-format aoti`, made by pipecut
// compile): compiled kernels, CPU or CUDA, inference only, the one format of
// the three not built on TorchScript's deprecated executor that runs on GPUs.
// NativeRT is LibTorch's own executor for exported programs: it runs what
// TorchScript cannot express (higher-order ops the emitter refuses), needs no
// TorchScript at all, and is inference only (no autograd: training and the
// profiler use TorchScript). Here it runs CPU stages; the weights the `.pt2`
// holds are CPU tensors and the handle LibTorch exposes places nothing.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/script.h>

#include "manifest/manifest.h"
#include "runtime/cpu_matmul.h"
#include "runtime/stage_format.h"

namespace pipecut::runtime {

class AotiPackage;
class NativeRtRunner;
class StageWeights;

// The format a stage runs in: `f` itself, or for StageFormat::Auto the best
// the stage has for `device`: its AOTInductor package for that device's
// kind, else its TorchScript file, else (on the CPU, where LibTorch has
// NativeRT, and not for `stateless` runs that keep state outside the stage:
// --generate) its .pt2 through NativeRT. Throws pipecut::Error
// (InvalidInput) naming the stage when it has none of them.
StageFormat resolveStageFormat(const Stage& st, StageFormat f, c10::Device device, bool stateOutside = false);

// The stage's file of that format (aoti: the package for `device`'s kind;
// auto: resolveStageFormat's).
// Throws pipecut::Error (InvalidInput) naming the stage when the split did not
// write one (or pipecut compile did not compile one for that device).
const StageFile& stageFileOf(const Stage& st, StageFormat f, c10::Device device = c10::kCPU);

// The .pt2 an AOTInductor package may take its weights from: the stage file
// it was compiled from, when it was compiled to leave them out of the library
// (aot_inductor.package_constants_in_so off, pipecut's default on the CPU;
// the package's metadata says whether it did: runtime/aoti_package.h);
// nullptr when it holds its own. Throws pipecut::Error
// (InvalidInput) naming the stage when that .pt2 is not the one the package
// was compiled from (the manifest's reader has checked that it is listed).
const StageFile* weightsSourceOf(const Stage& st, const StageFile& package);

// Whether loading the stage in format f reads `file`: its stage file, and the
// .pt2 whose weights its package takes. What pipecut-run hashes before it loads.
bool readsStageFile(const Stage& st, const StageFile& file, StageFormat f, c10::Device device);

class StageProgram {
 public:
  StageProgram();
  StageProgram(StageProgram&&) noexcept;
  StageProgram& operator=(StageProgram&&) noexcept;
  ~StageProgram();

  // Loads DIR/<the stage's file of format f> for `device`. Throws
  // pipecut::Error (InvalidInput) naming the file when LibTorch cannot load
  // it (NativeRT: an operator or higher-order op it does not know), when a
  // .pt2 stage is placed on anything but the CPU, and when a package was
  // compiled by a torch other than the LibTorch this binary links.
  // `matmul` says what runs a TorchScript stage's float32 linear layers on
  // the CPU (runtime/linear_kernels.h): OneDnn only for a stage that runs
  // without autograd; other formats and devices ignore it.
  // `weights`: a weightless split's tensors, bound as the stage loads
  // (runtime/stage_weights.h); nullptr or one that binds nothing for a
  // split that holds its weights.
  static StageProgram load(const std::string& dir, const Stage& st, StageFormat f, c10::Device device,
                           CpuMatmul matmul, const StageWeights* weights = nullptr);
  // Loads stages[i] for devices[i], for every i, side by side on the
  // machine's cores: a process holding several stages waits for the
  // slowest load, not their sum (a package's load writes and maps its whole
  // library). Result i is stages[i]'s program. When loads fail, the error
  // of the lowest i is thrown (support::parallelFor), so which one a run
  // reports does not depend on timing.
  static std::vector<StageProgram> loadAll(const std::string& dir, const std::vector<const Stage*>& stages,
                                           StageFormat f, const std::vector<c10::Device>& devices, CpuMatmul matmul,
                                           const StageWeights* weights = nullptr);

  StageFormat format() const { return format_; }
  // forward() in the manifest's argument order; results in its output order.
  // An operator that fails is an Error (InvalidInput) naming the stage, the
  // node and the cause (runtime/stage_failure.h); out of memory is
  // Environment. A stage with state (the manifest's Stage::state, a KV
  // cache) runs on the program's own: one sequence, carried from call to
  // call.
  std::vector<c10::IValue> forward(std::vector<c10::IValue> args);

  // State (TorchScript stages and AOTInductor packages: passed as trailing
  // arguments; pipecut compile builds packages that way). One set per
  // sequence group a runner keeps in flight (generation's slots): the
  // program updates the set it is given in place, so nothing is copied per
  // call. A .pt2 stage through NativeRT holds its state inside and takes
  // none: hasOwnStateOnly().
  size_t stateCount() const { return initialState_.size(); }
  bool hasOwnStateOnly() const { return nativert_ && stateful_; }
  // A fresh set, at the manifest's initial values, on the stage's device.
  std::vector<at::Tensor> newState() const;
  // Zeroes or restores `state` to the initial values in place (a slot's next sequence).
  void resetState(std::vector<at::Tensor>& state) const;
  std::vector<c10::IValue> forward(std::vector<c10::IValue> args, const std::vector<at::Tensor>& state);
  // How many linear calls run through oneDNN (runtime/linear_kernels.h).
  size_t oneDnnLinears() const { return oneDnnLinears_; }
  // The TorchScript module (nullptr for a .pt2 stage).
  torch::jit::Module* module() { return module_ ? &*module_ : nullptr; }

 private:
  std::vector<c10::IValue> run(std::vector<c10::IValue> args);
  StageFormat format_ = StageFormat::TorchScript;
  uint32_t stage_ = 0;
  std::optional<torch::jit::Module> module_;
  std::unique_ptr<NativeRtRunner> nativert_;
  std::unique_ptr<AotiPackage> aoti_;
  bool stateful_ = false;
  size_t oneDnnLinears_ = 0;
  // The module's attributes of the manifest's state names (a package:
  // zeros, or the value its metadata carries).
  std::vector<at::Tensor> initialState_;
  std::vector<bool> zeros_;               // initial "zeros"
  std::vector<at::Tensor> ownState_;      // what forward(args) passes: made on first use
};

// A TorchScript stage's state attributes (the manifest's Stage::state, in
// its order): the module's tensors at the state's FQNs, themselves, not
// copies. Throws Error (InvalidInput) naming `path` and the state entry when
// the module lacks one.
std::vector<at::Tensor> stateAttributes(const torch::jit::Module& m, const Stage& st, const std::string& path);

}  // namespace pipecut::runtime
