#pragma once
// Passes are small named units over an ir::Program. The manager runs them in
// order and, when asked (always in tests), verifies the program after each one,
// so a broken invariant is reported against the pass that broke it.
#include <functional>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace pipecut::passes {

struct Pass {
  std::string name;
  std::function<bool(ir::Program&)> run;  // returns whether it changed anything
  bool establishesOrder = false;          // leaves nodes in topological order
};

struct PassRecord {
  std::string name;
  bool changed = false;
  size_t nodesBefore = 0, nodesAfter = 0;
};

class PassManager {
 public:
  void add(Pass p) { passes_.push_back(std::move(p)); }
  void setVerifyEach(bool on) { verifyEach_ = on; }
  // Throws pipecut::Error: InvalidInput from a pass that rejects the input,
  // Internal when verification after a pass fails.
  void run(ir::Program& program);
  const std::vector<PassRecord>& records() const { return records_; }

 private:
  std::vector<Pass> passes_;
  std::vector<PassRecord> records_;
  bool verifyEach_ = false;
};

// Returns true when two constant FQNs hold byte-identical tensors.
using SameConstantFn = std::function<bool(const std::string&, const std::string&)>;

Pass placeholderOrderPass();
Pass topologicalOrderPass();
Pass deadCodePass();
Pass dedupeAttributesPass(SameConstantFn sameConstant = nullptr);
Pass moduleContiguousPass();

struct NormalizeOptions {
  bool moduleContiguous = false;
  bool verifyEach = false;
  SameConstantFn sameConstant;
};
// placeholder-order, topological-order, dedupe-attributes, dead-code[, module-contiguous]
void addNormalizePipeline(PassManager& pm, const NormalizeOptions& options);

// Helpers shared by passes.
void replaceAllUses(ir::Program& p, ir::Value* from, ir::Value* to);
bool hasSideEffects(const ir::Node& node);  // must not be removed (mutation, RNG, assertions)
bool changesState(const ir::Node& node);    // must not be duplicated (mutation, RNG); assertions may be
// Indices of the nodes in `g` that each node depends on (same scope only).
std::vector<std::vector<size_t>> nodeDependencies(const ir::Graph& g);

// List scheduling: repeatedly places one node whose dependencies are placed;
// `pick` chooses it from the ready ones (original positions) given the node
// placed last (nullptr at first). Returns an empty order and sets *onCycle to a
// node on a cycle when the graph has one.
using PickFn = std::function<size_t(const std::vector<size_t>& ready, const ir::Node* last)>;
std::vector<size_t> listSchedule(const ir::Graph& g, const PickFn& pick, size_t* onCycle);
// Puts g's nodes in `order`; returns whether anything moved.
bool applyOrder(ir::Graph& g, const std::vector<size_t>& order);
// Removes the placeholders (and their signature entries) marked in `drop`.
void dropInputs(ir::Program& p, const std::vector<bool>& drop);

}  // namespace pipecut::passes
