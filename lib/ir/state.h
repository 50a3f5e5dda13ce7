#pragma once
// A program's state: the lifted tensors (buffers, constants) it updates in
// place, such as the static KV cache of a decode step that transformers'
// executorch export lifts as constants and writes with index_copy_. A
// stage's state persists from one call to the next, so the partition keeps
// every node that touches one state tensor in one stage (partition/assign),
// the emitter passes it to TorchScript stages as arguments (so a runner can
// hold several sequences' caches and pass the one in use: zero copies), and
// the manifest lists it. Torch-free: in-place ops are known by name
// (ir/op_traits.h).
#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/op_traits.h"  // isInPlace

namespace pipecut::ir {


struct StateTensor {
  size_t spec = 0;                 // index into Program::inputSpecs (Buffer or TensorConstant)
  const Value* placeholder = nullptr;
  // Every top-level node that reads or writes it: through the placeholder,
  // or through the result of an in-place op on it (which is the same
  // tensor). Program order.
  std::vector<const Node*> touching;
};

// The program's state tensors, in input-spec order. Top-level graph only: a
// higher-order region that updates a lifted tensor is not state here.
std::vector<StateTensor> findState(const Program& p);

}  // namespace pipecut::ir
