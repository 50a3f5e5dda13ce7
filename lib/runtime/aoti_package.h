#pragma once
// An AOTInductor package (what pipecut compile writes) loaded to run one
// stage.
//
// Why not just LibTorch's AOTIModelPackageLoader: in torch 2.11 it extracts
// every file of the package into a fresh /tmp/XXXXXX (TMPDIR is not asked)
// and deletes it in its destructor. A CPU package carries its weights inside
// its library, so each start writes the whole stage again (2.1 GB for a
// 7B-shaped 4-layer split), and a run ended by a signal (torchrun's SIGTERM
// to the surviving ranks, a scheduler's cancel, Ctrl-C) never reaches the
// destructor: the copy stays in /tmp, run after run. On a tmpfs /tmp it is
// memory for as long as it stays.
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
// first call (a CUDA package compiled without embedding), weights kept
// outside the library (aot_inductor.package_constants_on_disk_format), the
// proxy executor's nodes or torchbind objects read beside the library.
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

namespace pipecut::runtime {

class AotiPackage {
 public:
  // Loads the package's model "model" for `device`. Throws pipecut::Error
  // naming `path`: Environment when the library cannot be written where it
  // goes (the directory named, and TMPDIR as the way to move it),
  // InvalidInput when AOTInductor refuses the package. LibTorch's own
  // exceptions from the loader are left to the caller.
  static std::unique_ptr<AotiPackage> load(const std::string& path, c10::Device device);
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
};

}  // namespace pipecut::runtime
