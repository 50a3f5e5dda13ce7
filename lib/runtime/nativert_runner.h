#pragma once
// LibTorch's NativeRT (`torch::nativert::ModelRunnerHandle`), where the
// linked LibTorch has it: the `.pt2` stages of `--stage-format pt2`.
//
// The pip wheels of torch 2.11 to 2.14 build NativeRT in; torch 2.15's does
// not (its header still declares ModelRunnerHandle, but nothing defines it,
// and Python's torch._C._nativert is a stub). CMake links a probe to find
// out (PIPECUT_HAVE_NATIVERT) rather than guessing from the version; built
// without it, opening one is an error that says so (emit/libtorch_compat.h
// lists the differences between the torches pipecut builds against).
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

namespace pipecut::runtime {

// Whether this build's LibTorch has NativeRT.
bool haveNativeRt();

class NativeRtRunner {
 public:
  // The archive's model "model". Throws what LibTorch throws (c10::Error,
  // std::runtime_error) for a program it cannot load; pipecut::Error
  // (InvalidInput) naming `path` when this LibTorch has no NativeRT.
  static std::unique_ptr<NativeRtRunner> open(const std::string& path);
  virtual ~NativeRtRunner() = default;
  // Flat inputs in, flat outputs out (ModelRunnerHandle::runWithFlatInputsAndOutputs).
  virtual std::vector<c10::IValue> run(std::vector<c10::IValue> inputs) = 0;
};

}  // namespace pipecut::runtime
