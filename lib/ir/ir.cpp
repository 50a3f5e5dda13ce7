#include "ir/ir.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "support/error.h"

namespace pipecut::ir {

namespace {

struct TagName { ArgTag tag; const char* key; bool refs; };
const TagName kTags[] = {
    {ArgTag::None, "as_none", false},
    {ArgTag::Tensor, "as_tensor", true},
    {ArgTag::Tensors, "as_tensors", true},
    {ArgTag::Int, "as_int", false},
    {ArgTag::Ints, "as_ints", false},
    {ArgTag::Float, "as_float", false},
    {ArgTag::Floats, "as_floats", false},
    {ArgTag::String, "as_string", false},
    {ArgTag::Strings, "as_strings", false},
    {ArgTag::SymInt, "as_sym_int", true},
    {ArgTag::SymInts, "as_sym_ints", true},
    {ArgTag::ScalarType, "as_scalar_type", false},
    {ArgTag::MemoryFormat, "as_memory_format", false},
    {ArgTag::Layout, "as_layout", false},
    {ArgTag::Device, "as_device", false},
    {ArgTag::Bool, "as_bool", false},
    {ArgTag::Bools, "as_bools", false},
    {ArgTag::SymBool, "as_sym_bool", true},
    {ArgTag::SymBools, "as_sym_bools", true},
    {ArgTag::OptionalTensors, "as_optional_tensors", true},
    {ArgTag::Graph, "as_graph", false},
    {ArgTag::CustomObj, "as_custom_obj", true},
    {ArgTag::Operator, "as_operator", false},
    {ArgTag::SymFloat, "as_sym_float", true},
    {ArgTag::SymFloats, "as_sym_floats", true},
    {ArgTag::OptionalTensor, "as_optional_tensor", true},
    {ArgTag::Complex, "as_complex", false},
    {ArgTag::NestedTensors, "as_nested_tensors", true},
    {ArgTag::IntLists, "as_int_lists", false},
    {ArgTag::StringToArgument, "as_string_to_argument", false},
    {ArgTag::FloatLists, "as_float_lists", false},
};
}  // namespace

const char* argTagKey(ArgTag t) { return kTags[static_cast<int>(t)].key; }
bool argTagHasRefs(ArgTag t) { return kTags[static_cast<int>(t)].refs; }
std::optional<ArgTag> argTagFromKey(std::string_view key) {
  for (const auto& t : kTags) if (key == t.key) return t.tag;
  return std::nullopt;
}

const char* valueKindName(ValueKind k) {
  switch (k) {
    case ValueKind::Tensor: return "tensor";
    case ValueKind::SymInt: return "SymInt";
    case ValueKind::SymBool: return "SymBool";
    case ValueKind::SymFloat: return "SymFloat";
    case ValueKind::CustomObj: return "custom object";
  }
  return "?";
}

// Turns sympy's srepr ("Add(Symbol('s0', integer=True), Integer(1))") into
// something a person reads ("Add(s0, 1)"); a bare symbol becomes its name.
std::optional<int64_t> SymInt::example() const {
  if (!isExpr) return value;
  if (hint.is_object() && hint.contains("as_int") && hint["as_int"].is_number_integer())
    return hint["as_int"].get<int64_t>();
  return std::nullopt;
}

std::string SymInt::str() const {
  if (!isExpr) return std::to_string(value);
  std::string out;
  size_t i = 0;
  auto skipCall = [&](size_t open) {  // index just past the matching ')'
    int depth = 0;
    for (size_t j = open; j < expr.size(); ++j) {
      if (expr[j] == '(') ++depth;
      else if (expr[j] == ')' && --depth == 0) return j + 1;
    }
    return expr.size();
  };
  while (i < expr.size()) {
    if (expr.compare(i, 8, "Symbol('") == 0) {
      size_t q = expr.find('\'', i + 8);
      if (q == std::string::npos) break;
      out += expr.substr(i + 8, q - i - 8);
      i = skipCall(i + 6);
    } else if (expr.compare(i, 8, "Integer(") == 0) {
      size_t close = expr.find(')', i);
      out += expr.substr(i + 8, close - i - 8);
      i = close + 1;
    } else {
      out += expr[i++];
    }
  }
  return out;
}

bool TensorMeta::isStatic() const {
  for (const auto& s : sizes) if (s.isExpr) return false;
  return true;
}

std::optional<int64_t> TensorMeta::numel() const {
  int64_t n = 1;
  for (const auto& s : sizes) {
    if (s.isExpr) return std::nullopt;
    n *= s.value;
  }
  return n;
}

std::string TensorMeta::shapeStr() const {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += sizes[i].str();
  }
  return s + "]";
}

Argument::Argument(const Argument& o)
    : tag(o.tag), refs(o.refs), literal(o.literal), rare_(o.rare_ ? std::make_unique<Rare>(*o.rare_) : nullptr) {}

Argument& Argument::operator=(const Argument& o) {
  if (this != &o) *this = Argument(o);
  return *this;
}

Argument::~Argument() = default;

namespace {
const Argument::Rare& noRare() {
  static const Argument::Rare none;
  return none;
}
}  // namespace

const std::vector<std::pair<std::string, Argument>>& Argument::entries() const {
  return rare_ ? rare_->entries : noRare().entries;
}
const std::vector<size_t>& Argument::nesting() const { return rare_ ? rare_->nesting : noRare().nesting; }
const std::string& Argument::name() const { return rare_ ? rare_->name : noRare().name; }
const std::shared_ptr<Graph>& Argument::graph() const { return rare_ ? rare_->graph : noRare().graph; }

Argument::Rare& Argument::rare() {
  if (!rare_) rare_ = std::make_unique<Rare>();
  return *rare_;
}

Argument Argument::literalOf(ArgTag tag, Json literal) {
  Argument a;
  a.tag = tag;
  a.literal = std::move(literal);
  return a;
}

Argument Argument::tensor(Value* v) {
  Argument a;
  a.tag = ArgTag::Tensor;
  a.refs.push_back(Ref{v, nullptr});
  return a;
}

Argument Argument::integer(int64_t v) {
  Argument a;
  a.tag = ArgTag::Int;
  a.literal = v;
  return a;
}

bool Argument::isList() const {
  switch (tag) {
    case ArgTag::Tensors: case ArgTag::SymInts: case ArgTag::SymBools: case ArgTag::SymFloats:
    case ArgTag::OptionalTensors: case ArgTag::NestedTensors:
      return true;
    default:
      return false;
  }
}

int64_t Argument::asInt() const {
  if (!literal.is_number_integer()) internalError(argTagKey(tag), "argument is not an integer");
  return literal.get<int64_t>();
}

double Argument::asFloat() const {
  if (literal.is_number()) return literal.get<double>();
  if (literal.is_string()) {
    const auto& s = literal.get_ref<const std::string&>();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  internalError(argTagKey(tag), "argument is not a float");
}

bool Argument::asBool() const {
  if (!literal.is_boolean()) internalError(argTagKey(tag), "argument is not a bool");
  return literal.get<bool>();
}

const std::string& Argument::asString() const {
  if (!literal.is_string()) internalError(argTagKey(tag), "argument is not a string");
  return literal.get_ref<const std::string&>();
}

NamedArgument* Node::input(std::string_view name) {
  for (auto& in : inputs)
    if (in.name == name) return &in;
  return nullptr;
}

const NamedArgument* Node::input(std::string_view name) const {
  return const_cast<Node*>(this)->input(name);
}

Value* Node::tensorInput(std::string_view name) const {
  const NamedArgument* a = input(name);
  return a && a->arg.tag == ArgTag::Tensor ? a->arg.value() : nullptr;
}

std::string Node::opName() const {
  constexpr std::string_view prefix = "torch.ops.";
  if (target.rfind(prefix, 0) == 0) return target.substr(prefix.size());
  return target;
}

std::string Node::label() const {
  if (name && !name->empty()) return *name;
  for (const auto& out : outputs)
    for (const auto& r : out.refs)
      if (r.value) return r.value->name;
  return target;
}

const std::string& Node::modulePath() const {
  static const std::string kEmpty;
  const auto& f = frames();
  return f.empty() ? kEmpty : f.back().path;
}

const ModulePaths& FrameTable::of(const ModuleFrame& f) {
  if (!table_) table_ = f.paths;
  if (!f.paths || f.paths != table_) internalError("graph", "module frames of two programs in one graph");
  return *table_;
}

const std::vector<ModuleFrame>& Node::frames() const {
  static const std::vector<ModuleFrame> kNone;
  return moduleStack ? *moduleStack : kNone;
}

std::vector<Graph*> Node::subgraphs() const {
  std::vector<Graph*> out;
  // Every pass asks every node; reading a target's prefix costs one cache
  // line where the arguments cost one per input (at 10^5 nodes, misses).
  if (!isHigherOrder()) return out;
  for (const auto& in : inputs)
    if (Graph* body = in.arg.body()) out.push_back(body);
  return out;
}

Value* Graph::find(std::string_view name) const { return byName_.find(name); }

Value* Graph::define(const std::string& name, ValueKind kind, Node* producer) {
  Value* v = defineUnindexed(name, kind, producer);
  if (byName_.insert(v)) return v;
  values.pop_back();
  return nullptr;
}

Value* Graph::defineUnindexed(const std::string& name, ValueKind kind, Node* producer) {
  auto v = std::make_unique<Value>();
  v->name = name;
  v->kind = kind;
  v->producer = producer;
  values.push_back(std::move(v));
  numberedCount_ = kNotNumbered;
  return values.back().get();
}

const Value* Graph::indexValuesFrom(size_t first) {
  if (first >= values.size()) return nullptr;
  return byName_.insertAll(values.data() + first, values.data() + values.size());
}

void Graph::reserveValues(size_t n) {
  values.reserve(n);
  byName_.reserve(n);
}

void Graph::numberValues() const {
  if (numberedCount_ == values.size()) return;
  for (size_t i = 0; i < values.size(); ++i) values[i]->number = i;
  numberedCount_ = values.size();
}

void Graph::pruneValues() {
  numberValues();
  std::vector<char> live(values.size(), 0);
  auto mark = [&](Value* v) {
    if (owns(v)) live[v->number] = 1;
  };
  for (const auto& in : inputs) in.forEachValue(mark);
  for (const auto& n : nodes) n->forEachOutputValue(mark);
  pruneValues(live);
}

void Graph::pruneValues(const std::vector<char>& defined) {
  if (defined.size() != values.size())
    throw Error(ErrorKind::Internal, "", "graph", "pruneValues: flags for " + std::to_string(defined.size()) +
                                                      " values, the graph has " + std::to_string(values.size()));
  if (std::find(defined.begin(), defined.end(), 0) == defined.end()) return;
  std::vector<std::unique_ptr<Value>> kept;
  kept.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (defined[i]) kept.push_back(std::move(values[i]));
    else byName_.erase(values[i].get());
  }
  values = std::move(kept);
  numberedCount_ = kNotNumbered;
}

size_t Graph::nodeCountRecursive() const {
  size_t n = nodes.size();
  for (const auto& node : nodes)
    for (Graph* g : node->subgraphs()) n += g->nodeCountRecursive();
  return n;
}

const char* inputKindKey(InputKind k) {
  switch (k) {
    case InputKind::UserInput: return "user_input";
    case InputKind::Parameter: return "parameter";
    case InputKind::Buffer: return "buffer";
    case InputKind::TensorConstant: return "tensor_constant";
    case InputKind::CustomObj: return "custom_obj";
    case InputKind::ConstantInput: return "constant_input";
    case InputKind::Token: return "token";
  }
  return "?";
}

const char* outputKindKey(OutputKind k) {
  switch (k) {
    case OutputKind::UserOutput: return "user_output";
    case OutputKind::LossOutput: return "loss_output";
    case OutputKind::BufferMutation: return "buffer_mutation";
    case OutputKind::GradientToParameter: return "gradient_to_parameter";
    case OutputKind::GradientToUserInput: return "gradient_to_user_input";
    case OutputKind::UserInputMutation: return "user_input_mutation";
    case OutputKind::Token: return "token";
    case OutputKind::ParameterMutation: return "parameter_mutation";
  }
  return "?";
}

size_t sharedFrames(const std::vector<ModuleFrame>& a, const std::vector<ModuleFrame>& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k].paths == b[k].paths && a[k].call == b[k].call) ++k;
  return k;
}

std::shared_ptr<const std::vector<ModuleFrame>> parseModuleStack(std::string_view text,
                                                                const std::shared_ptr<ModulePaths>& paths,
                                                                bool* tooDeep) {
  // The frames point into `paths`: one allocation holds both, and the
  // stack's pointer shares its ownership.
  struct Holder {
    std::shared_ptr<ModulePaths> paths;
    std::vector<ModuleFrame> frames;
  };
  auto holder = std::make_shared<Holder>();
  holder->paths = paths;
  std::vector<ModuleFrame>& frames = holder->frames;
  auto done = [&] { return std::shared_ptr<const std::vector<ModuleFrame>>(holder, &holder->frames); };
  if (text.empty()) return done();
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    std::vector<std::string> parts;
    if (!item.empty() && item.front() == '[') {
      // The JSON-array spelling proposed upstream: ["key", "path", "type"].
      Json j = Json::parse(item, nullptr, false);
      if (j.is_discarded() || !j.is_array()) return nullptr;
      for (const auto& p : j) {
        if (!p.is_string()) return nullptr;
        parts.push_back(p.get<std::string>());
      }
    } else {
      int depth = 0;
      size_t from = 0;
      for (size_t k = 0; k < item.size(); ++k) {
        const char c = item[k];
        if (c == '(' || c == '[') ++depth;
        if (c == ')' || c == ']') --depth;
        if (c == ',' && depth == 0) {
          parts.emplace_back(item.substr(from, k - from));
          from = k + 1;
        }
      }
      parts.emplace_back(item.substr(from));
    }
    if (parts.size() != 3) return nullptr;
    // torch's runtime-assert pass marks the nodes it adds (sym_size of the
    // inputs of a dynamic-shape program) with this placeholder frame: they
    // belong to no module, and no spec can name it.
    if (parts[0] != "_empty_nn_module_stack_from_metadata_hook") {
      const uint32_t module = paths->intern(parts[1]);
      if (module == ModulePaths::kNone) {
        if (tooDeep) *tooDeep = true;
        return nullptr;
      }
      const uint32_t call = paths->internCall(parts[0], module);
      frames.push_back(ModuleFrame{std::move(parts[0]), std::move(parts[1]), std::move(parts[2]), paths.get(), module, call});
    }
    if (end == text.size()) break;
    start = end + 1;
  }
  return done();
}

}  // namespace pipecut::ir
