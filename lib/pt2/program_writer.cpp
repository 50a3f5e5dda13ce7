// ir::Program -> the serialized ExportedProgram JSON. Every field is written
// (torch's current writer does the same); objects come out with sorted keys,
// so identical programs give identical bytes.
#include "pt2/program_json.h"

namespace pipecut::pt2 {

using ir::Argument;
using ir::ArgTag;
using ir::Graph;
using ir::Json;
using ir::ValueKind;

namespace {

Json serializeSymInt(const ir::SymInt& s) {
  if (!s.isExpr) return Json{{"as_int", s.value}};
  return Json{{"as_expr", Json{{"expr_str", s.expr}, {"hint", s.hint}}}};
}

Json refJson(const ir::Ref& r, ArgTag tag) {
  if (!r.value) return r.literal;
  switch (tag) {
    case ArgTag::SymInt: case ArgTag::SymInts: case ArgTag::SymBool: case ArgTag::SymBools:
    case ArgTag::SymFloat: case ArgTag::SymFloats:
      return Json{{"as_name", r.value->name}};
    case ArgTag::OptionalTensor: case ArgTag::OptionalTensors:
      return Json{{"as_tensor", Json{{"name", r.value->name}}}};
    default:
      return Json{{"name", r.value->name}};
  }
}

Json serializeGraph(const Graph& g);

Json argJson(const Argument& a) {
  Json p;
  switch (a.tag) {
    case ArgTag::Tensor: case ArgTag::SymInt: case ArgTag::SymBool: case ArgTag::SymFloat:
    case ArgTag::OptionalTensor:
      p = refJson(a.refs.at(0), a.tag);
      break;
    case ArgTag::Tensors: case ArgTag::SymInts: case ArgTag::SymBools: case ArgTag::SymFloats:
    case ArgTag::OptionalTensors:
      p = Json::array();
      for (const auto& r : a.refs) p.push_back(refJson(r, a.tag));
      break;
    case ArgTag::CustomObj:
      p = Json{{"name", a.refs.at(0).value->name}, {"class_fqn", a.name()}};
      break;
    case ArgTag::NestedTensors: {
      p = Json::array();
      size_t k = 0;
      for (size_t n : a.nesting()) {
        Json inner = Json::array();
        for (size_t i = 0; i < n; ++i) inner.push_back(refJson(a.refs.at(k++), a.tag));
        p.push_back(std::move(inner));
      }
      break;
    }
    case ArgTag::StringToArgument:
      p = Json::object();
      for (const auto& [key, sub] : a.entries()) p[key] = argJson(sub);
      break;
    case ArgTag::Graph:
      p = Json{{"name", a.name()}, {"graph", serializeGraph(*a.graph())}};
      break;
    default:
      p = a.literal;
  }
  return Json{{ir::argTagKey(a.tag), std::move(p)}};
}

Json serializeGraph(const Graph& g) {
  Json j;
  j["inputs"] = Json::array();
  for (const auto& a : g.inputs) j["inputs"].push_back(argJson(a));
  j["outputs"] = Json::array();
  for (const auto& a : g.outputs) j["outputs"].push_back(argJson(a));
  j["nodes"] = Json::array();
  for (const auto& n : g.nodes) {
    Json nj;
    nj["target"] = n->target;
    nj["inputs"] = Json::array();
    for (const auto& in : n->inputs) {
      Json na{{"name", in.name}, {"arg", argJson(in.arg)}};
      na["kind"] = in.kind ? Json(*in.kind) : Json();
      nj["inputs"].push_back(std::move(na));
    }
    nj["outputs"] = Json::array();
    for (const auto& out : n->outputs) nj["outputs"].push_back(argJson(out));
    nj["metadata"] = Json::object();
    if (n->metadata)
      for (const auto& [k, v] : *n->metadata) nj["metadata"][k] = *v;
    nj["is_hop_single_tensor_return"] = n->isHopSingleTensorReturn ? Json(*n->isHopSingleTensorReturn) : Json();
    nj["name"] = n->name ? Json(*n->name) : Json();
    j["nodes"].push_back(std::move(nj));
  }
  Json tensors = Json::object(), symInts = Json::object(), symBools = Json::object(),
       symFloats = Json::object(), objs = Json::object();
  for (const auto& v : g.values) {
    switch (v->kind) {
      case ValueKind::Tensor: if (v->meta) tensors[v->name] = serializeTensorMeta(*v->meta); break;
      case ValueKind::SymInt: if (!v->symMeta.is_null()) symInts[v->name] = v->symMeta; break;
      case ValueKind::SymBool: if (!v->symMeta.is_null()) symBools[v->name] = v->symMeta; break;
      case ValueKind::SymFloat: if (!v->symMeta.is_null()) symFloats[v->name] = v->symMeta; break;
      case ValueKind::CustomObj: if (!v->symMeta.is_null()) objs[v->name] = v->symMeta; break;
    }
  }
  j["tensor_values"] = std::move(tensors);
  j["sym_int_values"] = std::move(symInts);
  j["sym_bool_values"] = std::move(symBools);
  j["sym_float_values"] = std::move(symFloats);
  j["custom_obj_values"] = std::move(objs);
  j["is_single_tensor_return"] = g.isSingleTensorReturn;
  return j;
}

Json nameOnly(const Argument& a) {
  if (a.tag == ArgTag::CustomObj) return Json{{"name", a.value()->name}, {"class_fqn", a.name()}};
  return Json{{"name", a.value()->name}};
}

}  // namespace

Json serializeTensorMeta(const ir::TensorMeta& m) {
  Json j;
  j["dtype"] = m.dtype;
  j["sizes"] = Json::array();
  for (const auto& s : m.sizes) j["sizes"].push_back(serializeSymInt(s));
  j["requires_grad"] = m.requiresGrad;
  j["device"] = Json{{"type", m.device.type}, {"index", m.device.index ? Json(*m.device.index) : Json()}};
  j["strides"] = Json::array();
  for (const auto& s : m.strides) j["strides"].push_back(serializeSymInt(s));
  j["storage_offset"] = serializeSymInt(m.storageOffset);
  j["layout"] = m.layout;
  return j;
}

Json serializeProgram(const ir::Program& p) {
  Json sig;
  sig["input_specs"] = Json::array();
  for (const auto& s : p.inputSpecs) {
    Json b;
    switch (s.kind) {
      case ir::InputKind::UserInput: b["arg"] = argJson(s.arg); break;
      case ir::InputKind::Parameter: b = {{"arg", nameOnly(s.arg)}, {"parameter_name", s.target}}; break;
      case ir::InputKind::Buffer:
        b = {{"arg", nameOnly(s.arg)}, {"buffer_name", s.target}, {"persistent", s.persistent.value_or(true)}};
        break;
      case ir::InputKind::TensorConstant: b = {{"arg", nameOnly(s.arg)}, {"tensor_constant_name", s.target}}; break;
      case ir::InputKind::CustomObj: b = {{"arg", nameOnly(s.arg)}, {"custom_obj_name", s.target}}; break;
      case ir::InputKind::ConstantInput: b = {{"name", s.target}, {"value", s.constantValue}}; break;
      case ir::InputKind::Token: b = {{"arg", nameOnly(s.arg)}}; break;
    }
    sig["input_specs"].push_back(Json{{ir::inputKindKey(s.kind), std::move(b)}});
  }
  sig["output_specs"] = Json::array();
  for (const auto& s : p.outputSpecs) {
    Json b;
    switch (s.kind) {
      case ir::OutputKind::UserOutput: b["arg"] = argJson(s.arg); break;
      case ir::OutputKind::LossOutput: case ir::OutputKind::Token: b["arg"] = nameOnly(s.arg); break;
      case ir::OutputKind::BufferMutation: b = {{"arg", nameOnly(s.arg)}, {"buffer_name", s.target}}; break;
      case ir::OutputKind::GradientToParameter: case ir::OutputKind::ParameterMutation:
        b = {{"arg", nameOnly(s.arg)}, {"parameter_name", s.target}};
        break;
      case ir::OutputKind::GradientToUserInput: case ir::OutputKind::UserInputMutation:
        b = {{"arg", nameOnly(s.arg)}, {"user_input_name", s.target}};
        break;
    }
    sig["output_specs"].push_back(Json{{ir::outputKindKey(s.kind), std::move(b)}});
  }
  Json mcg = Json::array();
  for (const auto& e : p.moduleCallGraph) mcg.push_back(Json{{"fqn", e.fqn}, {"signature", e.signature}});

  Json gm;
  gm["graph"] = serializeGraph(p.graph);
  gm["signature"] = std::move(sig);
  gm["module_call_graph"] = std::move(mcg);
  gm["metadata"] = p.graphModuleMetadata;
  gm["treespec_namedtuple_fields"] = p.treespecNamedtupleFields;

  Json j;
  j["graph_module"] = std::move(gm);
  j["opset_version"] = p.opsetVersion;
  j["range_constraints"] = p.rangeConstraints;
  j["schema_version"] = Json{{"major", p.schemaMajor}, {"minor", p.schemaMinor}};
  j["verifiers"] = p.verifiers;
  j["torch_version"] = p.torchVersion;
  j["guards_code"] = p.guardsCode;
  return j;
}

std::string dumpJson(const Json& j) {
  // ensure_ascii off, as torch writes UTF-8; error_handler strict: invalid UTF-8
  // never reaches here because parsing rejected it.
  return j.dump(-1, ' ', false, Json::error_handler_t::strict);
}

}  // namespace pipecut::pt2
