#pragma once
// The shapes a run feeds a stage, checked against the manifest before the
// stage sees them. A static dimension must match; a symbolic one must lie in
// its exported range (Manifest::symbols) and agree with every other dimension
// named by the same symbol in the same call. Without this, a dynamic program
// given sizes export did not allow computes garbage or fails deep inside an
// operator, far from the input that caused it.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "manifest/manifest.h"

namespace pipecut {

class ShapeBinder {
 public:
  explicit ShapeBinder(const std::vector<SymbolRange>& ranges);

  // Binds the sizes of the value `name` against `spec`. Returns what is wrong
  // ("dimension 0 is 1, below the exported minimum 2 of s72"), or "" when they
  // fit. Symbols bound by earlier calls stay bound until reset().
  std::string bind(const std::string& name, const TensorSpec& spec, std::span<const int64_t> sizes);
  void reset() { bound_.clear(); }

 private:
  struct Binding {
    int64_t size;
    std::string where;  // "dimension 0 of 'input_ids'"
  };
  std::map<std::string, SymbolRange, std::less<>> ranges_;
  std::map<std::string, Binding, std::less<>> bound_;
};

}  // namespace pipecut
