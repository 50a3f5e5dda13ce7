#include "ir/module_paths.h"

#include <algorithm>

namespace pipecut::ir {

ModulePaths::ModulePaths() {
  paths_.emplace_back();
  parents_.push_back(kNone);
  ids_.emplace(std::string_view(paths_.back()), kRoot);
}

uint32_t ModulePaths::intern(std::string_view path) {
  if (auto it = ids_.find(path); it != ids_.end()) return it->second;
  if (static_cast<size_t>(std::count(path.begin(), path.end(), '.')) >= kMaxDepth) return kNone;
  // The longest interned ancestor, then the missing ones outward in: an id
  // is always larger than its parent's. Iterative: no recursion per level.
  std::vector<size_t> missing{path.size()};  // lengths of the prefixes to add, innermost first
  uint32_t parent = kRoot;
  for (size_t end = path.rfind('.'); end != std::string_view::npos; end = end ? path.rfind('.', end - 1) : std::string_view::npos) {
    if (auto it = ids_.find(path.substr(0, end)); it != ids_.end()) {
      parent = it->second;
      break;
    }
    missing.push_back(end);
    if (end == 0) break;
  }
  for (size_t k = missing.size(); k-- > 0;) {
    const auto id = static_cast<uint32_t>(paths_.size());
    paths_.emplace_back(path.substr(0, missing[k]));
    parents_.push_back(parent);
    ids_.emplace(std::string_view(paths_.back()), id);
    parent = id;
  }
  return parent;
}

uint32_t ModulePaths::internCall(std::string_view key, uint32_t path) {
  if (auto it = calls_.find(Call{path, key}); it != calls_.end()) return it->second;
  callKeys_.emplace_back(key);
  const auto id = static_cast<uint32_t>(calls_.size());
  calls_.emplace(Call{path, callKeys_.back()}, id);
  return id;
}

void ModulePaths::reserve(size_t paths) {
  ids_.reserve(paths);
  calls_.reserve(paths);
  parents_.reserve(paths);
}

std::optional<uint32_t> ModulePaths::find(std::string_view path) const {
  auto it = ids_.find(path);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace pipecut::ir
