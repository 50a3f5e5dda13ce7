#include "ir/schedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <string>

#include <absl/container/flat_hash_map.h>


namespace pipecut::ir {

void numberNodes(const Graph& g) {
  for (size_t i = 0; i < g.nodes.size(); ++i) g.nodes[i]->number = i;
}

std::optional<size_t> positionIn(const Graph& g, const Node* n) {
  if (n && n->number < g.nodes.size() && g.nodes[n->number].get() == n) return n->number;
  return std::nullopt;
}

NodeEdges nodeEdges(const Graph& g) {
  numberNodes(g);
  const size_t n = g.nodes.size();
  NodeEdges e;
  e.depStart.assign(n + 1, 0);
  e.userStart.assign(n + 1, 0);
  // One walk over the inputs (the cache misses at 10^5 nodes); the rest is
  // sequential work on flat arrays.
  e.deps.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    g.nodes[i]->forEachInputValue([&](Value* v) {
      auto p = positionIn(g, v->producer);
      if (p && *p != i) {
        e.deps.push_back(*p);
        ++e.userStart[*p + 1];
      }
    });
    e.depStart[i + 1] = e.deps.size();
  }
  for (size_t i = 0; i < n; ++i) e.userStart[i + 1] += e.userStart[i];
  e.users.resize(e.deps.size());
  std::vector<size_t> cursor(e.userStart.begin(), e.userStart.end() - 1);
  for (size_t i = 0; i < n; ++i)
    for (size_t d : e.depsOf(i)) e.users[cursor[d]++] = i;
  return e;
}

bool isTopological(const NodeEdges& e) {
  for (size_t i = 0; i + 1 < e.depStart.size(); ++i)
    for (size_t d : e.depsOf(i))
      if (d > i) return false;
  return true;
}

namespace {

class EarliestFirst final : public ReadyQueue {
 public:
  void push(size_t node) override { heap_.push(node); }
  size_t pop(size_t) override {
    size_t n = heap_.top();
    heap_.pop();
    return n;
  }
  bool empty() const override { return heap_.empty(); }
  // After nodes 0..i, node i+1 is ready (topological) and the least of all.
  bool keepsTopologicalOrder() const override { return true; }

 private:
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> heap_;
};

// The module call stacks form a tree (a trie over calls: (key, path) frames). With
// the tree numbered in DFS order, "shares at least d frames with the last
// node" means "lies in the subtree of the last node's depth-d frame", a range
// of DFS numbers. So the policy walks up from the last node's frame and takes
// the earliest ready node in the first non-empty subtree: a range-minimum
// query over a segment tree whose leaves are DFS numbers.
class ModuleAffinity final : public ReadyQueue {
 public:
  explicit ModuleAffinity(const Graph& g) {
    // Trie nodes' children by (trie node, call id): calls are interned per
    // program (ir/module_paths.h), so a frame is found without comparing
    // its key and path strings.
    absl::flat_hash_map<uint64_t, size_t> child;
    std::vector<std::vector<size_t>> children(1);
    // A deep model has a module call per few nodes: room up front spares
    // rehashing 10^4 entries a dozen times, a cache miss each at 10^5 nodes.
    const size_t expected = g.nodes.size() / 4 + 16;
    child.reserve(expected);
    parent_.push_back(0);
    frameOf_.resize(g.nodes.size());
    FrameTable table;  // checks that the call ids below are of one table
    // The nodes of one module call share one parsed stack (ir.h): each
    // distinct stack walks the trie once, not each node.
    absl::flat_hash_map<const std::vector<ModuleFrame>*, size_t> frameOfStack;
    frameOfStack.reserve(expected);
    // A new stack mostly shares its outer frames with the last new one (the
    // same layer): those trie nodes are taken from it, without a lookup.
    const std::vector<ModuleFrame>* lastNew = nullptr;
    std::vector<size_t> lastNewNodes;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const std::vector<ModuleFrame>* stack = g.nodes[i]->moduleStack.get();
      if (!stack) continue;  // frame 0, the root
      auto [known, first] = frameOfStack.emplace(stack, 0);
      if (first) {
        const size_t shared = lastNew ? sharedFrames(*lastNew, *stack) : 0;
        std::vector<size_t> nodes(lastNewNodes.begin(), lastNewNodes.begin() + static_cast<std::ptrdiff_t>(shared));
        size_t t = shared ? nodes.back() : 0;
        for (size_t k = shared; k < stack->size(); ++k) {
          const ModuleFrame& f = (*stack)[k];
          table.of(f);
          auto [it, fresh] = child.try_emplace((static_cast<uint64_t>(t) << 32) | f.call, parent_.size());
          if (fresh) {
            children[t].push_back(it->second);
            children.emplace_back();
            parent_.push_back(t);
          }
          t = it->second;
          nodes.push_back(t);
        }
        known->second = t;
        lastNew = stack;
        lastNewNodes = std::move(nodes);
      }
      frameOf_[i] = known->second;
    }
    // DFS numbering (iterative: stacks can be deep).
    first_.resize(parent_.size());
    last_.resize(parent_.size());
    size_t counter = 0;
    // Siblings in any order: a subtree's range, and so the least ready node
    // in it, does not depend on it.
    std::vector<std::pair<size_t, bool>> stack{{0, false}};
    while (!stack.empty()) {
      auto [t, done] = stack.back();
      stack.pop_back();
      if (done) {
        last_[t] = counter - 1;
        continue;
      }
      first_[t] = counter++;
      stack.push_back({t, true});
      for (auto it = children[t].rbegin(); it != children[t].rend(); ++it) stack.push_back({*it, false});
    }
    size_ = 1;
    while (size_ < counter) size_ *= 2;
    tree_.assign(2 * size_, kNone);
    leaves_.resize(counter);
    contiguous_ = subtreesContiguous(g.nodes.size());
  }

  // Say nodes 0..i are placed in order and the order is topological. pop()
  // takes the least ready node of the first frame, walking up from node i's,
  // whose subtree has one. If every subtree's nodes hold one contiguous run
  // of positions, a subtree that still has nodes after i has i+1 (the run
  // goes on past i), which is ready and the least left: the order stays.
  // A module called twice (one frame, two runs) or interleaved calls break it.
  bool keepsTopologicalOrder() const override { return contiguous_; }

  void push(size_t node) override {
    size_t leaf = first_[frameOf_[node]];
    leaves_[leaf].push(node);
    update(leaf);
    ++count_;
  }

  size_t pop(size_t last) override {
    size_t frame = last == kNone ? 0 : frameOf_[last];
    while (true) {
      size_t best = query(first_[frame], last_[frame]);
      if (best != kNone || frame == 0) {
        size_t leaf = first_[frameOf_[best]];
        leaves_[leaf].pop();  // best is the least of all, so the least of its leaf
        update(leaf);
        --count_;
        return best;
      }
      frame = parent_[frame];
    }
  }

  bool empty() const override { return count_ == 0; }

 private:
  static constexpr size_t kNone = static_cast<size_t>(-1);

  // Whether each frame's subtree holds a contiguous run of node positions:
  // counts and extremes per frame, folded into parents (a frame is created
  // after its parent, so a backward sweep sees children first).
  bool subtreesContiguous(size_t nodes) const {
    const size_t frames = parent_.size();
    std::vector<size_t> count(frames, 0), lo(frames, kNone), hi(frames, 0);
    for (size_t i = 0; i < nodes; ++i) {
      const size_t f = frameOf_[i];
      ++count[f];
      lo[f] = std::min(lo[f], i);
      hi[f] = std::max(hi[f], i);
    }
    for (size_t f = frames; f-- > 1;) {
      if (count[f] && hi[f] - lo[f] + 1 != count[f]) return false;
      const size_t p = parent_[f];
      count[p] += count[f];
      lo[p] = std::min(lo[p], lo[f]);
      hi[p] = std::max(hi[p], hi[f]);
    }
    return true;  // the root's subtree is every node
  }

  void update(size_t leaf) {
    size_t k = leaf + size_;
    tree_[k] = leaves_[leaf].empty() ? kNone : leaves_[leaf].top();
    for (k /= 2; k >= 1; k /= 2) tree_[k] = std::min(tree_[2 * k], tree_[2 * k + 1]);
  }

  size_t query(size_t lo, size_t hi) const {  // inclusive range of leaves
    size_t best = kNone;
    for (size_t l = lo + size_, r = hi + size_ + 1; l < r; l /= 2, r /= 2) {
      if (l & 1) best = std::min(best, tree_[l++]);
      if (r & 1) best = std::min(best, tree_[--r]);
    }
    return best;
  }

  std::vector<size_t> parent_, frameOf_, first_, last_;
  // Ready nodes per frame, least position on top. pop() only ever removes
  // the least of all ready nodes in a range, hence the least of its leaf: a
  // heap suffices, with no allocation per push as a std::set has.
  std::vector<std::priority_queue<size_t, std::vector<size_t>, std::greater<>>> leaves_;
  std::vector<size_t> tree_;              // min position over each range of frames
  size_t size_ = 1, count_ = 0;
  bool contiguous_ = false;
};

}  // namespace

std::unique_ptr<ReadyQueue> earliestFirst() { return std::make_unique<EarliestFirst>(); }

std::unique_ptr<ReadyQueue> moduleAffinity(const Graph& g) {
  return std::make_unique<ModuleAffinity>(g);
}

std::vector<size_t> listSchedule(const Graph& g, ReadyQueue& ready, size_t* onCycle) {
  return listSchedule(nodeEdges(g), ready, onCycle);
}

std::vector<size_t> listSchedule(const NodeEdges& e, ReadyQueue& ready, size_t* onCycle) {
  const size_t n = e.depStart.size() - 1;
  if (ready.keepsTopologicalOrder() && isTopological(e)) {
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    return order;
  }
  std::vector<size_t> pending(n);
  for (size_t i = 0; i < n; ++i) pending[i] = e.depStart[i + 1] - e.depStart[i];
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (!pending[i]) ready.push(i);
  order.reserve(n);
  size_t last = ReadyQueue::kNone;
  while (!ready.empty()) {
    size_t node = ready.pop(last);
    order.push_back(node);
    last = node;
    for (size_t u : e.usersOf(node))
      if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() == n) return order;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] && onCycle) {
      *onCycle = i;
      break;
    }
  return {};
}

bool applyOrder(Graph& g, const std::vector<size_t>& order) {
  bool changed = false;
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    changed |= order[k] != k;
    sorted.push_back(std::move(g.nodes[order[k]]));
  }
  g.nodes = std::move(sorted);
  return changed;
}

}  // namespace pipecut::ir
