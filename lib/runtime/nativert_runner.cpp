#include "runtime/nativert_runner.h"

#if PIPECUT_HAVE_NATIVERT
#include <torch/nativert/ModelRunnerHandle.h>
#endif

#include "emit/libtorch_version.h"
#include "support/error.h"

namespace pipecut::runtime {

bool haveNativeRt() { return emit::libtorchHasNativeRt(); }

#if PIPECUT_HAVE_NATIVERT
namespace {

class Handle final : public NativeRtRunner {
 public:
  explicit Handle(const std::string& path) : handle_(path, "model") {}
  std::vector<c10::IValue> run(std::vector<c10::IValue> inputs) override {
    return handle_.runWithFlatInputsAndOutputs(std::move(inputs));
  }

 private:
  torch::nativert::ModelRunnerHandle handle_;
};

}  // namespace

std::unique_ptr<NativeRtRunner> NativeRtRunner::open(const std::string& path) { return std::make_unique<Handle>(path); }
#else
std::unique_ptr<NativeRtRunner> NativeRtRunner::open(const std::string& path) {
  throw Error(ErrorKind::InvalidInput, path, "",
              "this pipecut-run links LibTorch " + emit::libtorchVersion() +
                  ", built without NativeRT (torch 2.15's wheel has none): run the stages with --stage-format "
                  "torchscript or aoti, or build pipecut against torch 2.11 to 2.14");
}
#endif

}  // namespace pipecut::runtime
