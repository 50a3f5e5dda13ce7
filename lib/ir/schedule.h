#pragma once
// Graph utilities shared by passes and partitioning: node dependencies and
// list scheduling. Scheduling is O((nodes + edges) log nodes) for both
// policies, so programs of 10^5 nodes order in well under a second.
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ir/ir.h"

namespace pipecut::ir {

// Sets every node's Node::number to its position in `g`.
void numberNodes(const Graph& g);
// The position of `n` in `g` when the graph was last numbered and `n` still
// sits there; nullopt for a node of another graph (or none).
std::optional<size_t> positionIn(const Graph& g, const Node* n);

// The dependencies among g's nodes (same scope only), each edge once per
// use, as flat arrays (CSR): 10^5 small vectors would cost an allocation
// and a cache miss each. Invariant: depsOf(i) in input order; usersOf(d) in
// ascending node order.
struct NodeEdges {
  std::vector<size_t> depStart, deps;    // node i's: deps[depStart[i] .. depStart[i + 1])
  std::vector<size_t> userStart, users;  // node d's: users[userStart[d] .. userStart[d + 1])
  std::span<const size_t> depsOf(size_t i) const { return {deps.data() + depStart[i], deps.data() + depStart[i + 1]}; }
  std::span<const size_t> usersOf(size_t d) const {
    return {users.data() + userStart[d], users.data() + userStart[d + 1]};
  }
};
// Numbers the graph's nodes.
NodeEdges nodeEdges(const Graph& g);
// Whether every node comes after the nodes it depends on.
bool isTopological(const NodeEdges& e);

// The ready set of a list schedule and the policy that picks from it.
// Invariant: pop() returns a node that was pushed and not yet popped.
class ReadyQueue {
 public:
  virtual ~ReadyQueue() = default;
  virtual void push(size_t node) = 0;
  static constexpr size_t kNone = static_cast<size_t>(-1);
  // The next node to place, given the index of the node placed last (kNone at first).
  virtual size_t pop(size_t last) = 0;
  virtual bool empty() const = 0;
  // True when, on a graph already in topological order, this policy would
  // place every node where it stands: listSchedule then returns that order
  // without a push or pop.
  virtual bool keepsTopologicalOrder() const { return false; }
};

// Among ready nodes, the earliest original position: an ordered graph keeps its order.
std::unique_ptr<ReadyQueue> earliestFirst();
// Among ready nodes, the one whose module call stack shares the most frames
// with the node placed last; ties go to the earliest original position. This
// keeps each module call's nodes together wherever data flow allows.
std::unique_ptr<ReadyQueue> moduleAffinity(const Graph& g);

// Places every node after the nodes it depends on, in the order `ready`
// chooses (the identity, in linear time, where the order is topological and
// the policy keeps such an order). Returns an empty order, and sets *onCycle to a node on a cycle,
// when the graph has one.
std::vector<size_t> listSchedule(const Graph& g, ReadyQueue& ready, size_t* onCycle);
std::vector<size_t> listSchedule(const NodeEdges& e, ReadyQueue& ready, size_t* onCycle);

// Puts g's nodes in `order`; returns whether anything moved.
bool applyOrder(Graph& g, const std::vector<size_t>& order);

}  // namespace pipecut::ir
