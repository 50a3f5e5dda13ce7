#include "manifest/shapes.h"

namespace pipecut {

ShapeBinder::ShapeBinder(const std::vector<SymbolRange>& ranges) {
  for (const SymbolRange& r : ranges) ranges_.emplace(r.symbol, r);
}

std::string ShapeBinder::bind(const std::string& name, const TensorSpec& spec, std::span<const int64_t> sizes) {
  if (sizes.size() != spec.shape.size())
    return "has " + std::to_string(sizes.size()) + " dimensions, the program takes " + std::to_string(spec.shape.size());
  // Runs once per stage input and micro-batch: messages are built only for a mismatch.
  for (size_t d = 0; d < sizes.size(); ++d) {
    const DimSpec& want = spec.shape[d];
    const int64_t got = sizes[d];
    auto is = [&] { return "dimension " + std::to_string(d) + " is " + std::to_string(got); };
    if (want.symbol.empty()) {
      if (got != want.size) return is() + ", the program takes " + std::to_string(want.size);
      continue;
    }
    if (auto r = ranges_.find(want.symbol); r != ranges_.end()) {
      const SymbolRange& range = r->second;
      if (got < range.min) return is() + ", below the exported minimum " + std::to_string(range.min) + " of " + want.symbol;
      if (range.max && got > *range.max)
        return is() + ", above the exported maximum " + std::to_string(*range.max) + " of " + want.symbol;
    }
    auto it = bound_.find(want.symbol);
    if (it == bound_.end()) {
      bound_.emplace(want.symbol, Binding{got, "dimension " + std::to_string(d) + " of '" + name + "'"});
    } else if (it->second.size != got) {
      return is() + ", but " + it->second.where + " is " + std::to_string(it->second.size) +
             " and the program has both as " + want.symbol;
    }
  }
  return "";
}

}  // namespace pipecut
