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

std::string parentPath(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

ModuleInfo& ModuleTree::ensure(const std::string& path) {
  auto it = modules_.find(path);
  if (it != modules_.end()) return it->second;
  if (!path.empty()) {
    ModuleInfo& parent = ensure(parentPath(path));
    parent.children.push_back(path);
  }
  ModuleInfo& m = modules_[path];
  m.path = path;
  return m;
}

namespace {
// Real models nest a few dozen modules deep. The tree keeps every prefix of a
// path and walks it recursively, so a (malformed) path of thousands of
// segments would cost quadratic memory and deep recursion: refused.
constexpr size_t kMaxModuleDepth = 256;

// `where` makes the error's location, only when there is an error.
template <class Where>
void checkDepth(const std::string& path, Where&& where) {
  if (static_cast<size_t>(std::count(path.begin(), path.end(), '.')) >= kMaxModuleDepth)
    invalidInput(where(), "module path nested deeper than " + std::to_string(kMaxModuleDepth) + " levels");
}
}  // namespace

ModuleTree ModuleTree::build(const Program& p, const std::vector<std::pair<std::string, uint64_t>>& tensors) {
  ModuleTree t;
  // The nodes of one module call share one parsed stack (ir.h): each
  // distinct stack is looked up once, and its innermost module (a map entry,
  // whose address is stable) counts the nodes that share it.
  // Consecutive nodes mostly share their stack: the last one found skips
  // the lookup (a cache miss per node at 10^5 nodes).
  std::unordered_map<const std::vector<ModuleFrame>*, ModuleInfo*> innermost;
  // A deep model has about as many distinct stacks (module calls) as
  // modules, a few per ten nodes: room up front spares rehashing 10^4 entries.
  const size_t expected = p.graph.nodes.size() / 4 + 16;
  innermost.reserve(expected);
  t.modules_.reserve(expected);
  ModuleInfo* root = &t.ensure("");
  const std::vector<ModuleFrame>* lastStack = nullptr;
  ModuleInfo* lastOwn = nullptr;
  // The last new stack's frames, resolved: a new stack mostly shares its
  // outer frames with it (the same layer), found without hashing a path.
  const std::vector<ModuleFrame>* lastNew = nullptr;
  std::vector<ModuleInfo*> lastNewInfo;
  std::function<void(const Graph&)> walk = [&](const Graph& g) {
    for (const auto& n : g.nodes) {
      const std::vector<ModuleFrame>* stack = n->moduleStack.get();
      ModuleInfo* own = root;
      if (stack && stack == lastStack) {
        own = lastOwn;
      } else if (stack && !stack->empty()) {
        auto [it, first] = innermost.emplace(stack, nullptr);
        if (first) {
          std::vector<ModuleInfo*> info(stack->size());
          const size_t shared = lastNew ? sharedFrames(*lastNew, *stack) : 0;
          for (size_t k = 0; k < stack->size(); ++k) {
            const ModuleFrame& f = (*stack)[k];
            if (k < shared) {
              info[k] = lastNewInfo[k];
            } else {
              checkDepth(f.path, [&] { return "node '" + n->label() + "': nn_module_stack"; });
              info[k] = &t.ensure(f.path);
            }
            if (info[k]->type.empty()) info[k]->type = f.type;
          }
          it->second = info.back();
          lastNew = stack;
          lastNewInfo = std::move(info);
        }
        own = it->second;
        lastStack = stack;
        lastOwn = own;
      }
      own->ownNodes++;
      for (const Graph* sub : n->subgraphs()) walk(*sub);
    }
  };
  walk(p.graph);
  // A module's tensors come one after another (q_proj.weight, q_proj.bias):
  // the last parent found skips the map's string comparisons.
  std::string lastParent;
  ModuleInfo* lastModule = nullptr;
  for (const auto& [fqn, bytes] : tensors) {
    checkDepth(fqn, [&] { return "tensor '" + fqn.substr(0, 200) + "'"; });
    std::string parent = parentPath(fqn);
    if (!lastModule || parent != lastParent) {
      lastModule = &t.ensure(parent);
      lastParent = std::move(parent);
    }
    lastModule->ownParamBytes += bytes;
  }

  std::function<void(ModuleInfo&)> total = [&](ModuleInfo& m) {
    m.totalNodes = m.ownNodes;
    m.totalParamBytes = m.ownParamBytes;
    for (const auto& c : m.children) {
      ModuleInfo& child = t.modules_.at(c);
      total(child);
      m.totalNodes += child.totalNodes;
      m.totalParamBytes += child.totalParamBytes;
    }
  };
  total(t.modules_.at(""));
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
