#pragma once
// The chain check: load a split's TorchScript stages, feed them exactly as the
// manifest says (user inputs and stage outputs to the stage inputs that name
// them), and compare the final outputs with reference outputs.
#include <string>

namespace pipecut::runtime {

struct ChainOptions {
  std::string device = "cpu";
  double atol = 1e-5;
};

struct ChainReport {
  size_t outputs = 0;
  double maxAbsError = 0;
  bool exact = true;     // every output bitwise equal to its reference
  bool ok = false;       // within atol
  std::string message;   // first mismatch, when !ok
};

// Throws pipecut::Error for unreadable directories, manifests or references.
ChainReport checkChain(const std::string& dir, const std::string& referencePath, const ChainOptions& options = {});

}  // namespace pipecut::runtime
