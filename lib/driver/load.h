#pragma once
// Reading a .pt2 and normalizing it: the one way `pipecut normalize` and
// `pipecut split` (and anything else that reads a program) prepare a graph.
#include <string>

#include "passes/pass_manager.h"
#include "pt2/package.h"

namespace pipecut::weights {
class WeightSource;
struct Binding;
}  // namespace pipecut::weights

namespace pipecut::driver {

struct LoadOptions {
  bool moduleContiguous = false;  // keep module calls together (split needs it)
  bool verifyEach = false;        // verify after every pass
  // Tensors bound from a checkpoint (weights/binding.h) as the program is
  // read, before normalization: deduplication compares their real bytes,
  // and dead code drops what no one needs before anything is required.
  const weights::WeightSource* weights = nullptr;
  weights::Binding* binding = nullptr;  // what binding did, when wanted
};

// How dedupe-attributes compares `pkg`'s lifted constants: one when stored,
// with equal tensor metadata and bytes, not pickled; keyed by byte size and
// XXH3-128, so that it compares only constants of one key. Sets both fields of
// `options`; they refer to `pkg`, which must outlive their use.
void compareConstantsByContent(const pt2::Package& pkg, passes::NormalizeOptions& options);

// Reads `model`, binds options.weights' tensors, runs the normalization
// pipeline (meta-device-to-cpu first for a meta export; constants compared by
// their bytes when deduplicating attribute reads) and verifies the result.
// Errors name `model`.
pt2::Package loadNormalized(const std::string& model, const LoadOptions& options);

}  // namespace pipecut::driver
