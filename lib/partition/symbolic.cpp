#include "partition/symbolic.h"

#include <cctype>

#include "ir/clone.h"
#include "support/error.h"

namespace pipecut::partition {

namespace {

bool isIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// Schema ScalarType codes of the carriers: what torch's scalar_tensor makes of
// an int, a bool and a float.
constexpr int kLong = 5, kDouble = 8, kBool = 12;

int carrierDtype(ir::ValueKind k) {
  switch (k) {
    case ir::ValueKind::SymInt: return kLong;
    case ir::ValueKind::SymBool: return kBool;
    case ir::ValueKind::SymFloat: return kDouble;
    default: internalError("carve", "only symbolic scalars travel as carriers");
  }
}

ir::ArgTag scalarTag(ir::ValueKind k) {
  switch (k) {
    case ir::ValueKind::SymInt: return ir::ArgTag::SymInt;
    case ir::ValueKind::SymBool: return ir::ArgTag::SymBool;
    case ir::ValueKind::SymFloat: return ir::ArgTag::SymFloat;
    default: return ir::ArgTag::Tensor;
  }
}

ir::Argument refArg(ir::ArgTag tag, ir::Value* v) {
  ir::Argument a;
  a.tag = tag;
  a.refs.push_back(ir::Ref{v, nullptr});
  return a;
}

ir::Node& appendNode(ir::Graph& g, const std::string& target, std::vector<ir::NamedArgument> inputs) {
  auto n = std::make_unique<ir::Node>();
  n->target = target;
  n->inputs = std::move(inputs);
  ir::Node& ref = *n;
  g.nodes.push_back(std::move(n));
  return ref;
}

ir::Value* defineOutput(ir::Node& n, ir::Graph& g, const ir::Value& like) {
  ir::Value* out = ir::cloneValueInto(like, g, &n);
  n.outputs.push_back(refArg(scalarTag(like.kind), out));
  return out;
}

}  // namespace

std::optional<std::string> bareSymbol(const ir::Value& v) {
  if (v.kind != ir::ValueKind::SymInt || !v.symMeta.is_object() || !v.symMeta.contains("as_expr")) return std::nullopt;
  const ir::Json& e = v.symMeta["as_expr"];
  if (!e.is_object() || !e.contains("expr_str") || !e["expr_str"].is_string()) return std::nullopt;
  ir::SymInt s;
  s.isExpr = true;
  s.expr = e["expr_str"].get<std::string>();
  std::string name = s.str();
  if (!isIdentifier(name)) return std::nullopt;
  return name;
}

std::optional<int64_t> dimOfSymbol(const ir::Value& tensor, const std::string& symbol) {
  if (tensor.kind != ir::ValueKind::Tensor || !tensor.meta) return std::nullopt;
  const auto& sizes = tensor.meta->sizes;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d].isExpr && sizes[d].str() == symbol) return static_cast<int64_t>(d);
  return std::nullopt;
}

std::unique_ptr<ir::Value> makeCarrier(const ir::Value& v, const std::string& name, const ir::Device& device) {
  auto c = std::make_unique<ir::Value>();
  c->name = name;
  c->kind = ir::ValueKind::Tensor;
  ir::TensorMeta m;
  m.dtype = carrierDtype(v.kind);
  m.device = device;
  c->meta = m;
  return c;
}

ir::Value* appendSymSize(ir::Graph& g, ir::Value* tensor, int64_t dim, const ir::Value& like) {
  ir::Node& n = appendNode(g, "torch.ops.aten.sym_size.int",
                           {ir::NamedArgument{"self", ir::Argument::tensor(tensor), 1},
                            ir::NamedArgument{"dim", ir::Argument::integer(dim), 1}});
  return defineOutput(n, g, like);
}

ir::Value* appendItem(ir::Graph& g, ir::Value* carrier, const ir::Value& like) {
  ir::Node& n = appendNode(g, "torch.ops.aten.item.default", {ir::NamedArgument{"self", ir::Argument::tensor(carrier), 1}});
  return defineOutput(n, g, like);
}

ir::Value* appendScalarTensor(ir::Graph& g, ir::Value* value, const ir::Value& carrier) {
  ir::Argument dtype;
  dtype.tag = ir::ArgTag::ScalarType;
  dtype.literal = carrier.meta->dtype;
  ir::Argument device;
  device.tag = ir::ArgTag::Device;
  device.literal = ir::Json{{"type", carrier.meta->device.type}, {"index", nullptr}};
  if (carrier.meta->device.index) device.literal["index"] = *carrier.meta->device.index;
  ir::Node& n = appendNode(g, "torch.ops.aten.scalar_tensor.default",
                           {ir::NamedArgument{"s", refArg(scalarTag(value->kind), value), 1},
                            ir::NamedArgument{"dtype", dtype, 2}, ir::NamedArgument{"device", device, 2}});
  return defineOutput(n, g, carrier);
}

}  // namespace pipecut::partition
