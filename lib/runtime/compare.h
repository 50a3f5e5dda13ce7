#pragma once
// Outputs against reference outputs: what the chain check and
// `pipecut-run --check` both decide with.
//
// Two different claims are checked with this, and they must not be confused:
// - against the committed references (made by PyTorch, possibly on another
//   CPU whose kernels round differently) only closeness is meaningful, so the
//   default is a per-dtype tolerance;
// - a split against the same program unsplit, run by the same LibTorch on the
//   same machine, must agree bit for bit (`exact`).
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipecut::runtime {

struct Tolerance {
  // Unset: the default for the comparison dtype (see defaultTolerance).
  std::optional<double> atol, rtol;
  // Bitwise equality (NaN equals NaN with the same payload; -0 differs from +0).
  bool exact = false;
  // The reference's declared compute dtype ("bfloat16" when fp32 outputs were
  // computed through a bf16 region): the defaults follow it, not the output dtype.
  std::string computeDtype;
};

// torch.testing.assert_close's defaults per floating dtype (rtol, atol), and
// exact for integers and bools. For bf16/fp16 compute, atol is raised to 1e-3:
// outputs near zero come out of cancellations of values whose last bits differ
// by a reduced-precision ulp between CPUs.
std::pair<double, double> defaultTolerance(at::ScalarType dtype, const std::string& computeDtype);

struct Comparison {
  bool ok = true;          // every element within atol + rtol * |reference| (or bitwise, if exact)
  bool exact = true;       // every output bitwise equal
  double maxAbsError = 0;
  std::string message;     // the first mismatch
};

Comparison compareOutputs(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want,
                          const Tolerance& tolerance);

}  // namespace pipecut::runtime
