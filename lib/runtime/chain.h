#pragma once
// The chain check: load a split's TorchScript stages, feed them exactly as the
// manifest says (user inputs and stage outputs to the stage inputs that name
// them), and compare the final outputs with reference outputs and, bit for
// bit, with the same program unsplit (another split directory, typically the
// one-stage split of `{}`) run here by the same LibTorch.
#include <optional>
#include <string>

namespace pipecut::runtime {

struct ChainOptions {
  std::string device = "cpu";
  std::optional<double> atol, rtol;  // against the reference; unset: per-dtype defaults
  std::string wholeDir;              // the unsplit program as a split directory ("" = no bitwise check)
};

struct ChainReport {
  size_t outputs = 0;
  double maxAbsError = 0;            // against the reference
  bool ok = false;                   // within tolerance of the reference
  bool exact = true;                 // bitwise equal to the reference (only meaningful on its machine)
  std::optional<bool> matchesWhole;  // bitwise equal to the unsplit program's outputs, when wholeDir is given
  std::string message;               // first problem, when !ok or the whole differs
};

// Throws pipecut::Error for unreadable directories, manifests or references.
ChainReport checkChain(const std::string& dir, const std::string& referencePath, const ChainOptions& options = {});

}  // namespace pipecut::runtime
