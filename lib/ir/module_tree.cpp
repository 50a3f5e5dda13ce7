#include "ir/module_tree.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "support/error.h"

namespace pipecut::ir {

bool pathIn(const std::string& p, const std::string& module) {
  if (module.empty()) return true;
  return p == module || (p.size() > module.size() && p.compare(0, module.size(), module) == 0 && p[module.size()] == '.');
}

namespace {
std::string_view parentOf(std::string_view path) {
  size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
}
}  // namespace

std::string parentPath(const std::string& path) { return std::string(parentOf(path)); }

ModuleInfo& ModuleTree::ensure(std::string_view path, Created& created) {
  if (auto it = modules_.find(path); it != modules_.end()) return it->second;
  ModuleInfo* parent = nullptr;
  if (!path.empty()) parent = &ensure(parentOf(path), created);
  ModuleInfo& m = modules_.try_emplace(std::string(path)).first->second;
  m.path = path;
  if (parent) parent->children.push_back(m.path);
  created.emplace_back(&m, parent);
  return m;
}

namespace {
// The tree keeps every prefix of a path and walks it recursively: a tensor
// FQN nested deeper than the reader lets a module path nest is refused.
constexpr size_t kMaxModuleDepth = ModulePaths::kMaxDepth;

// `where` makes the error's location, only when there is an error.
template <class Where>
void checkDepth(std::string_view path, Where&& where) {
  if (static_cast<size_t>(std::count(path.begin(), path.end(), '.')) >= kMaxModuleDepth)
    invalidInput(where(), "module path nested deeper than " + std::to_string(kMaxModuleDepth) + " levels");
}
}  // namespace

ModuleTree ModuleTree::build(const Program& p, const std::vector<std::pair<std::string_view, uint64_t>>& tensors) {
  ModuleTree t;
  // A deep model has about as many modules as module calls, a few per ten
  // nodes: room up front spares rehashing 10^4 entries.
  const size_t expected = p.graph.nodes.size() / 4 + 16;
  t.modules_.reserve(expected);
  Created created;
  created.reserve(expected);
  ModuleInfo* root = &t.ensure("", created);
  // Frames name their module by id (ir/module_paths.h): each module is
  // looked up by path once, when its id is first met, and then found in
  // this array.
  FrameTable table;
  std::vector<ModuleInfo*> byId;
  auto infoOf = [&](const ModuleFrame& f) -> ModuleInfo* {
    const ModulePaths& paths = table.of(f);
    if (byId.empty()) byId.assign(paths.size(), nullptr);
    ModuleInfo*& slot = byId[f.module];
    if (!slot) slot = &t.ensure(f.path, created);
    return slot;
  };
  // The nodes of one module call share one parsed stack (ir.h), and
  // consecutive nodes mostly share their call: the innermost module of the
  // last stack counts them without resolving its frames again.
  const std::vector<ModuleFrame>* lastStack = nullptr;
  ModuleInfo* lastOwn = nullptr;
  std::function<void(const Graph&)> walk = [&](const Graph& g) {
    for (const auto& n : g.nodes) {
      const std::vector<ModuleFrame>* stack = n->moduleStack.get();
      ModuleInfo* own = root;
      if (stack && stack == lastStack) {
        own = lastOwn;
      } else if (stack && !stack->empty()) {
        for (const ModuleFrame& f : *stack) {
          own = infoOf(f);
          if (own->type.empty()) own->type = f.type;
        }
        lastStack = stack;
        lastOwn = own;
      }
      own->ownNodes++;
      for (const Graph* sub : n->subgraphs()) walk(*sub);
    }
  };
  walk(p.graph);
  // A module's tensors come one after another (q_proj.weight, q_proj.bias):
  // the last parent found skips the map.
  std::string_view lastParent;
  ModuleInfo* lastModule = nullptr;
  for (const auto& tensor : tensors) {
    // Named, not a structured binding: clang before 16 (the fuzz build's
    // clang-14) cannot capture one in a lambda.
    const std::string_view fqn = tensor.first;
    const uint64_t bytes = tensor.second;
    checkDepth(fqn, [&] { return "tensor '" + std::string(fqn.substr(0, 200)) + "'"; });
    const std::string_view parent = parentOf(fqn);
    if (!lastModule || parent != lastParent) {
      lastModule = &t.ensure(parent, created);
      lastParent = parent;
    }
    lastModule->ownParamBytes += bytes;
  }

  // Totals: children after parents in `created` (ensure makes ancestors
  // first), so one backward sweep adds each module into its parent, found
  // by the address kept at creation instead of a lookup by path.
  for (auto [m, parent] : created) {
    m->totalNodes = m->ownNodes;
    m->totalParamBytes = m->ownParamBytes;
  }
  for (size_t i = created.size(); i-- > 0;)
    if (ModuleInfo* parent = created[i].second) {
      parent->totalNodes += created[i].first->totalNodes;
      parent->totalParamBytes += created[i].first->totalParamBytes;
    }
  return t;
}

const ModuleInfo* ModuleTree::find(const std::string& path) const {
  auto it = modules_.find(path);
  return it == modules_.end() ? nullptr : &it->second;
}

std::vector<std::pair<const ModuleInfo*, int>> ModuleTree::preorder() const {
  std::vector<std::pair<const ModuleInfo*, int>> out;
  std::function<void(const ModuleInfo&, int)> rec = [&](const ModuleInfo& m, int depth) {
    out.emplace_back(&m, depth);
    for (const auto& c : m.children) rec(modules_.at(c), depth + 1);
  };
  rec(root(), 0);
  return out;
}

std::vector<std::string> ModuleTree::closest(const std::string& name, size_t n) const {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& [path, m] : modules_)
    if (!path.empty()) scored.emplace_back(distance(name, path), path);
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < n; ++i) out.push_back(scored[i].second);
  return out;
}

}  // namespace pipecut::ir
