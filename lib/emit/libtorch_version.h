#pragma once
// The LibTorch this binary links, for checks against artifacts made by
// another torch (pipecut compile's packages, the Python that makes them).
#include <string>

namespace pipecut::emit {

// "2.11.0": major.minor.patch, without a local tag (+cpu, +cu130).
std::string libtorchVersion();

// Whether that LibTorch has NativeRT (CMake's link probe,
// PIPECUT_HAVE_NATIVERT; runtime/nativert_runner.h says which wheels do).
bool libtorchHasNativeRt();

// torch.__version__ ("2.11.0+cu130") without its local tag ("2.11.0").
std::string publicVersion(const std::string& torchVersion);

}  // namespace pipecut::emit
