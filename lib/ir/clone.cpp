#include "ir/clone.h"

#include "support/error.h"

namespace pipecut::ir {

Value* cloneValueInto(const Value& v, Graph& dst, Node* producer) {
  Value* nv = dst.define(v.name, v.kind, producer);
  if (!nv) internalError("clone", "value '" + v.name + "' already defined in the destination graph");
  nv->meta = v.meta;
  nv->symMeta = v.symMeta;
  return nv;
}

Argument cloneArgument(const Argument& a, const ValueMap& map) {
  Argument c;
  c.tag = a.tag;
  c.literal = a.literal;
  if (!a.nesting().empty()) c.rare().nesting = a.nesting();
  if (!a.name().empty()) c.rare().name = a.name();
  if (a.graph()) c.rare().graph = cloneGraph(*a.graph());
  for (const Ref& r : a.refs) {
    Ref nr;
    nr.literal = r.literal;
    if (r.value) {
      auto it = map.find(r.value);
      if (it == map.end()) internalError("clone", "value '" + r.value->name + "' has no copy");
      nr.value = it->second;
    }
    c.refs.push_back(std::move(nr));
  }
  for (const auto& [k, sub] : a.entries()) c.rare().entries.emplace_back(k, cloneArgument(sub, map));
  return c;
}

std::string freshName(const Graph& g, const std::string& name, const std::string& suffix) {
  if (!g.find(name)) return name;
  if (!g.find(name + suffix)) return name + suffix;
  for (size_t k = 1;; ++k) {
    std::string candidate = name + suffix + "_" + std::to_string(k);
    if (!g.find(candidate)) return candidate;
  }
}

namespace {

// Outputs define values: copy the argument shape, defining fresh values under
// their own names, or (with a suffix) under names `dst` does not hold yet.
Argument cloneDefiningArgument(const Argument& a, Graph& dst, Node* producer, ValueMap& map,
                               const std::string* suffix) {
  Argument c;
  c.tag = a.tag;
  c.literal = a.literal;
  if (!a.nesting().empty()) c.rare().nesting = a.nesting();
  if (!a.name().empty()) c.rare().name = a.name();
  for (const Ref& r : a.refs) {
    Ref nr;
    nr.literal = r.literal;
    if (r.value) {
      if (suffix) {
        nr.value = dst.define(freshName(dst, r.value->name, *suffix), r.value->kind, producer);
        nr.value->meta = r.value->meta;
        nr.value->symMeta = r.value->symMeta;
      } else {
        nr.value = cloneValueInto(*r.value, dst, producer);
      }
      map[r.value] = nr.value;
    }
    c.refs.push_back(std::move(nr));
  }
  for (const auto& [k, sub] : a.entries())
    c.rare().entries.emplace_back(k, cloneDefiningArgument(sub, dst, producer, map, suffix));
  return c;
}

std::unique_ptr<Node> copyNode(const Node& n, Graph& dst, ValueMap& map, const std::string* suffix) {
  auto copy = std::make_unique<Node>();
  copy->target = n.target;
  copy->metadata = n.metadata;
  copy->isHopSingleTensorReturn = n.isHopSingleTensorReturn;
  copy->name = n.name;
  copy->moduleStack = n.moduleStack;
  for (const auto& in : n.inputs) copy->inputs.push_back(NamedArgument{in.name, cloneArgument(in.arg, map), in.kind});
  for (const auto& out : n.outputs) copy->outputs.push_back(cloneDefiningArgument(out, dst, copy.get(), map, suffix));
  // A node is named after its output; a renamed output renames the node.
  if (suffix)
    n.forEachOutputValue([&](const Value* v) {
      if (copy->name && *copy->name == v->name) copy->name = map.at(v)->name;
    });
  return copy;
}

}  // namespace

Node* cloneNodeInto(const Node& n, Graph& dst, ValueMap& map) {
  dst.nodes.push_back(copyNode(n, dst, map, nullptr));
  return dst.nodes.back().get();
}

std::unique_ptr<Node> copyNodeFresh(const Node& n, Graph& dst, ValueMap& map, const std::string& suffix) {
  return copyNode(n, dst, map, &suffix);
}

namespace {

void cloneGraphInto(const Graph& g, Graph& out, ValueMap& map) {
  for (const auto& in : g.inputs) out.inputs.push_back(cloneDefiningArgument(in, out, nullptr, map, nullptr));
  for (const auto& n : g.nodes) cloneNodeInto(*n, out, map);
  for (const auto& o : g.outputs) out.outputs.push_back(cloneArgument(o, map));
  out.isSingleTensorReturn = g.isSingleTensorReturn;
}

}  // namespace

std::shared_ptr<Graph> cloneGraph(const Graph& g) {
  auto out = std::make_shared<Graph>();
  ValueMap map;
  cloneGraphInto(g, *out, map);
  return out;
}

Program cloneProgram(const Program& p) {
  Program out;
  ValueMap map;
  cloneGraphInto(p.graph, out.graph, map);
  out.inputSpecs = p.inputSpecs;
  for (auto& spec : out.inputSpecs) spec.arg = cloneArgument(spec.arg, map);
  out.outputSpecs = p.outputSpecs;
  for (auto& spec : out.outputSpecs) spec.arg = cloneArgument(spec.arg, map);
  out.moduleCallGraph = p.moduleCallGraph;
  out.graphModuleMetadata = p.graphModuleMetadata;
  out.treespecNamedtupleFields = p.treespecNamedtupleFields;
  out.opsetVersion = p.opsetVersion;
  out.rangeConstraints = p.rangeConstraints;
  out.verifiers = p.verifiers;
  out.guardsCode = p.guardsCode;
  out.schemaMajor = p.schemaMajor;
  out.schemaMinor = p.schemaMinor;
  out.torchVersion = p.torchVersion;
  return out;
}

}  // namespace pipecut::ir
