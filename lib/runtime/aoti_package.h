#pragma once
// An AOTInductor package (what pipecut compile writes) loaded to run one
// stage.
//
// Why not just LibTorch's AOTIModelPackageLoader: in torch 2.11 it extracts
// every file of the package into a fresh /tmp/XXXXXX (TMPDIR is not asked)
// and deletes it in its destructor. A package that carries its weights in
// its library (AOTInductor's default) has each start write the whole stage
// again (2.1 GB for a 7B-shaped 4-layer split), and a run ended by a signal
// (torchrun's SIGTERM to the surviving ranks, a scheduler's cancel, Ctrl-C)
// never reaches the destructor: the copy stays in /tmp, run after run. On a
// tmpfs /tmp it is memory for as long as it stays.
//
// Here a package's library is written to a private directory (0700) under
// $TMPDIR (else /tmp), loaded, and unlinked at once: a loaded library needs
// no name, and the kernel frees the file with the process's last mapping of
// it, so no way of ending the process, SIGKILL included, leaves anything
// behind. Only the library is written (the package's sources and metadata
// are read in place), by the kernel from file to file (copy_file_range).
// Loading takes as long as LibTorch's loader (4.4 s either way for the
// 7B-shaped split's four stages on the 2-core dev machine, perf stat -r 4,
// two alternations): both write the library once. The runner comes from
// LibTorch's registry for the device's type, as its loader takes it, so a
// CUDA package loads the same way where LibTorch has CUDA; pipecut compile
// --device cuda embeds the Triton kernels' binaries in the library
// (aot_inductor.embed_kernel_binary) so that the library is all it needs.
//
// A package that needs more than its library goes through LibTorch's loader
// as before: kernel binaries loaded from their directory at each kernel's
// first call (a CUDA package compiled without embedding), weights in files
// of the package's own (aot_inductor.package_constants_on_disk_format), the
// proxy executor's nodes or torchbind objects read beside the library.
//
// Weights from the stage's .pt2. pipecut compile leaves a CPU package's
// weights out of its library (aot_inductor.package_constants_in_so off):
// the stage's .pt2 beside it holds the same bytes, so the package is its
// kernels only (kilobytes to megabytes, not the stage's size again on disk
// and in the copy above), and its weights are the .pt2's bytes where they
// lie in the memory-mapped file, handed to the runner as user-managed
// constants: not copied, shared with the page cache, paged in as the kernels
// first read them. The runner names each constant by the FQN it had in the
// program it was compiled from (a stage with state: under "inner.", the
// wrapper aoti_compile.py exports; the package's "pipecut.weights_prefix"),
// and every one must be in the .pt2 with the dtype the kernels were built
// for. A package on a GPU gets a copy of each on the device. Which packages
// take them so is the package's own word (metadata "pipecut.weights":
// "stage"): pipecut compile keeps a program's weights inside when Inductor
// made constants of its own that no .pt2 holds (lifted tensor constants
// keep their FQNs, compiled as buffers), except runtime constant folding's
// `_FOLDED_CONST_*` where its metadata says "pipecut.folded_constants":
// "runtime" (the linear weights pipecut compile transposes): those the
// package computes from the handed weights when it first runs (AOTInductor
// folds after every update of the constants), once, into memory of its own.
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace torch::inductor {
class AOTIModelContainerRunner;
class AOTIModelPackageLoader;
}  // namespace torch::inductor

namespace pipecut::pt2 {
struct StoredTensor;
}

namespace pipecut::runtime {

class AotiPackage {
 public:
  // Loads the package's model "model" for `device`. Throws pipecut::Error
  // naming `path`: Environment when the library cannot be written where it
  // goes (the directory named, and TMPDIR as the way to move it),
  // InvalidInput when AOTInductor refuses the package. LibTorch's own
  // exceptions from the loader are left to the caller.
  // `weights`: the stage's .pt2, where a package that holds no weights takes
  // them from ("" when the manifest names none); a constant it lacks, or of
  // another dtype, is InvalidInput naming the constant and that file.
  // `bound`: a weightless split's tensors bound from a checkpoint
  // (runtime/stage_weights.h), by FQN, taken before the .pt2's own.
  static std::unique_ptr<AotiPackage> load(const std::string& path, c10::Device device, const std::string& weights = "",
                                           const std::map<std::string, pt2::StoredTensor>& bound = {});
  ~AotiPackage();

  // Runs the model; steals the inputs (AOTIModelContainerRunner::boxed_run).
  std::vector<at::Tensor> run(std::vector<at::Tensor>&& inputs);
  // The package's metadata (AOTI_DEVICE_KEY, and what pipecut compile put
  // there: "pipecut.state.K").
  const std::unordered_map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  AotiPackage() = default;
  std::unordered_map<std::string, std::string> metadata_;
  std::unique_ptr<torch::inductor::AOTIModelContainerRunner> runner_;  // the package's library, loaded here
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;    // anything else
  // Weights from the stage's .pt2, by the runner's constant names (the
  // loader's: by FQN). The runner holds them as user-managed: they live here.
  std::unordered_map<std::string, at::Tensor> constants_;
  void takeWeights(const std::string& path, const std::string& weights, c10::Device device,
                   const std::map<std::string, pt2::StoredTensor>& bound);
};

}  // namespace pipecut::runtime
