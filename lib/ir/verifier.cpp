#include "ir/verifier.h"

#include <algorithm>
#include <vector>

#include "support/error.h"

namespace pipecut::ir {

namespace {

std::string describe(const Node& n) { return "node '" + n.label() + "' (" + n.opName() + ")"; }

// isHigherOrder() cached before the target was rewritten (the cache's
// soundness rests on targets never being rewritten: ir.h).
bool higherOrderCacheStale(const Node& n) {
  return n.higherOrderCache >= 0 && (n.higherOrderCache != 0) != n.targetIsHigherOrder();
}

// A graph argument of a node that is not a higher-order op (only those
// have bodies), or nullptr.
const NamedArgument* strayGraphArgument(const Node& n) {
  if (n.isHigherOrder()) return nullptr;
  for (const NamedArgument& in : n.inputs)
    if (in.arg.tag == ArgTag::Graph) return &in;
  return nullptr;
}

// Value -> where it is defined: 0 = a graph input, i+1 = node i. Values of
// this scope only, indexed by Value::number; kUndefined until defined.
constexpr size_t kUndefined = static_cast<size_t>(-1);

// The common case in one walk over the nodes: a graph in topological order
// with nothing wrong. The full check below walks the nodes twice (every
// output defined before any input is looked up, so that a use before its
// definition and a use of nothing are told apart); at 10^5 nodes each walk
// misses the cache on every node's values. This one only answers whether
// the graph is clean: on any doubt the full check runs and reports the same
// error, in the same order, as it always has. Bodies are left to the caller.
bool cleanInOrder(const Graph& g, std::vector<size_t>& definedAt) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = *g.nodes[i];
    bool ok = true;
    n.forEachInputValue([&](const Value* v) { ok &= g.owns(v) && definedAt[v->number] != kUndefined; });
    n.forEachOutputValue([&](const Value* v) {
      ok &= g.owns(v) && v->producer == &n && definedAt[v->number] == kUndefined;
      if (ok) definedAt[v->number] = i + 1;
    });
    if (!ok || higherOrderCacheStale(n) || strayGraphArgument(n)) return false;
  }
  return true;
}

}  // namespace

void verifyGraph(const Graph& g, const std::string& where, const VerifyOptions& opt) {
  g.numberValues();
  std::vector<size_t> definedAt(g.values.size(), kUndefined);
  auto define = [&](const Value* v, size_t at) {
    bool fresh = definedAt[v->number] == kUndefined;
    definedAt[v->number] = at;
    return fresh;
  };

  auto checkOwned = [&](const Value* v, auto who) {
    if (!g.owns(v)) invalidInput(where, who() + " refers to value '" + v->name + "' of another graph scope");
  };
  auto defineInputs = [&] {
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      g.inputs[i].forEachValue([&](Value* v) {
        checkOwned(v, [&] { return "input " + std::to_string(i); });
        if (v->producer) invalidInput(where, "placeholder '" + v->name + "' claims a producer node");
        if (!define(v, 0)) invalidInput(where, "value '" + v->name + "' is defined twice");
      });
    }
  };
  defineInputs();
  auto verifyBodies = [&](const Node& n) {
    size_t k = 0;
    for (const Graph* sub : n.subgraphs())
      verifyGraph(*sub, where + ": " + describe(n) + ": subgraph " + std::to_string(k++), opt);
  };
  if (opt.requireTopologicalOrder && cleanInOrder(g, definedAt)) {
    // The outer graph is clean, so the full check would reach every body,
    // in this order, and nothing else would throw.
    for (const auto& n : g.nodes)
      if (n->isHigherOrder()) verifyBodies(*n);
  } else {
    if (opt.requireTopologicalOrder) {  // from the start: the fast walk defined some outputs
      std::fill(definedAt.begin(), definedAt.end(), kUndefined);
      defineInputs();
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = *g.nodes[i];
      auto who = [&] { return describe(n); };
      n.forEachOutputValue([&](Value* v) {
        checkOwned(v, who);
        if (v->producer != &n) invalidInput(where, describe(n) + " outputs value '" + v->name + "' produced elsewhere");
        if (!define(v, i + 1))
          invalidInput(where, describe(n) + " redefines value '" + v->name + "'");
      });
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = *g.nodes[i];
      auto who = [&] { return describe(n); };
      n.forEachInputValue([&](Value* v) {
        checkOwned(v, who);
        size_t at = definedAt[v->number];
        if (at == kUndefined) invalidInput(where, describe(n) + " uses value '" + v->name + "', which nothing defines");
        if (opt.requireTopologicalOrder && at > i)
          invalidInput(where, describe(n) + " uses value '" + v->name + "' before its definition by " +
                                  describe(*v->producer));
        if (at == i + 1) invalidInput(where, describe(n) + " uses its own output '" + v->name + "'");
      });
      if (higherOrderCacheStale(n))
        throw Error(ErrorKind::Internal, "", where,
                    describe(n) + ": target rewritten after isHigherOrder() cached it (now " + n.target + ")");
      if (const NamedArgument* in = strayGraphArgument(n))
        invalidInput(where, describe(n) + " has a graph argument '" + in->name + "' but is not a higher-order op");
      verifyBodies(n);
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    g.outputs[i].forEachValue([&](Value* v) {
      checkOwned(v, [&] { return "output " + std::to_string(i); });
      if (definedAt[v->number] == kUndefined) invalidInput(where, "output " + std::to_string(i) + " is undefined value '" + v->name + "'");
    });
  }
}

void verify(const Program& p, const VerifyOptions& opt) {
  const Graph& g = p.graph;
  verifyGraph(g, "graph", opt);

  if (p.inputSpecs.size() != g.inputs.size())
    invalidInput("signature", std::to_string(p.inputSpecs.size()) + " input specs for " +
                                  std::to_string(g.inputs.size()) + " placeholders");
  for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
    const InputSpec& s = p.inputSpecs[i];
    const Argument& placeholder = g.inputs[i];
    Value* expected = s.kind == InputKind::ConstantInput ? nullptr : s.arg.value();
    Value* actual = placeholder.isValue() ? placeholder.value() : nullptr;
    if (expected != actual)
      invalidInput("signature.input_specs[" + std::to_string(i) + "]",
                   std::string(inputKindKey(s.kind)) + " '" + (expected ? expected->name : s.target) +
                       "' does not match placeholder " + std::to_string(i) + " ('" +
                       (actual ? actual->name : std::string("constant")) + "')");
  }
  if (p.outputSpecs.size() != g.outputs.size())
    invalidInput("signature", std::to_string(p.outputSpecs.size()) + " output specs for " +
                                  std::to_string(g.outputs.size()) + " graph outputs");
  for (size_t i = 0; i < p.outputSpecs.size(); ++i) {
    Value* expected = p.outputSpecs[i].arg.value();
    Value* actual = g.outputs[i].value();
    if (expected != actual)
      invalidInput("signature.output_specs[" + std::to_string(i) + "]",
                   std::string(outputKindKey(p.outputSpecs[i].kind)) + " '" +
                       (expected ? expected->name : std::string("constant")) + "' does not match graph output " +
                       std::to_string(i) + " ('" + (actual ? actual->name : std::string("constant")) + "')");
  }
}

}  // namespace pipecut::ir
