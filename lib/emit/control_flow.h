#pragma once
// Internal to emit (torch-facing, unlike its public headers). Higher-order
// control flow in TorchScript stages: export's `cond`, `while_loop` and
// `map_impl` become TorchScript's own prim::If and prim::Loop, each body
// emitted into the node's block by the emitter that owns the graph.
// A body sees only its operands (export lifts every tensor it reads,
// parameters included, into operands), so emitting it inside a block never
// reaches a value of another block; what a body returns unchanged is an outer
// value, which a block may return.
#include <string>
#include <vector>

#include <torch/csrc/jit/ir/ir.h>

#include "ir/ir.h"

namespace pipecut::emit {

// What lowering control flow needs from the emitter (emit/torchscript.cpp).
class BodyEmitter {
 public:
  virtual ~BodyEmitter() = default;
  virtual torch::jit::Graph& jitGraph() = 0;
  // The node being emitted, for messages ("node 'cond' (higher_order.cond)").
  virtual const std::string& where() const = 0;
  // An argument as a TorchScript value, its type inferred.
  virtual torch::jit::Value* value(const ir::Argument& a, const std::string& what) = 0;
  // Emits `body` at the graph's insertion point with its inputs bound to
  // `operands`; returns what it returns.
  virtual std::vector<torch::jit::Value*> emitBody(const ir::Graph& body,
                                                   const std::vector<torch::jit::Value*>& operands) = 0;
};

// Each returns the values the op returns, in order (one per output Argument).
// Throws pipecut::Error (InvalidInput) naming e.where(): wrong argument count,
// bodies that disagree with their operands or with each other.
std::vector<torch::jit::Value*> emitCond(BodyEmitter& e, const ir::Node& n);       // cond(pred, true_fn, false_fn, operands)
std::vector<torch::jit::Value*> emitWhileLoop(BodyEmitter& e, const ir::Node& n);  // while_loop(cond_fn, body_fn, carried, additional)
std::vector<torch::jit::Value*> emitMap(BodyEmitter& e, const ir::Node& n);        // map_impl(f, xs, pos_args)

}  // namespace pipecut::emit
