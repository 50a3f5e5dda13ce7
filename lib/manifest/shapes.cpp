#include "manifest/shapes.h"

namespace pipecut {

ShapeBinder::ShapeBinder(const std::vector<SymbolRange>& ranges) {
  for (const SymbolRange& r : ranges) ranges_.emplace(r.symbol, r);
}

std::string ShapeBinder::bind(const std::string& name, const TensorSpec& spec, std::span<const int64_t> sizes) {
  if (sizes.size() != spec.shape.size())
    return "has " + std::to_string(sizes.size()) + " dimensions, the program takes " + std::to_string(spec.shape.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    const DimSpec& want = spec.shape[d];
    const int64_t got = sizes[d];
    const std::string dim = "dimension " + std::to_string(d);
    if (want.symbol.empty()) {
      if (got != want.size) return dim + " is " + std::to_string(got) + ", the program takes " + std::to_string(want.size);
      continue;
    }
    if (auto r = ranges_.find(want.symbol); r != ranges_.end()) {
      const SymbolRange& range = r->second;
      if (got < range.min)
        return dim + " is " + std::to_string(got) + ", below the exported minimum " + std::to_string(range.min) +
               " of " + want.symbol;
      if (range.max && got > *range.max)
        return dim + " is " + std::to_string(got) + ", above the exported maximum " + std::to_string(*range.max) +
               " of " + want.symbol;
    }
    auto [it, fresh] = bound_.try_emplace(want.symbol, Binding{got, dim + " of '" + name + "'"});
    if (!fresh && it->second.size != got)
      return dim + " is " + std::to_string(got) + ", but " + it->second.where + " is " + std::to_string(it->second.size) +
             " and the program has both as " + want.symbol;
  }
  return "";
}

}  // namespace pipecut
