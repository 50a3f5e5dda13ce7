// models/<name>.json -> ir::Program, on simdjson's DOM (pt2/json_reader.h):
// every field is type-checked where it is read, and every refusal names its
// JSON path. Paths are built only on error, so a 10^5-node program reads in
// well under a second.
#include "pt2/program_json.h"

#include <algorithm>
#include <deque>
#include <memory>

#include <absl/container/flat_hash_map.h>

#include "pt2/json_reader.h"
#include "support/error.h"
#include "support/phase_times.h"

namespace pipecut::pt2 {

using ir::Argument;
using ir::ArgTag;
using ir::Graph;
using ir::Json;
using ir::Node;
using ir::Value;
using ir::ValueKind;
using json::Element;
using json::fail;
using json::field;
using json::find;
using json::Path;
using json::str;

namespace {

template <class Pred>
void expectArrayOf(Element j, const Path& where, Pred ok, const char* what) {
  size_t i = 0;
  for (Element e : json::array(j, where)) {
    if (!ok(e)) fail(where[i], std::string("expected ") + what);
    ++i;
  }
}

std::string owned(std::string_view s) { return std::string(s); }

const char* expectedSym(std::string_view literalKey) {
  if (literalKey == "as_int") return "expected {\"as_name\"} or {\"as_int\"}";
  if (literalKey == "as_bool") return "expected {\"as_name\"} or {\"as_bool\"}";
  return "expected {\"as_name\"} or {\"as_float\"}";
}

// Parses one graph scope. Values are defined by the graph's inputs and its
// nodes' outputs before any use is resolved, so a graph whose nodes are out of
// order still reads (normalization then fixes the order); a use of a name that
// nothing defines is an error here.
// Shared by the readers of one program (nested graphs included): metadata
// strings and parsed module stacks, each distinct text once.
struct ReaderCaches {
  struct Interned {
    std::shared_ptr<const std::string> text;
    // For nn_module_stack texts, their parse, once: shared by the nodes of
    // one module call and by their copies.
    std::shared_ptr<const std::vector<ir::ModuleFrame>> stack;
  };
  // One table per metadata key, keyed by views of the interned strings
  // themselves. Apart, because their sizes differ by orders: a deep model
  // has ~30 distinct stack traces and ~160 torch_fn texts, looked up at
  // almost every node, but a distinct nn_module_stack per module call (~2*10^4
  // at 10^5 nodes), looked up once per call. In one table the hot few would
  // hash into a bucket array of the many, a cache miss per lookup.
  struct PerKey {
    std::string key;
    // Flat, keyed by views of `entries`' texts: a lookup reads one slot
    // group and, on a probable hit, the text; the entries stay put.
    absl::flat_hash_map<std::string_view, Interned*> table;
    std::deque<Interned> entries;
    // The texts interned last under this key, most recent first. Consecutive
    // nodes mostly repeat one of a few (the nodes of one module call, of
    // one source line; a module and the submodule it calls, in turn):
    // comparing with hot copies skips hashing ~1 KB and probing the table.
    static constexpr size_t kRecent = 4;
    Interned* recent[kRecent] = {};  // of `entries`
  };
  // A deque: `table` and `recent` point into a PerKey's `entries`, so a
  // PerKey must stay where it is made. A growing vector would copy it
  // (std::deque's move constructor is not noexcept) and leave them dangling.
  std::deque<PerKey> keys;  // a handful, in order of first appearance
  // Every frame's module path and call, numbered (ir/module_paths.h).
  std::shared_ptr<ir::ModulePaths> modulePaths = std::make_shared<ir::ModulePaths>();

  // Room for the module stacks of `nodes` nodes (a distinct stack per
  // module call, a few nodes each): growing the tables rehashed 10^4 entries
  // a dozen times, each a cache miss at 10^5 nodes.
  void expectNodes(size_t nodes) {
    expectedStacks = std::max(expectedStacks, nodes / 4 + 16);
    modulePaths->reserve(expectedStacks);
  }
  size_t expectedStacks = 0;

  Interned& intern(std::string_view key, std::string_view text) {
    auto slot = std::find_if(keys.begin(), keys.end(), [&](const PerKey& e) { return e.key == key; });
    if (slot == keys.end()) {
      slot = keys.insert(keys.end(), PerKey{std::string(key), {}, {}, {}});
      if (key == "nn_module_stack") slot->table.reserve(expectedStacks);
    }
    Interned** recent = slot->recent;
    for (size_t k = 0; k < PerKey::kRecent && recent[k]; ++k)
      if (*recent[k]->text == text) {
        Interned* hit = recent[k];
        std::copy_backward(recent, recent + k, recent + k + 1);
        recent[0] = hit;
        return *hit;
      }
    auto it = slot->table.find(text);
    if (it == slot->table.end()) {
      auto s = std::make_shared<const std::string>(text);
      Interned& made = slot->entries.emplace_back(Interned{s, nullptr});
      it = slot->table.emplace(std::string_view(*s), &made).first;
    }
    std::copy_backward(recent, recent + PerKey::kRecent - 1, recent + PerKey::kRecent);
    recent[0] = it->second;
    return *it->second;
  }
};

class GraphReader {
 public:
  GraphReader(const Path& where, ReaderCaches& caches) : where_(where), caches_(caches) {}

  void read(Element j, Graph& g) {
    g_ = &g;
    const Path& w0 = where_;
    Path wInputs = w0["inputs"], wOutputs = w0["outputs"], wNodes = w0["nodes"];
    json::Array inputs = json::array(field(j, "inputs", w0), wInputs);
    json::Array outputs = json::array(field(j, "outputs", w0), wOutputs);
    json::Array nodes = json::array(field(j, "nodes", w0), wNodes);
    g.isSingleTensorReturn = json::optBool(j, "is_single_tensor_return", false, w0);

    size_t i = 0;
    const size_t firstValue = g.values.size();
    caches_.expectNodes(nodes.size());
    for (Element in : inputs) g.inputs.push_back(arg(in, Mode::Define, nullptr, wInputs[i++]));

    g.reserveValues(inputs.size() + nodes.size() + nodes.size() / 4);  // most nodes have one output
    std::vector<Element> nodeJson;
    nodeJson.reserve(nodes.size());
    std::vector<size_t> definedBy;  // how many values the graph has after node i's outputs
    definedBy.reserve(nodes.size());
    g.nodes.reserve(nodes.size());
    i = 0;
    for (Element nj : nodes) {
      Path w = wNodes[i++];
      auto node = std::make_unique<Node>();
      node->target = owned(str(field(nj, "target", w), w["target"]));
      Element e;
      if (find(nj, "name", e)) node->name = owned(str(e, w["name"]));
      if (find(nj, "is_hop_single_tensor_return", e))
        node->isHopSingleTensorReturn = json::boolean(e, w["is_hop_single_tensor_return"]);
      Path wo = w["outputs"];
      size_t k = 0;
      json::Array outs = json::array(field(nj, "outputs", w), wo);
      node->outputs.reserve(outs.size());
      for (Element out : outs)
        node->outputs.push_back(arg(out, Mode::Define, node.get(), wo[k++]));
      nodeJson.push_back(nj);
      definedBy.push_back(g.values.size());
      g.nodes.push_back(std::move(node));
    }
    // Every value is defined before any use resolves: index them together.
    if (const Value* dup = g.indexValuesFrom(firstValue)) {
      const std::string message = "value '" + dup->name + "' is defined twice";
      auto [at, out] = definitionOf(dup);
      if (!dup->producer) fail(at < g.inputs.size() ? wInputs[at] : wInputs, message);
      if (at < g.nodes.size() && out < g.nodes[at]->outputs.size()) fail(wNodes[at]["outputs"][out], message);
      fail(wNodes, message);
    }

    for (i = 0; i < g.nodes.size(); ++i) {
      Element nj = nodeJson[i];
      Node& node = *g.nodes[i];
      recentEnd_ = definedBy[i];
      Path w = wNodes[i].node(&node);
      Path wi = w["inputs"];
      size_t k = 0;
      json::Array ins = json::array(field(nj, "inputs", w), wi);
      node.inputs.reserve(ins.size());
      for (Element na : ins) {
        Path wa = wi[k++];
        ir::NamedArgument a;
        a.name = owned(str(field(na, "name", wa), wa["name"]));
        Element kind;
        if (find(na, "kind", kind)) a.kind = json::integer(kind, wa["kind"]);
        a.arg = arg(field(na, "arg", wa), Mode::Resolve, nullptr, wa["arg"]);
        if (a.arg.tag == ArgTag::Graph && !node.isHigherOrder())
          fail(wa["arg"], "a graph argument is only valid on a higher-order op (torch.ops.higher_order.*)");
        node.inputs.push_back(std::move(a));
      }
      Element md;
      if (find(nj, "metadata", md)) {
        Path wm = w["metadata"];
        auto metadata = std::make_shared<Node::Metadata>();
        for (auto kv : json::object(md, wm)) {
          ReaderCaches::Interned& text = caches_.intern(kv.key, str(kv.value, wm[kv.key]));
          metadata->push_back({owned(kv.key), text.text});
          if (kv.key == "nn_module_stack") node.moduleStack = moduleStack(text, wm);
        }
        node.metadata = std::move(metadata);
      }
    }

    recentEnd_ = g.values.size();
    i = 0;
    for (Element out : outputs) g.outputs.push_back(arg(out, Mode::Resolve, nullptr, wOutputs[i++]));

    attachMeta(j);
  }

 private:
  enum class Mode { Define, Resolve };

  // Most uses name a value that one of the last few nodes made. Those are
  // the last values defined before recentEnd_ (values are defined in node
  // order): a short scan over Values allocated side by side finds them
  // without the index, whose slots at 10^5 values are cache misses.
  Value* findNear(std::string_view name) const {
    const auto& values = g_->values;
    const size_t end = std::min(recentEnd_, values.size());
    const size_t stop = end > kNear ? end - kNear : 0;
    for (size_t i = end; i-- > stop;)
      if (values[i]->name == name) return values[i].get();
    return g_->find(name);
  }
  static constexpr size_t kNear = 16;

  Value* ref(std::string_view name, ValueKind kind, Mode mode, Node* producer, const Path& w) {
    if (mode == Mode::Define) return g_->defineUnindexed(owned(name), kind, producer);  // indexed by read()
    Value* v = findNear(name);
    if (!v) fail(w, "uses undefined value '" + owned(name) + "'");
    if (v->kind != kind)
      fail(w, "value '" + owned(name) + "' is a " + ir::valueKindName(v->kind) + ", used as a " +
                  ir::valueKindName(kind));
    return v;
  }

  ir::Ref tensorRef(Element j, Mode mode, Node* producer, const Path& w) {
    return ir::Ref{ref(str(field(j, "name", w), w["name"]), ValueKind::Tensor, mode, producer, w), nullptr};
  }

  // {"as_name": s} or a literal {"as_int"/"as_bool"/"as_float": x}.
  ir::Ref symRef(Element j, ValueKind kind, const char* literalKey, Mode mode, Node* producer, const Path& w) {
    auto [k, v] = json::only(j, w, expectedSym(literalKey));
    if (k == "as_name") return ir::Ref{ref(str(v, w["as_name"]), kind, mode, producer, w), nullptr};
    if (k == literalKey) return ir::Ref{nullptr, json::toJson(j)};
    fail(w, "unknown variant '" + owned(k) + "'");
  }

  ir::Ref optionalTensorRef(Element j, Mode mode, Node* producer, const Path& w) {
    auto [k, v] = json::only(j, w, "expected {\"as_tensor\"} or {\"as_none\"}");
    if (k == "as_tensor") return tensorRef(v, mode, producer, w["as_tensor"]);
    if (k == "as_none") return ir::Ref{nullptr, json::toJson(j)};
    fail(w, "unknown OptionalTensorArgument variant '" + owned(k) + "'");
  }

  Argument arg(Element j, Mode mode, Node* producer, const Path& w) {
    auto member = json::only(j, w, "an Argument must be a JSON object with exactly one key");
    std::string_view key = member.first;
    Element p = member.second;  // not a structured binding: the lambdas below capture it
    auto tag = ir::argTagFromKey(key);
    if (!tag) fail(w, "unknown Argument variant '" + owned(key) + "'");
    Path wp = w[key];
    Argument a;
    a.tag = *tag;
    auto eachIn = [&](auto fn) {
      size_t i = 0;
      for (Element e : json::array(p, wp)) {
        a.refs.push_back(fn(e, wp[i]));
        ++i;
      }
    };
    auto isInt = [](Element e) { return json::isInteger(e); };
    switch (*tag) {
      case ArgTag::None: a.literal = json::toJson(p); break;
      case ArgTag::Tensor: a.refs.push_back(tensorRef(p, mode, producer, wp)); break;
      case ArgTag::Tensors:
        eachIn([&](Element e, const Path& we) { return tensorRef(e, mode, producer, we); });
        break;
      case ArgTag::Int: case ArgTag::ScalarType: case ArgTag::MemoryFormat: case ArgTag::Layout:
        json::integer(p, wp);
        a.literal = json::toJson(p);
        break;
      case ArgTag::Ints:
        expectArrayOf(p, wp, isInt, "an integer");
        a.literal = json::toJson(p);
        break;
      case ArgTag::Float:
        if (!json::isFloat(p)) fail(wp, "expected a float");
        a.literal = json::toJson(p);
        break;
      case ArgTag::Floats:
        expectArrayOf(p, wp, json::isFloat, "a float");
        a.literal = json::toJson(p);
        break;
      case ArgTag::String: case ArgTag::Operator:
        str(p, wp);
        a.literal = json::toJson(p);
        break;
      case ArgTag::Strings:
        expectArrayOf(p, wp, json::isString, "a string");
        a.literal = json::toJson(p);
        break;
      case ArgTag::Bool:
        json::boolean(p, wp);
        a.literal = json::toJson(p);
        break;
      case ArgTag::Bools:
        expectArrayOf(p, wp, [](Element e) { return e.type() == simdjson::dom::element_type::BOOL; }, "a bool");
        a.literal = json::toJson(p);
        break;
      case ArgTag::Device:
        str(field(p, "type", wp), wp["type"]);
        a.literal = json::toJson(p);
        break;
      case ArgTag::Complex:
        if (!json::isFloat(field(p, "real", wp)) || !json::isFloat(field(p, "imag", wp)))
          fail(wp, "expected real and imag floats");
        a.literal = json::toJson(p);
        break;
      case ArgTag::IntLists:
        expectArrayOf(p, wp, [](Element e) {
          if (!json::isArray(e)) return false;
          for (Element x : json::Array(e.get_array().value_unsafe())) if (!json::isInteger(x)) return false;
          return true;
        }, "a list of integers");
        a.literal = json::toJson(p);
        break;
      case ArgTag::FloatLists:
        expectArrayOf(p, wp, [](Element e) {
          if (!json::isArray(e)) return false;
          for (Element x : json::Array(e.get_array().value_unsafe())) if (!json::isFloat(x)) return false;
          return true;
        }, "a list of floats");
        a.literal = json::toJson(p);
        break;
      case ArgTag::SymInt: a.refs.push_back(symRef(p, ValueKind::SymInt, "as_int", mode, producer, wp)); break;
      case ArgTag::SymBool: a.refs.push_back(symRef(p, ValueKind::SymBool, "as_bool", mode, producer, wp)); break;
      case ArgTag::SymFloat: a.refs.push_back(symRef(p, ValueKind::SymFloat, "as_float", mode, producer, wp)); break;
      case ArgTag::SymInts:
        eachIn([&](Element e, const Path& we) { return symRef(e, ValueKind::SymInt, "as_int", mode, producer, we); });
        break;
      case ArgTag::SymBools:
        eachIn([&](Element e, const Path& we) { return symRef(e, ValueKind::SymBool, "as_bool", mode, producer, we); });
        break;
      case ArgTag::SymFloats:
        eachIn([&](Element e, const Path& we) { return symRef(e, ValueKind::SymFloat, "as_float", mode, producer, we); });
        break;
      case ArgTag::OptionalTensor: a.refs.push_back(optionalTensorRef(p, mode, producer, wp)); break;
      case ArgTag::OptionalTensors:
        eachIn([&](Element e, const Path& we) { return optionalTensorRef(e, mode, producer, we); });
        break;
      case ArgTag::CustomObj:
        a.rare().name = owned(str(field(p, "class_fqn", wp), wp["class_fqn"]));
        a.refs.push_back(ir::Ref{ref(str(field(p, "name", wp), wp["name"]), ValueKind::CustomObj, mode, producer, wp), nullptr});
        break;
      case ArgTag::NestedTensors: {
        size_t i = 0;
        for (Element inner : json::array(p, wp)) {
          Path wi = wp[i++];
          json::Array list = json::array(inner, wi);
          a.rare().nesting.push_back(list.size());
          size_t k = 0;
          for (Element t : list) a.refs.push_back(tensorRef(t, mode, producer, wi[k++]));
        }
        break;
      }
      case ArgTag::StringToArgument:
        for (auto kv : json::object(p, wp))
          a.rare().entries.emplace_back(owned(kv.key), arg(kv.value, mode, producer, wp[kv.key]));
        break;
      case ArgTag::Graph: {
        if (mode == Mode::Define) fail(wp, "a graph cannot be an output");
        a.rare().name = owned(str(field(p, "name", wp), wp["name"]));
        a.rare().graph = std::make_shared<Graph>();
        Path wg = wp["graph"];
        GraphReader(wg, caches_).read(field(p, "graph", wp), *a.rare().graph);
        break;
      }
    }
    return a;
  }

  // The per-value tables: each entry is looked up by name (tables naming
  // values this scope does not define, or of another kind, are ignored).
  void attachMeta(Element j) {
    struct Table {
      const char* key;
      ValueKind kind;
    };
    static const Table kTables[] = {{"tensor_values", ValueKind::Tensor},
                                    {"sym_int_values", ValueKind::SymInt},
                                    {"sym_bool_values", ValueKind::SymBool},
                                    {"sym_float_values", ValueKind::SymFloat},
                                    {"custom_obj_values", ValueKind::CustomObj}};
    // torch.export writes each table in definition order, so the value after
    // the last one found is nearly always the next entry's: checking it first
    // skips the index, whose slots and Values at 10^5 values are cache misses
    // (~10^5 lookups, ~20 ms). Any other order still resolves through it.
    g_->numberValues();
    const auto& values = g_->values;
    for (const Table& t : kTables) {
      Element table;
      if (!find(j, t.key, table)) continue;
      Path wt = where_[t.key];
      size_t next = 0;
      for (auto kv : json::object(table, wt)) {
        Value* v = next < values.size() && values[next]->name == kv.key ? values[next].get() : g_->find(kv.key);
        if (!v || v->kind != t.kind) continue;
        next = v->number + 1;
        if (t.kind == ValueKind::Tensor)
          v->meta = json::tensorMeta(kv.value, wt[kv.key]);
        else
          v->symMeta = json::toJson(kv.value);
      }
    }
  }

  // Where `v` is defined: {input index, npos} for a graph input, else
  // {node index, output index} (npos where not found). Indices, not a Path:
  // a Path refers to its parents, temporaries of the caller's expression.
  std::pair<size_t, size_t> definitionOf(const Value* v) const {
    constexpr size_t npos = static_cast<size_t>(-1);
    auto names = [v](const Argument& a) {
      bool found = false;
      a.forEachValue([&](const Value* x) { found = found || x == v; });
      return found;
    };
    if (!v->producer) {
      for (size_t i = 0; i < g_->inputs.size(); ++i)
        if (names(g_->inputs[i])) return {i, npos};
      return {npos, npos};
    }
    for (size_t i = 0; i < g_->nodes.size(); ++i) {
      if (g_->nodes[i].get() != v->producer) continue;
      for (size_t k = 0; k < g_->nodes[i]->outputs.size(); ++k)
        if (names(g_->nodes[i]->outputs[k])) return {i, k};
      return {i, npos};
    }
    return {npos, npos};
  }

  // Nodes of one module call carry the same nn_module_stack text: each
  // distinct text is parsed once and its frames shared.
  const std::shared_ptr<const std::vector<ir::ModuleFrame>>& moduleStack(ReaderCaches::Interned& text,
                                                                          const Path& wm) {
    if (!text.stack) {
      bool tooDeep = false;
      text.stack = ir::parseModuleStack(*text.text, caches_.modulePaths, &tooDeep);
      if (tooDeep)
        fail(wm["nn_module_stack"], "module path nested deeper than " + std::to_string(ir::ModulePaths::kMaxDepth) +
                                        " levels");
      if (!text.stack) fail(wm["nn_module_stack"], "malformed nn_module_stack '" + *text.text + "'");
    }
    return text.stack;
  }

  const Path& where_;
  Graph* g_ = nullptr;
  ReaderCaches& caches_;
  size_t recentEnd_ = 0;  // findNear scans the values defined before this one
};

Argument resolveName(const Graph& g, Element j, ValueKind kind, const Path& w) {
  std::string_view name = str(field(j, "name", w), w["name"]);
  Value* v = g.find(name);
  if (!v) fail(w, "signature names undefined value '" + owned(name) + "'");
  if (v->kind != kind) fail(w, "signature value '" + owned(name) + "' is a " + ir::valueKindName(v->kind));
  Argument a = Argument::tensor(v);
  if (kind == ValueKind::CustomObj) {
    a.tag = ArgTag::CustomObj;
    a.rare().name = json::optString(j, "class_fqn", w);
  }
  return a;
}

// A user_input / user_output Argument in the signature refers to the top graph.
Argument signatureArgument(const Graph& g, Element j, const Path& w) {
  auto [key, p] = json::only(j, w, "an Argument must be a JSON object with exactly one key");
  auto tag = ir::argTagFromKey(key);
  if (!tag) fail(w, "unknown Argument variant '" + owned(key) + "'");
  Path wk = w[key];
  Argument a;
  a.tag = *tag;
  switch (*tag) {
    case ArgTag::Tensor: return resolveName(g, p, ValueKind::Tensor, wk);
    case ArgTag::CustomObj: return resolveName(g, p, ValueKind::CustomObj, wk);
    case ArgTag::SymInt: case ArgTag::SymBool: case ArgTag::SymFloat: {
      Element nameJson;
      if (json::isObject(p) && p.get_object().value_unsafe().at_key("as_name").get(nameJson) == simdjson::SUCCESS) {
        std::string_view name = str(nameJson, wk["as_name"]);
        Value* v = g.find(name);
        if (!v) fail(w, "signature names undefined value '" + owned(name) + "'");
        ValueKind want = *tag == ArgTag::SymInt    ? ValueKind::SymInt
                         : *tag == ArgTag::SymBool ? ValueKind::SymBool
                                                   : ValueKind::SymFloat;
        if (v->kind != want) fail(w, "signature value '" + owned(name) + "' is a " + ir::valueKindName(v->kind));
        a.refs.push_back(ir::Ref{v, nullptr});
      } else {
        a.refs.push_back(ir::Ref{nullptr, json::toJson(p)});
      }
      return a;
    }
    default:
      if (argTagHasRefs(*tag)) fail(w, "unsupported signature argument variant '" + owned(key) + "'");
      a.literal = json::toJson(p);
      return a;
  }
}

void readInputSpecs(ir::Program& p, Element sig, const Path& ws) {
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
  Path wl = ws["input_specs"];
  size_t i = 0;
  for (Element s : json::array(field(sig, "input_specs", ws), wl)) {
    Path w = wl[i++];
    auto [key, b] = json::only(s, w, "an InputSpec must have exactly one key");
    Path wk = w[key];
    ir::InputSpec spec;
    if (key == "user_input") {
      spec.kind = ir::InputKind::UserInput;
      spec.arg = signatureArgument(p.graph, field(b, "arg", wk), wk["arg"]);
    } else if (key == "constant_input") {
      spec.kind = ir::InputKind::ConstantInput;
      spec.target = owned(str(field(b, "name", wk), wk["name"]));
      spec.constantValue = json::toJson(field(b, "value", wk));
    } else {
      const Lifted* l = nullptr;
      for (const auto& candidate : kLifted)
        if (key == candidate.key) l = &candidate;
      if (!l) fail(w, "unknown InputSpec variant '" + owned(key) + "'");
      spec.kind = l->kind;
      spec.arg = resolveName(p.graph, field(b, "arg", wk), l->valueKind, wk["arg"]);
      if (l->targetField) spec.target = owned(str(field(b, l->targetField, wk), wk[l->targetField]));
      if (l->kind == ir::InputKind::Buffer) spec.persistent = json::optBool(b, "persistent", true, wk);
    }
    p.inputSpecs.push_back(std::move(spec));
  }
}

void readOutputSpecs(ir::Program& p, Element sig, const Path& ws) {
  static const std::pair<const char*, std::pair<ir::OutputKind, const char*>> kKinds[] = {
      {"loss_output", {ir::OutputKind::LossOutput, nullptr}},
      {"buffer_mutation", {ir::OutputKind::BufferMutation, "buffer_name"}},
      {"gradient_to_parameter", {ir::OutputKind::GradientToParameter, "parameter_name"}},
      {"gradient_to_user_input", {ir::OutputKind::GradientToUserInput, "user_input_name"}},
      {"user_input_mutation", {ir::OutputKind::UserInputMutation, "user_input_name"}},
      {"token", {ir::OutputKind::Token, nullptr}},
      {"parameter_mutation", {ir::OutputKind::ParameterMutation, "parameter_name"}},
  };
  Path wl = ws["output_specs"];
  size_t i = 0;
  for (Element s : json::array(field(sig, "output_specs", ws), wl)) {
    Path w = wl[i++];
    auto [key, b] = json::only(s, w, "an OutputSpec must have exactly one key");
    Path wk = w[key];
    ir::OutputSpec spec;
    if (key == "user_output") {
      spec.kind = ir::OutputKind::UserOutput;
      spec.arg = signatureArgument(p.graph, field(b, "arg", wk), wk["arg"]);
    } else {
      bool known = false;
      for (const auto& [k, info] : kKinds) {
        if (key != k) continue;
        known = true;
        spec.kind = info.first;
        spec.arg = resolveName(p.graph, field(b, "arg", wk), ValueKind::Tensor, wk["arg"]);
        if (info.second) spec.target = owned(str(field(b, info.second, wk), wk[info.second]));
      }
      if (!known) fail(w, "unknown OutputSpec variant '" + owned(key) + "'");
    }
    p.outputSpecs.push_back(std::move(spec));
  }
}

void readModuleCallGraph(ir::Program& p, Element gm) {
  Element mcg;
  if (!find(gm, "module_call_graph", mcg)) return;
  Path wl("graph_module.module_call_graph");
  size_t i = 0;
  for (Element entry : json::array(mcg, wl)) {
    Path w = wl[i++];
    ir::ModuleCallEntry e;
    e.fqn = owned(str(field(entry, "fqn", w), w["fqn"]));
    Element sig;
    if (find(entry, "signature", sig)) {
      // Carving copies the root call's pytree specs into the manifest.
      Path wsig = w["signature"];
      json::object(sig, wsig);
      for (const char* spec : {"in_spec", "out_spec"}) {
        Element s;
        if (find(sig, spec, s)) str(s, wsig[spec]);
      }
      e.signature = json::toJson(sig);
    }
    p.moduleCallGraph.push_back(std::move(e));
  }
}

}  // namespace

ir::Program parseProgram(std::string_view text, size_t readableAfter) {
  simdjson::dom::parser parser;
  Element j = [&] {
    support::ScopedPhase phase("read program: parse json");
    return json::parse(parser, text, "", readableAfter);
  }();
  Path root("");
  ir::Program p;
  if (!json::isObject(j)) fail(root, "the program must be a JSON object");
  Path wv = root["schema_version"];
  Element version = field(j, "schema_version", root);
  p.schemaMajor = static_cast<int>(json::integer(field(version, "major", wv), wv["major"]));
  p.schemaMinor = static_cast<int>(json::integer(field(version, "minor", wv), wv["minor"]));
  if (p.schemaMajor != kSchemaMajor)
    fail(wv["major"], "unsupported schema major version " + std::to_string(p.schemaMajor) + " (pipecut reads major " +
                          std::to_string(kSchemaMajor) + ")");
  p.torchVersion = json::optString(j, "torch_version", root);
  Element e;
  if (find(j, "opset_version", e)) p.opsetVersion = json::toJson(e);
  if (find(j, "range_constraints", e)) p.rangeConstraints = json::toJson(e);
  if (find(j, "verifiers", e)) p.verifiers = json::toJson(e);
  if (find(j, "guards_code", e)) p.guardsCode = json::toJson(e);

  Path wgm = root["graph_module"];
  Element gm = field(j, "graph_module", root);
  Path wg = wgm["graph"];
  ReaderCaches caches;
  GraphReader(wg, caches).read(field(gm, "graph", wgm), p.graph);
  if (find(gm, "metadata", e)) p.graphModuleMetadata = json::toJson(e);
  if (find(gm, "treespec_namedtuple_fields", e)) p.treespecNamedtupleFields = json::toJson(e);

  Path ws = wgm["signature"];
  Element sig = field(gm, "signature", wgm);
  readInputSpecs(p, sig, ws);
  readOutputSpecs(p, sig, ws);
  readModuleCallGraph(p, gm);
  return p;
}

ir::Program parseProgram(const Json& j) { return parseProgram(std::string_view(dumpJson(j))); }

}  // namespace pipecut::pt2
