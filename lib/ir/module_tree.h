#pragma once
// The module hierarchy recovered from nodes' nn_module_stack and the
// parameter FQNs: per module, node counts and parameter bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/node_hash_map.h>

#include "ir/ir.h"

namespace pipecut::ir {

struct ModuleInfo {
  std::string path;              // "" for the root
  std::string type;              // class name, when a node names it
  size_t ownNodes = 0;           // nodes whose innermost module is this one
  size_t totalNodes = 0;         // including submodules
  uint64_t ownParamBytes = 0;    // parameters and buffers registered directly here
  uint64_t totalParamBytes = 0;
  std::vector<std::string> children;  // in first-seen order
};

class ModuleTree {
 public:
  // `tensors`: (FQN, bytes) of every parameter and buffer.
  static ModuleTree build(const Program& p, const std::vector<std::pair<std::string_view, uint64_t>>& tensors);

  const ModuleInfo* find(const std::string& path) const;
  const ModuleInfo& root() const { return modules_.at(""); }
  // Unordered: ask by path, or walk from root() through `children` (in
  // first-seen order) or preorder().
  const auto& modules() const { return modules_; }
  // Preorder walk: (module, depth).
  std::vector<std::pair<const ModuleInfo*, int>> preorder() const;
  // Up to `n` existing module paths closest to `name` (edit distance), for "did you mean".
  std::vector<std::string> closest(const std::string& name, size_t n = 3) const;

 private:
  // (module, its parent) in order of creation: a parent before its children.
  using Created = std::vector<std::pair<ModuleInfo*, ModuleInfo*>>;
  // The module at `path`, made (with its missing ancestors, added to
  // `created`) if new. One hash of `path` when it exists.
  ModuleInfo& ensure(std::string_view path, Created& created);
  // Looked up by views (the FQNs' prefixes, the frames' paths) without
  // making a string per lookup. Spelled out: Debian's Abseil has its own
  // string_view, and its string hash takes no std::string_view.
  struct PathHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return absl::Hash<std::string_view>{}(s); }
  };
  struct PathEq {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };
  // Hashed, not ordered: a deep model has ~10 modules per layer, and an
  // ordered map's string comparisons (a cache miss each at 10^4 modules) made
  // building the tree the fastest-growing phase of a 10^5-node preview.
  // Node-based: a ModuleInfo's address is stable while the tree lives.
  absl::node_hash_map<std::string, ModuleInfo, PathHash, PathEq> modules_;
};

// "a.b.c" -> "a.b"; "a" -> ""
std::string parentPath(const std::string& path);
// Whether module path `path` is `module` or inside it ("" contains everything).
bool pathIn(const std::string& path, const std::string& module);

}  // namespace pipecut::ir
