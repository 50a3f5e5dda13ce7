#include "passes/map_as_loop.h"

#include <memory>
#include <optional>

#include "ir/clone.h"
#include "passes/pass_manager.h"
#include "passes/unroll_map.h"

namespace pipecut::passes {

namespace {

constexpr int kLong = 5;   // the schema's ScalarType for int64
constexpr int kBool = 12;  // and for bool

// Contiguous metadata of the given sizes. Every size but the first must be
// static: the strides are their products.
ir::TensorMeta contiguous(int dtype, std::vector<ir::SymInt> sizes, const ir::Device& device) {
  ir::TensorMeta m;
  m.dtype = dtype;
  m.device = device;
  m.strides.resize(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    m.strides[d].value = stride;
    if (d > 0) stride *= sizes[d].value;
  }
  m.sizes = std::move(sizes);
  return m;
}

// `first`, then `rest`: the sizes of N rows, or of one, of a row's shape.
std::vector<ir::SymInt> withLeading(const ir::SymInt& first, const std::vector<ir::SymInt>& rest) {
  std::vector<ir::SymInt> sizes{first};
  sizes.insert(sizes.end(), rest.begin(), rest.end());
  return sizes;
}

const ir::SymInt kOne{false, 1, {}, {}};

// The map's operands when it can become a loop: its length, N.
struct LoopCall : MapOperands {
  ir::SymInt length;
};

std::optional<LoopCall> loopable(const ir::Node& n) {
  std::optional<MapOperands> operands = mapOperands(n);
  if (!operands) return std::nullopt;
  LoopCall c;
  static_cast<MapOperands&>(c) = std::move(*operands);
  for (ir::Value* x : c.xs) {
    if (!x || !x->meta || x->meta->sizes.empty()) return std::nullopt;
    for (size_t d = 1; d < x->meta->sizes.size(); ++d) if (x->meta->sizes[d].isExpr) return std::nullopt;
    if (!x->meta->sizes[0].sameAs(c.xs[0]->meta->sizes[0])) return std::nullopt;
  }
  c.length = c.xs[0]->meta->sizes[0];
  for (const auto& o : c.body->outputs) {
    const ir::Value* y = o.value();
    if (!y->meta) return std::nullopt;
    for (const auto& s : y->meta->sizes) if (s.isExpr) return std::nullopt;
  }
  return c;
}

ir::Argument symIntRef(ir::Value* v) {
  ir::Argument a;
  a.tag = ir::ArgTag::SymInt;
  a.refs = {ir::Ref{v, nullptr}};
  return a;
}

ir::Argument tensorList(const std::vector<ir::Value*>& values) {
  ir::Argument a;
  a.tag = ir::ArgTag::Tensors;
  for (ir::Value* v : values) a.refs.push_back(ir::Ref{v, nullptr});
  return a;
}

ir::Argument graphArg(std::shared_ptr<ir::Graph> g, const std::string& name) {
  ir::Argument a;
  a.tag = ir::ArgTag::Graph;
  a.rare().graph = std::move(g);
  a.rare().name = name;
  return a;
}

// Appends nodes to `out`, each defining one value of `g` under a fresh name,
// with the metadata and module stack of the map it stands for.
struct Emitter {
  ir::Graph& g;
  std::vector<std::unique_ptr<ir::Node>>& out;
  const ir::Node& origin;

  ir::Value* op(const char* target, std::vector<ir::NamedArgument> inputs, const std::string& base,
                std::optional<ir::TensorMeta> meta, ir::ValueKind kind = ir::ValueKind::Tensor) {
    auto n = std::make_unique<ir::Node>();
    n->target = target;
    n->metadata = origin.metadata;
    n->moduleStack = origin.moduleStack;
    n->inputs = std::move(inputs);
    const std::string name = ir::freshName(g, base, "_loop");
    ir::Value* v = g.define(name, kind, n.get());
    if (meta) v->meta = std::move(*meta);
    n->outputs.push_back(kind == ir::ValueKind::SymInt ? symIntRef(v) : ir::Argument::tensor(v));
    n->name = name;
    out.push_back(std::move(n));
    return v;
  }
};

ir::NamedArgument pos(const char* name, ir::Argument a) { return {name, std::move(a), 1}; }
ir::NamedArgument kw(const char* name, ir::Argument a) { return {name, std::move(a), 2}; }

// N in the graph `e` writes to: `sym_size(x, 0)` of a mapped input there
// when the length is symbolic; nullptr when it is static (N is a literal).
ir::Value* symbolicLength(Emitter& e, ir::Value* x, const ir::SymInt& length, const std::string& name) {
  if (!length.isExpr) return nullptr;
  ir::Value* n = e.op("torch.ops.aten.sym_size.int", {pos("self", ir::Argument::tensor(x)), pos("dim", ir::Argument::integer(0))},
                      name, std::nullopt, ir::ValueKind::SymInt);
  n->symMeta = ir::Json{{"as_expr", {{"expr_str", length.expr}, {"hint", length.hint}}}};
  return n;
}

ir::Argument deviceArg(const ir::Device& d) {
  return ir::Argument::literalOf(ir::ArgTag::Device,
                                 ir::Json{{"type", d.type}, {"index", d.index ? ir::Json(*d.index) : ir::Json(nullptr)}});
}

// The loop's carried values and additional inputs, as a body or the
// condition sees them: its own inputs, in the order while_loop passes them.
// Tensors only: LibTorch's NativeRT refuses a body with a SymInt input
// ("Unsupported symbolic graph input type"), so a symbolic length is read
// inside the condition, from the first mapped input.
struct Scope {
  std::shared_ptr<ir::Graph> g = std::make_shared<ir::Graph>();
  ir::Value* counter = nullptr;
  std::vector<ir::Value*> buffers, xs, additional;
};

Scope makeScope(ir::Value* counter, const std::vector<ir::Value*>& buffers, const std::vector<ir::Value*>& xs,
                const std::vector<ir::Value*>& additional) {
  Scope s;
  auto input = [&](ir::Value* outer) {
    ir::Value* v = ir::cloneValueInto(*outer, *s.g, nullptr);
    s.g->inputs.push_back(v->kind == ir::ValueKind::SymInt ? symIntRef(v) : ir::Argument::tensor(v));
    return v;
  };
  s.counter = input(counter);
  for (ir::Value* b : buffers) s.buffers.push_back(input(b));
  for (ir::Value* x : xs) s.xs.push_back(input(x));
  for (ir::Value* a : additional) s.additional.push_back(input(a));
  return s;
}

}  // namespace

bool mapLoopable(const ir::Node& n) { return n.target == kMapTarget && loopable(n).has_value(); }

size_t mapsAsLoops(ir::Program& p) {
  ir::Graph& g = p.graph;
  size_t rewritten = 0;
  std::vector<std::unique_ptr<ir::Node>> nodes;
  nodes.reserve(g.nodes.size());
  for (auto& node : g.nodes) {
    std::optional<LoopCall> call = node->target == kMapTarget ? loopable(*node) : std::nullopt;
    if (!call) {
      nodes.push_back(std::move(node));
      continue;
    }
    const ir::Device device = call->xs[0]->meta->device;
    Emitter outer{g, nodes, *node};
    ir::Value* length = symbolicLength(outer, call->xs[0], call->length, node->label() + "_length");
    ir::Value* counter = outer.op(
        "torch.ops.aten.zeros.default",
        {pos("size", ir::Argument::literalOf(ir::ArgTag::Ints, ir::Json::array())),
         kw("dtype", ir::Argument::literalOf(ir::ArgTag::ScalarType, kLong)), kw("device", deviceArg(device))},
        node->label() + "_index", contiguous(kLong, {}, device));
    std::vector<ir::Value*> buffers;
    for (const auto& o : call->body->outputs) {
      const ir::TensorMeta& y = *o.value()->meta;
      ir::Argument size;
      size.tag = ir::ArgTag::SymInts;
      size.refs.push_back(length ? ir::Ref{length, nullptr} : ir::Ref{nullptr, ir::Json{{"as_int", call->length.value}}});
      for (const auto& s : y.sizes) size.refs.push_back(ir::Ref{nullptr, ir::Json{{"as_int", s.value}}});
      // zeros rather than new_zeros: NativeRT has no static kernel for the latter.
      buffers.push_back(outer.op("torch.ops.aten.zeros.default",
                                 {pos("size", std::move(size)),
                                  kw("dtype", ir::Argument::literalOf(ir::ArgTag::ScalarType, y.dtype)),
                                  kw("device", deviceArg(y.device))},
                                 node->label() + "_rows", contiguous(y.dtype, withLeading(call->length, y.sizes), y.device)));
    }

    // cond: i < N.
    Scope cond = makeScope(counter, buffers, call->xs, call->additional);
    {
      std::vector<std::unique_ptr<ir::Node>> body;
      Emitter e{*cond.g, body, *node};
      ir::Value* n = symbolicLength(e, cond.xs[0], call->length, "length");
      ir::Argument other = n ? symIntRef(n) : ir::Argument::integer(call->length.value);
      ir::Value* lt = e.op("torch.ops.aten.lt.Scalar", {pos("self", ir::Argument::tensor(cond.counter)), pos("other", other)},
                           "in_range", contiguous(kBool, {}, device));
      cond.g->nodes = std::move(body);
      cond.g->outputs.push_back(ir::Argument::tensor(lt));
      cond.g->isSingleTensorReturn = true;
    }

    // body: row i of each mapped input through the map's body, written into
    // row i of each buffer; i + 1.
    Scope step = makeScope(counter, buffers, call->xs, call->additional);
    {
      std::vector<std::unique_ptr<ir::Node>> body;
      Emitter e{*step.g, body, *node};
      ir::Value* index = e.op("torch.ops.aten.reshape.default",
                              {pos("self", ir::Argument::tensor(step.counter)),
                               pos("shape", ir::Argument::literalOf(ir::ArgTag::Ints, ir::Json::array({1})))},
                              "row_index", contiguous(kLong, {kOne}, device));
      ir::ValueMap map;
      for (size_t k = 0; k < step.xs.size(); ++k) {
        const ir::TensorMeta& xm = *step.xs[k]->meta;
        std::vector<ir::SymInt> rowSizes(xm.sizes.begin() + 1, xm.sizes.end());
        ir::Value* sel = e.op("torch.ops.aten.index_select.default",
                              {pos("self", ir::Argument::tensor(step.xs[k])), pos("dim", ir::Argument::integer(0)),
                               pos("index", ir::Argument::tensor(index))},
                              step.xs[k]->name + "_row1", contiguous(xm.dtype, withLeading(kOne, rowSizes), xm.device));
        ir::Value* row = e.op("torch.ops.aten.squeeze.dim",
                              {pos("self", ir::Argument::tensor(sel)), pos("dim", ir::Argument::integer(0))},
                              step.xs[k]->name + "_row", contiguous(xm.dtype, rowSizes, xm.device));
        if (const ir::Value* formal = call->body->inputs[k].value()) map[formal] = row;
      }
      for (size_t k = 0; k < step.additional.size(); ++k)
        if (const ir::Value* formal = call->body->inputs[step.xs.size() + k].value()) map[formal] = step.additional[k];
      for (const auto& bn : call->body->nodes) body.push_back(ir::copyNodeFresh(*bn, *step.g, map, "_body"));
      ir::Value* next = e.op("torch.ops.aten.add.Tensor",
                             {pos("self", ir::Argument::tensor(step.counter)), pos("other", ir::Argument::integer(1))},
                             "next_index", contiguous(kLong, {}, device));
      step.g->outputs.push_back(ir::Argument::tensor(next));
      for (size_t j = 0; j < call->body->outputs.size(); ++j) {
        ir::Value* y = map.at(call->body->outputs[j].value());
        const ir::TensorMeta& ym = *y->meta;
        ir::Value* lifted = e.op("torch.ops.aten.unsqueeze.default",
                                 {pos("self", ir::Argument::tensor(y)), pos("dim", ir::Argument::integer(0))},
                                 y->name + "_as_row", contiguous(ym.dtype, withLeading(kOne, ym.sizes), ym.device));
        ir::Value* written = e.op("torch.ops.aten.index_copy.default",
                                  {pos("self", ir::Argument::tensor(step.buffers[j])), pos("dim", ir::Argument::integer(0)),
                                   pos("index", ir::Argument::tensor(index)), pos("source", ir::Argument::tensor(lifted))},
                                  "rows_" + std::to_string(j), *step.buffers[j]->meta);
        step.g->outputs.push_back(ir::Argument::tensor(written));
      }
      step.g->nodes = std::move(body);
    }

    // The loop defines the map's own results: their users need no rewrite.
    auto loop = std::make_unique<ir::Node>();
    loop->target = "torch.ops.higher_order.while_loop";
    loop->metadata = node->metadata;
    loop->moduleStack = node->moduleStack;
    std::vector<ir::Value*> carried{counter};
    carried.insert(carried.end(), buffers.begin(), buffers.end());
    std::vector<ir::Value*> extra(call->xs);
    extra.insert(extra.end(), call->additional.begin(), call->additional.end());
    const std::string base = node->label();
    loop->inputs = {pos("", graphArg(cond.g, base + "_cond_graph")), pos("", graphArg(step.g, base + "_body_graph")),
                    pos("", tensorList(carried)), pos("", tensorList(extra))};
    const std::string last = ir::freshName(g, base + "_last_index", "_loop");
    ir::Value* lastIndex = g.define(last, ir::ValueKind::Tensor, loop.get());
    lastIndex->meta = contiguous(kLong, {}, device);
    loop->outputs.push_back(ir::Argument::tensor(lastIndex));
    for (auto& o : node->outputs) {
      o.value()->producer = loop.get();
      loop->outputs.push_back(o);
    }
    loop->name = base;
    nodes.push_back(std::move(loop));
    ++rewritten;
  }
  g.nodes = std::move(nodes);
  if (rewritten) g.pruneValues();
  return rewritten;
}

Pass mapsAsLoopsPass() {
  return {"maps-as-loops", [](ir::Program& p) { return mapsAsLoops(p) > 0; }};
}

}  // namespace pipecut::passes
