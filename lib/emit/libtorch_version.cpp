#include "emit/libtorch_version.h"

#include <torch/headeronly/version.h>

namespace pipecut::emit {

std::string libtorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

bool libtorchHasNativeRt() { return PIPECUT_HAVE_NATIVERT != 0; }

std::string publicVersion(const std::string& v) { return v.substr(0, v.find('+')); }

}  // namespace pipecut::emit
