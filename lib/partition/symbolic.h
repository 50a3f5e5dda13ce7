#pragma once
// Symbolic values (SymInt, SymBool, SymFloat) that one stage computes and
// another uses. A dynamic-shape program is full of them (sym_size of an input,
// products of sizes for views), and the stages must agree on them without a
// Python runtime. Two ways across a boundary, tried in this order:
// - rederived: a SymInt that is exactly one shape symbol ("s72") which one of
//   the consumer's own tensor inputs has as a dimension is read back there
//   with sym_size: nothing extra travels;
// - carried: anything else travels as a 0-d tensor (int64, bool or float64)
//   that the producer makes with scalar_tensor and the consumer turns back
//   into a scalar with item.
#include <memory>
#include <optional>
#include <string>

#include "ir/ir.h"

namespace pipecut::partition {

// The symbol's name when `v` is a SymInt that is exactly one shape symbol.
std::optional<std::string> bareSymbol(const ir::Value& v);

// The first dimension of `tensor` whose size is exactly `symbol`.
std::optional<int64_t> dimOfSymbol(const ir::Value& tensor, const std::string& symbol);

// The 0-d tensor that carries `v` across a boundary: a value of its own (in
// no graph) named `name`, on `device`.
std::unique_ptr<ir::Value> makeCarrier(const ir::Value& v, const std::string& name, const ir::Device& device);

// Nodes appended to `g`, each defining a copy of `like` (name, kind, metadata):
// sym_size(tensor, dim), item(carrier), and scalar_tensor(value) for a carrier.
ir::Value* appendSymSize(ir::Graph& g, ir::Value* tensor, int64_t dim, const ir::Value& like);
ir::Value* appendItem(ir::Graph& g, ir::Value* carrier, const ir::Value& like);
ir::Value* appendScalarTensor(ir::Graph& g, ir::Value* value, const ir::Value& carrier);

}  // namespace pipecut::partition
