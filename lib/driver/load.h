#pragma once
// Reading a .pt2 and normalizing it: the one way `pipecut normalize` and
// `pipecut split` (and anything else that reads a program) prepare a graph.
#include <string>

#include "pt2/package.h"

namespace pipecut::driver {

struct LoadOptions {
  bool moduleContiguous = false;  // keep module calls together (split needs it)
  bool verifyEach = false;        // verify after every pass
};

// Reads `model`, runs the normalization pipeline (constants compared by their
// bytes when deduplicating attribute reads) and verifies the result. Errors
// name `model`.
pt2::Package loadNormalized(const std::string& model, const LoadOptions& options);

}  // namespace pipecut::driver
