#pragma once
// Outputs against reference outputs: what the chain check and
// `pipecut-run --check` both decide with.
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipecut::runtime {

struct Comparison {
  bool ok = true;          // every element within atol + rtol * |reference|
  bool exact = true;       // every output bitwise equal
  double maxAbsError = 0;
  std::string message;     // the first mismatch
};

Comparison compareOutputs(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want, double atol,
                          double rtol);

}  // namespace pipecut::runtime
