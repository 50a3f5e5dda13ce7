#include "pt2/program_json.h"

#include "support/error.h"

namespace pipecut::pt2 {

using ir::Argument;
using ir::ArgTag;
using ir::Graph;
using ir::Json;
using ir::Node;
using ir::Value;
using ir::ValueKind;

namespace {


const Json& field(const Json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) invalidInput(where, "expected a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) invalidInput(where, std::string("missing field '") + key + "'");
  return *it;
}

bool has(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && !it->is_null();
}

const std::string& str(const Json& j, const std::string& where) {
  if (!j.is_string()) invalidInput(where, "expected a string");
  return j.get_ref<const std::string&>();
}

int64_t integer(const Json& j, const std::string& where) {
  if (!j.is_number_integer()) invalidInput(where, "expected an integer");
  return j.get<int64_t>();
}

// Optional fields: absent or null means the default; any other type is an error.
bool optBool(const Json& obj, const char* key, bool dflt, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) invalidInput(where.empty() ? key : where + "." + key, "expected a bool");
  return it->get<bool>();
}

std::string optString(const Json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  return str(*it, where.empty() ? key : where + "." + key);
}

bool isFloat(const Json& j) {
  if (j.is_number()) return true;
  if (!j.is_string()) return false;
  const auto& s = j.get_ref<const std::string&>();
  return s == "Infinity" || s == "-Infinity" || s == "NaN";
}

void expectArray(const Json& j, const std::string& where) {
  if (!j.is_array()) invalidInput(where, "expected a JSON array");
}

template <class Pred>
void expectArrayOf(const Json& j, const std::string& where, Pred ok, const char* what) {
  expectArray(j, where);
  for (size_t i = 0; i < j.size(); ++i)
    if (!ok(j[i])) invalidInput(where + "[" + std::to_string(i) + "]", std::string("expected ") + what);
}

ir::SymInt parseSymInt(const Json& j, const std::string& where) {
  ir::SymInt s;
  if (!j.is_object() || j.size() != 1) invalidInput(where, "expected a SymInt ({\"as_int\"} or {\"as_expr\"})");
  if (j.contains("as_int")) {
    s.value = integer(j["as_int"], where + ".as_int");
  } else if (j.contains("as_expr")) {
    s.isExpr = true;
    s.expr = str(field(j["as_expr"], "expr_str", where + ".as_expr"), where + ".as_expr.expr_str");
    s.hint = j["as_expr"].value("hint", Json());
  } else {
    invalidInput(where, "unknown SymInt variant '" + j.begin().key() + "'");
  }
  return s;
}


// Parses one graph scope. Values are defined by the graph's inputs and its
// nodes' outputs before any use is resolved, so a graph whose nodes are out of
// order still reads (normalization then fixes the order); a use of a name that
// nothing defines is an error here.
class GraphReader {
 public:
  explicit GraphReader(std::string where) : where_(std::move(where)) {}

  void read(const Json& j, Graph& g) {
    g_ = &g;
    const Json& inputs = field(j, "inputs", where_);
    const Json& outputs = field(j, "outputs", where_);
    const Json& nodes = field(j, "nodes", where_);
    expectArray(inputs, where_ + ".inputs");
    expectArray(outputs, where_ + ".outputs");
    expectArray(nodes, where_ + ".nodes");
    g.isSingleTensorReturn = optBool(j, "is_single_tensor_return", false, where_);

    for (size_t i = 0; i < inputs.size(); ++i)
      g.inputs.push_back(arg(inputs[i], Mode::Define, nullptr, where_ + ".inputs[" + std::to_string(i) + "]"));

    std::vector<std::string> nodeWhere;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Json& nj = nodes[i];
      std::string w = where_ + ".nodes[" + std::to_string(i) + "]";
      auto node = std::make_unique<Node>();
      node->target = str(field(nj, "target", w), w + ".target");
      if (has(nj, "name")) node->name = str(nj["name"], w + ".name");
      if (has(nj, "is_hop_single_tensor_return")) {
        if (!nj["is_hop_single_tensor_return"].is_boolean())
          invalidInput(w + ".is_hop_single_tensor_return", "expected a bool");
        node->isHopSingleTensorReturn = nj["is_hop_single_tensor_return"].get<bool>();
      }
      const Json& outs = field(nj, "outputs", w);
      expectArray(outs, w + ".outputs");
      for (size_t k = 0; k < outs.size(); ++k)
        node->outputs.push_back(arg(outs[k], Mode::Define, node.get(), w + ".outputs[" + std::to_string(k) + "]"));
      nodeWhere.push_back(w + " (node '" + node->label() + "', " + node->target + ")");
      g.nodes.push_back(std::move(node));
    }

    for (size_t i = 0; i < nodes.size(); ++i) {
      const Json& nj = nodes[i];
      Node& node = *g.nodes[i];
      const std::string& w = nodeWhere[i];
      const Json& ins = field(nj, "inputs", w);
      expectArray(ins, w + ".inputs");
      for (size_t k = 0; k < ins.size(); ++k) {
        std::string wi = w + ".inputs[" + std::to_string(k) + "]";
        const Json& na = ins[k];
        ir::NamedArgument a;
        a.name = str(field(na, "name", wi), wi + ".name");
        if (has(na, "kind")) a.kind = integer(na["kind"], wi + ".kind");
        a.arg = arg(field(na, "arg", wi), Mode::Resolve, nullptr, wi + ".arg");
        node.inputs.push_back(std::move(a));
      }
      if (has(nj, "metadata")) {
        const Json& md = nj["metadata"];
        if (!md.is_object()) invalidInput(w + ".metadata", "expected a JSON object");
        for (auto it = md.begin(); it != md.end(); ++it)
          node.metadata[it.key()] = str(it.value(), w + ".metadata." + it.key());
      }
      auto stackIt = node.metadata.find("nn_module_stack");
      if (stackIt != node.metadata.end()) {
        auto frames = ir::parseModuleStack(stackIt->second);
        if (!frames) invalidInput(w + ".metadata.nn_module_stack", "malformed nn_module_stack '" + stackIt->second + "'");
        node.moduleStack = std::move(*frames);
      }
    }

    for (size_t i = 0; i < outputs.size(); ++i)
      g.outputs.push_back(arg(outputs[i], Mode::Resolve, nullptr, where_ + ".outputs[" + std::to_string(i) + "]"));

    attachMeta(j);
  }

 private:
  enum class Mode { Define, Resolve };

  Value* ref(const std::string& name, ValueKind kind, Mode mode, Node* producer, const std::string& w) {
    if (mode == Mode::Define) {
      Value* v = g_->define(name, kind, producer);
      if (!v) invalidInput(w, "value '" + name + "' is defined twice");
      return v;
    }
    Value* v = g_->find(name);
    if (!v) invalidInput(w, "uses undefined value '" + name + "'");
    if (v->kind != kind)
      invalidInput(w, "value '" + name + "' is a " + ir::valueKindName(v->kind) + ", used as a " +
                          ir::valueKindName(kind));
    return v;
  }

  ir::Ref tensorRef(const Json& j, Mode mode, Node* producer, const std::string& w) {
    return ir::Ref{ref(str(field(j, "name", w), w + ".name"), ValueKind::Tensor, mode, producer, w), nullptr};
  }

  // {"as_name": s} or a literal {"as_int"/"as_bool"/"as_float": x}.
  ir::Ref symRef(const Json& j, ValueKind kind, const char* literalKey, Mode mode, Node* producer,
                 const std::string& w) {
    if (!j.is_object() || j.size() != 1) invalidInput(w, "expected {\"as_name\"} or {\"" + std::string(literalKey) + "\"}");
    if (j.contains("as_name"))
      return ir::Ref{ref(str(j["as_name"], w + ".as_name"), kind, mode, producer, w), nullptr};
    if (j.contains(literalKey)) return ir::Ref{nullptr, j};
    invalidInput(w, "unknown variant '" + j.begin().key() + "'");
  }

  ir::Ref optionalTensorRef(const Json& j, Mode mode, Node* producer, const std::string& w) {
    if (!j.is_object() || j.size() != 1) invalidInput(w, "expected {\"as_tensor\"} or {\"as_none\"}");
    if (j.contains("as_tensor")) return tensorRef(j["as_tensor"], mode, producer, w + ".as_tensor");
    if (j.contains("as_none")) return ir::Ref{nullptr, j};
    invalidInput(w, "unknown OptionalTensorArgument variant '" + j.begin().key() + "'");
  }

  Argument arg(const Json& j, Mode mode, Node* producer, const std::string& w) {
    if (!j.is_object() || j.size() != 1)
      invalidInput(w, "an Argument must be a JSON object with exactly one key");
    const std::string& key = j.begin().key();
    auto tag = ir::argTagFromKey(key);
    if (!tag) invalidInput(w, "unknown Argument variant '" + key + "'");
    const Json& p = j.begin().value();
    std::string wp = w + "." + key;
    Argument a;
    a.tag = *tag;
    auto eachIn = [&](auto fn) {
      expectArray(p, wp);
      for (size_t i = 0; i < p.size(); ++i) a.refs.push_back(fn(p[i], wp + "[" + std::to_string(i) + "]"));
    };
    switch (*tag) {
      case ArgTag::None: a.literal = p; break;
      case ArgTag::Tensor: a.refs.push_back(tensorRef(p, mode, producer, wp)); break;
      case ArgTag::Tensors:
        eachIn([&](const Json& e, const std::string& we) { return tensorRef(e, mode, producer, we); });
        break;
      case ArgTag::Int: case ArgTag::ScalarType: case ArgTag::MemoryFormat: case ArgTag::Layout:
        integer(p, wp);
        a.literal = p;
        break;
      case ArgTag::Ints:
        expectArrayOf(p, wp, [](const Json& e) { return e.is_number_integer(); }, "an integer");
        a.literal = p;
        break;
      case ArgTag::Float:
        if (!isFloat(p)) invalidInput(wp, "expected a float");
        a.literal = p;
        break;
      case ArgTag::Floats:
        expectArrayOf(p, wp, isFloat, "a float");
        a.literal = p;
        break;
      case ArgTag::String: case ArgTag::Operator:
        str(p, wp);
        a.literal = p;
        break;
      case ArgTag::Strings:
        expectArrayOf(p, wp, [](const Json& e) { return e.is_string(); }, "a string");
        a.literal = p;
        break;
      case ArgTag::Bool:
        if (!p.is_boolean()) invalidInput(wp, "expected a bool");
        a.literal = p;
        break;
      case ArgTag::Bools:
        expectArrayOf(p, wp, [](const Json& e) { return e.is_boolean(); }, "a bool");
        a.literal = p;
        break;
      case ArgTag::Device:
        str(field(p, "type", wp), wp + ".type");
        a.literal = p;
        break;
      case ArgTag::Complex:
        if (!isFloat(field(p, "real", wp)) || !isFloat(field(p, "imag", wp))) invalidInput(wp, "expected real and imag floats");
        a.literal = p;
        break;
      case ArgTag::IntLists:
        expectArrayOf(p, wp, [](const Json& e) {
          if (!e.is_array()) return false;
          for (const auto& x : e) if (!x.is_number_integer()) return false;
          return true;
        }, "a list of integers");
        a.literal = p;
        break;
      case ArgTag::FloatLists:
        expectArrayOf(p, wp, [](const Json& e) {
          if (!e.is_array()) return false;
          for (const auto& x : e) if (!isFloat(x)) return false;
          return true;
        }, "a list of floats");
        a.literal = p;
        break;
      case ArgTag::SymInt: a.refs.push_back(symRef(p, ValueKind::SymInt, "as_int", mode, producer, wp)); break;
      case ArgTag::SymBool: a.refs.push_back(symRef(p, ValueKind::SymBool, "as_bool", mode, producer, wp)); break;
      case ArgTag::SymFloat: a.refs.push_back(symRef(p, ValueKind::SymFloat, "as_float", mode, producer, wp)); break;
      case ArgTag::SymInts:
        eachIn([&](const Json& e, const std::string& we) { return symRef(e, ValueKind::SymInt, "as_int", mode, producer, we); });
        break;
      case ArgTag::SymBools:
        eachIn([&](const Json& e, const std::string& we) { return symRef(e, ValueKind::SymBool, "as_bool", mode, producer, we); });
        break;
      case ArgTag::SymFloats:
        eachIn([&](const Json& e, const std::string& we) { return symRef(e, ValueKind::SymFloat, "as_float", mode, producer, we); });
        break;
      case ArgTag::OptionalTensor: a.refs.push_back(optionalTensorRef(p, mode, producer, wp)); break;
      case ArgTag::OptionalTensors:
        eachIn([&](const Json& e, const std::string& we) { return optionalTensorRef(e, mode, producer, we); });
        break;
      case ArgTag::CustomObj:
        a.name = str(field(p, "class_fqn", wp), wp + ".class_fqn");
        a.refs.push_back(ir::Ref{ref(str(field(p, "name", wp), wp + ".name"), ValueKind::CustomObj, mode, producer, wp), nullptr});
        break;
      case ArgTag::NestedTensors:
        expectArray(p, wp);
        for (size_t i = 0; i < p.size(); ++i) {
          std::string wi = wp + "[" + std::to_string(i) + "]";
          expectArray(p[i], wi);
          a.nesting.push_back(p[i].size());
          for (size_t k = 0; k < p[i].size(); ++k)
            a.refs.push_back(tensorRef(p[i][k], mode, producer, wi + "[" + std::to_string(k) + "]"));
        }
        break;
      case ArgTag::StringToArgument:
        if (!p.is_object()) invalidInput(wp, "expected a JSON object");
        for (auto it = p.begin(); it != p.end(); ++it)
          a.entries.emplace_back(it.key(), arg(it.value(), mode, producer, wp + "." + it.key()));
        break;
      case ArgTag::Graph: {
        if (mode == Mode::Define) invalidInput(wp, "a graph cannot be an output");
        a.name = str(field(p, "name", wp), wp + ".name");
        a.graph = std::make_shared<Graph>();
        GraphReader(wp + ".graph").read(field(p, "graph", wp), *a.graph);
        break;
      }
    }
    return a;
  }

  void attachMeta(const Json& j) {
    auto table = [&](const char* key) -> const Json* {
      auto it = j.find(key);
      if (it == j.end() || it->is_null()) return nullptr;
      if (!it->is_object()) invalidInput(where_ + "." + key, "expected a JSON object");
      return &*it;
    };
    const Json* tensors = table("tensor_values");
    const Json* symInts = table("sym_int_values");
    const Json* symBools = table("sym_bool_values");
    const Json* symFloats = table("sym_float_values");
    const Json* objs = table("custom_obj_values");
    for (auto& v : g_->values) {
      auto pick = [&](const Json* t) -> const Json* {
        if (!t) return nullptr;
        auto it = t->find(v->name);
        return it == t->end() ? nullptr : &*it;
      };
      switch (v->kind) {
        case ValueKind::Tensor:
          if (const Json* m = pick(tensors)) v->meta = parseTensorMeta(*m, where_ + ".tensor_values." + v->name);
          break;
        case ValueKind::SymInt: if (const Json* m = pick(symInts)) v->symMeta = *m; break;
        case ValueKind::SymBool: if (const Json* m = pick(symBools)) v->symMeta = *m; break;
        case ValueKind::SymFloat: if (const Json* m = pick(symFloats)) v->symMeta = *m; break;
        case ValueKind::CustomObj: if (const Json* m = pick(objs)) v->symMeta = *m; break;
      }
    }
  }

  std::string where_;
  Graph* g_ = nullptr;
};

Argument resolveName(const Graph& g, const Json& j, ValueKind kind, const std::string& w) {
  const std::string& name = str(field(j, "name", w), w + ".name");
  Value* v = g.find(name);
  if (!v) invalidInput(w, "signature names undefined value '" + name + "'");
  if (v->kind != kind) invalidInput(w, "signature value '" + name + "' is a " + ir::valueKindName(v->kind));
  Argument a = Argument::tensor(v);
  if (kind == ValueKind::CustomObj) {
    a.tag = ArgTag::CustomObj;
    a.name = optString(j, "class_fqn", w);
  }
  return a;
}

// A user_input / user_output Argument in the signature refers to the top graph.
Argument signatureArgument(const Graph& g, const Json& j, const std::string& w) {
  if (!j.is_object() || j.size() != 1) invalidInput(w, "an Argument must be a JSON object with exactly one key");
  const std::string& key = j.begin().key();
  auto tag = ir::argTagFromKey(key);
  if (!tag) invalidInput(w, "unknown Argument variant '" + key + "'");
  const Json& p = j.begin().value();
  Argument a;
  a.tag = *tag;
  switch (*tag) {
    case ArgTag::Tensor: return resolveName(g, p, ValueKind::Tensor, w + "." + key);
    case ArgTag::CustomObj: return resolveName(g, p, ValueKind::CustomObj, w + "." + key);
    case ArgTag::SymInt: case ArgTag::SymBool: case ArgTag::SymFloat:
      if (p.is_object() && p.contains("as_name")) {
        const std::string& name = str(p["as_name"], w + "." + key + ".as_name");
        Value* v = g.find(name);
        if (!v) invalidInput(w, "signature names undefined value '" + name + "'");
        ValueKind want = *tag == ArgTag::SymInt ? ValueKind::SymInt : *tag == ArgTag::SymBool ? ValueKind::SymBool : ValueKind::SymFloat;
        if (v->kind != want) invalidInput(w, "signature value '" + name + "' is a " + ir::valueKindName(v->kind));
        a.refs.push_back(ir::Ref{v, nullptr});
      } else {
        a.refs.push_back(ir::Ref{nullptr, p});
      }
      return a;
    default:
      if (argTagHasRefs(*tag)) invalidInput(w, "unsupported signature argument variant '" + key + "'");
      a.literal = p;
      return a;
  }
}

}  // namespace

// Verbatim fields (metadata, hints, constants, config entries) are copied and
// written back by nlohmann::json, which recurses: refuse nesting deep enough to
// overflow the stack. Real files nest under 20 levels (about 7 more per nested
// higher-order graph). Checked without recursion.
void checkJsonDepth(const Json& root, const std::string& where) {
  std::vector<std::pair<const Json*, size_t>> todo{{&root, 1}};
  while (!todo.empty()) {
    auto [j, depth] = todo.back();
    todo.pop_back();
    if (!j->is_structured()) continue;
    if (depth >= kMaxJsonDepth) invalidInput(where, "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
    for (const Json& child : *j) todo.emplace_back(&child, depth + 1);
  }
}

ir::TensorMeta parseTensorMeta(const Json& j, const std::string& w) {
  ir::TensorMeta m;
  int64_t dtype = integer(field(j, "dtype", w), w + ".dtype");
  m.dtype = dtype < 0 || dtype > 255 ? -1 : static_cast<int>(dtype);
  if (!ir::dtypeInfo(m.dtype)) invalidInput(w + ".dtype", "unknown dtype code " + std::to_string(dtype));
  const Json& sizes = field(j, "sizes", w);
  expectArray(sizes, w + ".sizes");
  for (size_t i = 0; i < sizes.size(); ++i) m.sizes.push_back(parseSymInt(sizes[i], w + ".sizes[" + std::to_string(i) + "]"));
  {
    // Required, as in torch's schema: a 0-d tensor has [] and nothing else does.
    const Json& strides = field(j, "strides", w);
    expectArray(strides, w + ".strides");
    for (size_t i = 0; i < strides.size(); ++i) m.strides.push_back(parseSymInt(strides[i], w + ".strides[" + std::to_string(i) + "]"));
  }
  if (has(j, "storage_offset")) m.storageOffset = parseSymInt(j["storage_offset"], w + ".storage_offset");
  m.requiresGrad = optBool(j, "requires_grad", false, w);
  if (has(j, "device")) {
    m.device.type = str(field(j["device"], "type", w + ".device"), w + ".device.type");
    if (has(j["device"], "index")) m.device.index = integer(j["device"]["index"], w + ".device.index");
  }
  if (has(j, "layout")) m.layout = static_cast<int>(integer(j["layout"], w + ".layout"));
  // Everything downstream (byte counts, from_blob/as_strided in the emitter,
  // the runner's shapes) trusts these, so they are checked here, once.
  for (size_t i = 0; i < m.sizes.size(); ++i)
    if (!m.sizes[i].isExpr && m.sizes[i].value < 0)
      invalidInput(w + ".sizes[" + std::to_string(i) + "]", "negative size " + std::to_string(m.sizes[i].value));
  {
    if (m.strides.size() != m.sizes.size())
      invalidInput(w + ".strides", std::to_string(m.strides.size()) + " strides for " + std::to_string(m.sizes.size()) +
                                       " sizes");
    for (size_t i = 0; i < m.strides.size(); ++i)
      if (!m.strides[i].isExpr && m.strides[i].value < 0)
        invalidInput(w + ".strides[" + std::to_string(i) + "]", "negative stride " + std::to_string(m.strides[i].value));
  }
  if (!m.storageOffset.isExpr && m.storageOffset.value < 0)
    invalidInput(w + ".storage_offset", "negative storage offset " + std::to_string(m.storageOffset.value));
  return m;
}

ir::Program parseProgram(const Json& j) {
  ir::Program p;
  if (!j.is_object()) invalidInput("", "the program must be a JSON object");
  checkJsonDepth(j, "");
  const Json& version = field(j, "schema_version", "schema_version");
  p.schemaMajor = static_cast<int>(integer(field(version, "major", "schema_version"), "schema_version.major"));
  p.schemaMinor = static_cast<int>(integer(field(version, "minor", "schema_version"), "schema_version.minor"));
  if (p.schemaMajor != kSchemaMajor)
    invalidInput("schema_version.major", "unsupported schema major version " + std::to_string(p.schemaMajor) +
                                              " (pipecut reads major " + std::to_string(kSchemaMajor) + ")");
  p.torchVersion = optString(j, "torch_version", "");
  if (has(j, "opset_version")) p.opsetVersion = j["opset_version"];
  if (has(j, "range_constraints")) p.rangeConstraints = j["range_constraints"];
  if (has(j, "verifiers")) p.verifiers = j["verifiers"];
  if (has(j, "guards_code")) p.guardsCode = j["guards_code"];

  const Json& gm = field(j, "graph_module", "graph_module");
  GraphReader("graph_module.graph").read(field(gm, "graph", "graph_module"), p.graph);
  if (has(gm, "metadata")) p.graphModuleMetadata = gm["metadata"];
  if (has(gm, "treespec_namedtuple_fields")) p.treespecNamedtupleFields = gm["treespec_namedtuple_fields"];

  const std::string ws = "graph_module.signature";
  const Json& sig = field(gm, "signature", "graph_module");
  const Json& ins = field(sig, "input_specs", ws);
  expectArray(ins, ws + ".input_specs");
  for (size_t i = 0; i < ins.size(); ++i) {
    std::string w = ws + ".input_specs[" + std::to_string(i) + "]";
    const Json& s = ins[i];
    if (!s.is_object() || s.size() != 1) invalidInput(w, "an InputSpec must have exactly one key");
    const std::string& key = s.begin().key();
    const Json& b = s.begin().value();
    std::string wk = w + "." + key;
    ir::InputSpec spec;
    // Lifted inputs: {arg: {name}, <target field>: FQN}.
    struct Lifted {
      const char* key;
      ir::InputKind kind;
      const char* targetField;
      ValueKind valueKind;
    };
    static const Lifted kLifted[] = {
        {"parameter", ir::InputKind::Parameter, "parameter_name", ValueKind::Tensor},
        {"buffer", ir::InputKind::Buffer, "buffer_name", ValueKind::Tensor},
        {"tensor_constant", ir::InputKind::TensorConstant, "tensor_constant_name", ValueKind::Tensor},
        {"custom_obj", ir::InputKind::CustomObj, "custom_obj_name", ValueKind::CustomObj},
        {"token", ir::InputKind::Token, nullptr, ValueKind::Tensor},
    };
    if (key == "user_input") {
      spec.kind = ir::InputKind::UserInput;
      spec.arg = signatureArgument(p.graph, field(b, "arg", wk), wk + ".arg");
    } else if (key == "constant_input") {
      spec.kind = ir::InputKind::ConstantInput;
      spec.target = str(field(b, "name", wk), wk + ".name");
      spec.constantValue = field(b, "value", wk);
    } else {
      const Lifted* l = nullptr;
      for (const auto& candidate : kLifted)
        if (key == candidate.key) l = &candidate;
      if (!l) invalidInput(w, "unknown InputSpec variant '" + key + "'");
      spec.kind = l->kind;
      spec.arg = resolveName(p.graph, field(b, "arg", wk), l->valueKind, wk + ".arg");
      if (l->targetField) spec.target = str(field(b, l->targetField, wk), wk + "." + l->targetField);
      if (l->kind == ir::InputKind::Buffer) spec.persistent = optBool(b, "persistent", true, wk);
    }
    p.inputSpecs.push_back(std::move(spec));
  }

  const Json& outs = field(sig, "output_specs", ws);
  expectArray(outs, ws + ".output_specs");
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string w = ws + ".output_specs[" + std::to_string(i) + "]";
    const Json& s = outs[i];
    if (!s.is_object() || s.size() != 1) invalidInput(w, "an OutputSpec must have exactly one key");
    const std::string& key = s.begin().key();
    const Json& b = s.begin().value();
    std::string wk = w + "." + key;
    ir::OutputSpec spec;
    static const std::pair<const char*, std::pair<ir::OutputKind, const char*>> kinds[] = {
        {"loss_output", {ir::OutputKind::LossOutput, nullptr}},
        {"buffer_mutation", {ir::OutputKind::BufferMutation, "buffer_name"}},
        {"gradient_to_parameter", {ir::OutputKind::GradientToParameter, "parameter_name"}},
        {"gradient_to_user_input", {ir::OutputKind::GradientToUserInput, "user_input_name"}},
        {"user_input_mutation", {ir::OutputKind::UserInputMutation, "user_input_name"}},
        {"token", {ir::OutputKind::Token, nullptr}},
        {"parameter_mutation", {ir::OutputKind::ParameterMutation, "parameter_name"}},
    };
    if (key == "user_output") {
      spec.kind = ir::OutputKind::UserOutput;
      spec.arg = signatureArgument(p.graph, field(b, "arg", wk), wk + ".arg");
    } else {
      bool known = false;
      for (const auto& [k, info] : kinds) {
        if (key != k) continue;
        known = true;
        spec.kind = info.first;
        spec.arg = resolveName(p.graph, field(b, "arg", wk), ValueKind::Tensor, wk + ".arg");
        if (info.second) spec.target = str(field(b, info.second, wk), wk + "." + info.second);
      }
      if (!known) invalidInput(w, "unknown OutputSpec variant '" + key + "'");
    }
    p.outputSpecs.push_back(std::move(spec));
  }

  if (has(gm, "module_call_graph")) {
    const Json& mcg = gm["module_call_graph"];
    expectArray(mcg, "graph_module.module_call_graph");
    for (size_t i = 0; i < mcg.size(); ++i) {
      std::string w = "graph_module.module_call_graph[" + std::to_string(i) + "]";
      ir::ModuleCallEntry e;
      e.fqn = str(field(mcg[i], "fqn", w), w + ".fqn");
      if (has(mcg[i], "signature")) {
        // Carving copies the root call's pytree specs into the manifest.
        const Json& sig = mcg[i]["signature"];
        if (!sig.is_object()) invalidInput(w + ".signature", "expected a JSON object");
        for (const char* spec : {"in_spec", "out_spec"})
          if (has(sig, spec)) str(sig[spec], w + ".signature." + spec);
        e.signature = sig;
      }
      p.moduleCallGraph.push_back(std::move(e));
    }
  }
  return p;
}

}  // namespace pipecut::pt2
