#pragma once
// pipecut's graph IR: a direct, typed mirror of torch.export's serialized
// ExportedProgram (schema major 8), with use-def links instead of names.
//
// Values are owned by the Graph that defines them; arguments point at them.
// Nested graphs of higher-order ops (wrap_with_set_grad_enabled, cond, ...)
// are separate scopes, exactly as in the schema: a body sees only its own
// inputs. Literal payloads that pipecut never rewrites (ints, floats, devices,
// ...) are kept as their schema JSON so that writing a graph back reproduces
// them exactly.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/module_paths.h"
#include "ir/value_index.h"

namespace pipecut::ir {

using Json = nlohmann::json;

// ---- Symbolic ints and tensor metadata -----------------------------------
struct SymInt {
  bool isExpr = false;
  int64_t value = 0;     // when !isExpr
  std::string expr;      // sympy srepr, when isExpr
  Json hint;             // SymExprHint or null, verbatim
  std::string str() const;  // "4", or the short symbol name ("s77") for an expression
  // The value, or for an expression the example value export recorded (its
  // integer hint); nullopt when there is none.
  std::optional<int64_t> example() const;
  // The same size: equal values, or the same expression (hints aside).
  bool sameAs(const SymInt& o) const { return isExpr == o.isExpr && (isExpr ? expr == o.expr : value == o.value); }
};

struct Device {
  std::string type = "cpu";
  std::optional<int64_t> index;
};

struct TensorMeta {
  int dtype = 0;
  std::vector<SymInt> sizes;
  bool requiresGrad = false;
  Device device;
  std::vector<SymInt> strides;
  SymInt storageOffset;
  int layout = 7;
  bool isStatic() const;
  std::optional<int64_t> numel() const;   // nullopt if a size is symbolic
  std::string shapeStr() const;           // "[2, s77, 64]"
};

// ---- Values, arguments, nodes, graphs -------------------------------------
struct Node;
struct Graph;

enum class ValueKind { Tensor, SymInt, SymBool, SymFloat, CustomObj };
const char* valueKindName(ValueKind);

// A value's tensor metadata, or none: optional's interface, its contents
// out of line, immutable and shared (a carved stage's copy of a value shares
// its original's). Out of line because every pass walk reads Values'
// producers and numbers but none reads their metadata: inline, the 184 bytes
// of it put each Value on several cache lines, and at 10^5 nodes the walks
// are bound by cache misses.
class SharedTensorMeta {
 public:
  SharedTensorMeta() = default;
  SharedTensorMeta(TensorMeta m) : p_(std::make_shared<const TensorMeta>(std::move(m))) {}
  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return p_ != nullptr; }
  const TensorMeta& operator*() const { return *p_; }
  const TensorMeta* operator->() const { return p_.get(); }

 private:
  std::shared_ptr<const TensorMeta> p_;
};

// Hot fields (what pass walks read) first, on the object's first cache line.
struct Value {
  Node* producer = nullptr;          // nullptr: a graph input
  // Scratch for utilities that keep per-value state in arrays (see
  // Graph::numberValues), like Node::number.
  mutable size_t number = 0;
  ValueKind kind = ValueKind::Tensor;
  std::string name;
  SharedTensorMeta meta;             // tensors with a tensor_values entry
  Json symMeta;                      // sym_*_values / custom_obj_values entry, verbatim
};

// Argument variants, in the schema's declaration order.
enum class ArgTag {
  None, Tensor, Tensors, Int, Ints, Float, Floats, String, Strings, SymInt, SymInts,
  ScalarType, MemoryFormat, Layout, Device, Bool, Bools, SymBool, SymBools,
  OptionalTensors, Graph, CustomObj, Operator, SymFloat, SymFloats, OptionalTensor,
  Complex, NestedTensors, IntLists, StringToArgument, FloatLists,
};
const char* argTagKey(ArgTag);                        // "as_tensor"
std::optional<ArgTag> argTagFromKey(std::string_view);
bool argTagHasRefs(ArgTag);                           // may point at Values

// One element of a reference-bearing argument: a Value, or a literal element
// such as {"as_int": 3} in a mixed SymInt list or {"as_none": true} in an
// optional-tensor list.
struct Ref {
  Value* value = nullptr;
  Json literal;
};

// An argument's Refs, with vector's interface where the IR uses it. Almost
// every argument holds exactly one (a tensor, a symbol): that one lives
// inline, so reading it costs no heap block and no dependent load, and every
// pass walk reads it (at 10^5 nodes those loads are cache misses). Lists
// live in a vector.
class RefList {
 public:
  RefList() = default;
  RefList(std::initializer_list<Ref> refs) { *this = refs; }
  RefList& operator=(std::initializer_list<Ref> refs) {
    if (refs.size() == 1) rep_ = *refs.begin();
    else rep_ = std::vector<Ref>(refs);
    return *this;
  }

  size_t size() const { return one() ? 1 : many().size(); }
  bool empty() const { return size() == 0; }
  Ref* begin() { return one() ? &std::get<Ref>(rep_) : many().data(); }
  Ref* end() { return begin() + size(); }
  const Ref* begin() const { return one() ? &std::get<Ref>(rep_) : many().data(); }
  const Ref* end() const { return begin() + size(); }
  Ref& operator[](size_t i) { return begin()[i]; }
  const Ref& operator[](size_t i) const { return begin()[i]; }
  const Ref& at(size_t i) const {
    if (i >= size()) throw std::out_of_range("RefList::at");
    return begin()[i];
  }
  void push_back(Ref r) {
    if (one()) {
      std::vector<Ref> list;
      list.push_back(std::move(std::get<Ref>(rep_)));
      list.push_back(std::move(r));
      rep_ = std::move(list);
    } else if (many().empty()) {
      rep_ = std::move(r);
    } else {
      many().push_back(std::move(r));
    }
  }

 private:
  bool one() const { return rep_.index() == 1; }
  std::vector<Ref>& many() { return std::get<0>(rep_); }
  const std::vector<Ref>& many() const { return std::get<0>(rep_); }
  // Invariant: a vector holds zero or at least two Refs, never one.
  std::variant<std::vector<Ref>, Ref> rep_;
};

// One cache line (64 bytes): every pass walk strides over nodes' argument
// arrays to reach their refs, and at 10^5 nodes those walks are bound by the
// bytes they pull from memory. The payloads of rare variants (string-to-
// argument entries, nested-tensor lengths, a body and its name, a custom
// object's class) live out of line, made when first written (rare()).
struct Argument {
  ArgTag tag = ArgTag::None;
  RefList refs;                      // reference-bearing variants (1 entry for scalars)
  Json literal;                      // payload of literal-only variants, verbatim

  struct Rare;
  Argument() = default;
  Argument(const Argument& o);
  Argument(Argument&&) noexcept = default;
  Argument& operator=(const Argument& o);
  Argument& operator=(Argument&&) noexcept = default;
  ~Argument();

  // Read-only views; empty when the variant has none.
  const std::vector<std::pair<std::string, Argument>>& entries() const;  // StringToArgument
  const std::vector<size_t>& nesting() const;  // NestedTensors: lengths of the inner lists
  const std::string& name() const;             // Graph: attribute name; CustomObj: class_fqn
  const std::shared_ptr<Graph>& graph() const; // Graph: the body
  // The body when this is a Graph argument that has one, else nullptr.
  Graph* body() const { return tag == ArgTag::Graph ? graph().get() : nullptr; }
  // The out-of-line payload, made if absent: for writing those fields.
  Rare& rare();

  static Argument literalOf(ArgTag tag, Json literal);  // a literal-only variant, e.g. {tag Float, 1.5}

  static Argument tensor(Value* v);
  static Argument integer(int64_t v);  // {"as_int": v}
  bool isValue() const { return refs.size() == 1 && refs[0].value && !isList(); }
  bool isList() const;
  Value* value() const { return refs.empty() ? nullptr : refs[0].value; }

  int64_t asInt() const;
  double asFloat() const;           // accepts "Infinity", "-Infinity", "NaN"
  bool asBool() const;
  const std::string& asString() const;

  // Visits every Value this argument points at (not into nested graphs).
  template <class F> void forEachValue(F&& f) const;
  template <class F> void forEachRef(F&& f);

 private:
  std::unique_ptr<Rare> rare_;
};

struct Argument::Rare {
  std::vector<std::pair<std::string, Argument>> entries;
  std::vector<size_t> nesting;
  std::string name;
  std::shared_ptr<Graph> graph;
};

template <class F> void Argument::forEachValue(F&& f) const {
  for (const Ref& r : refs) if (r.value) f(r.value);
  if (rare_)
    for (const auto& [k, a] : rare_->entries) a.forEachValue(f);
}

template <class F> void Argument::forEachRef(F&& f) {
  for (Ref& r : refs) f(r);
  if (rare_)
    for (auto& [k, a] : rare_->entries) a.forEachRef(f);
}

// The argument first, so that its refs share the first cache line.
struct NamedArgument {
  Argument arg;
  std::string name;
  std::optional<int64_t> kind;       // ArgumentKind: 1 positional, 2 keyword

  NamedArgument() = default;
  NamedArgument(std::string n, Argument a, std::optional<int64_t> k = std::nullopt)
      : arg(std::move(a)), name(std::move(n)), kind(k) {}
};

struct ModuleFrame {
  std::string key;   // call-site identifier, e.g. "L__self___layers_0"
  std::string path;  // module FQN, e.g. "layers.0" ("" for the root)
  std::string type;  // qualified class name
  // Where parseModuleStack interned `path` and (key, path): ids in `paths`,
  // which the stack holding this frame keeps alive. All frames of one
  // program share one table (the reader's; copies and carved stages share
  // their original's frames), so within a graph equal ids mean equal paths.
  const ModulePaths* paths = nullptr;
  uint32_t module = ModulePaths::kRoot;
  uint32_t call = 0;
};

// For walks that index arrays by frame ids: the table of the first frame
// asked about, and an internal error for a frame of another table (ids
// that would mean other paths), which one graph never holds.
class FrameTable {
 public:
  const ModulePaths& of(const ModuleFrame& f);
  const ModulePaths* get() const { return table_; }

 private:
  const ModulePaths* table_ = nullptr;
};

// What pass walks read (inputs, outputs, number, whether the node is a
// higher-order op) shares the object's first cache line.
struct Node {
  std::vector<NamedArgument> inputs;
  std::vector<Argument> outputs;
  // Scratch for utilities that index a graph's nodes in arrays (see
  // ir::numberNodes): the position at the last numbering. Maps keyed by
  // node pointers cost a cache miss per lookup at 10^5 nodes; this costs
  // none. Stale after a reorder until renumbered: check with ir::positionIn.
  mutable size_t number = 0;
  // isHigherOrder(), worked out from `target` on the first ask (-1: not
  // yet). Every walk asks every node (subgraphs()), and a target's
  // characters live on the heap: at 10^5 nodes that was a cache miss per
  // node per walk. Sound because a node's target is written before anything
  // asks and never rewritten (the reader, unroll-map and the symbolic
  // rederivation write the targets of nodes they have just made; a copy
  // copies both); the verifier checks it.
  mutable int8_t higherOrderCache = -1;
  std::string target;                // "torch.ops.aten.add.Tensor"
  // Node metadata (stack traces of ~1 KB, nn_module_stack, ...), verbatim, in
  // the order read. Immutable and shared: carving copies every node into a
  // stage, and a copy keeps its original's. Values are shared too: the reader
  // interns them, since every layer of a deep model repeats the same traces.
  struct MetadataEntry {
    std::string key;
    std::shared_ptr<const std::string> value;
  };
  using Metadata = std::vector<MetadataEntry>;
  std::shared_ptr<const Metadata> metadata;
  std::optional<bool> isHopSingleTensorReturn;
  std::optional<std::string> name;
  // Parsed nn_module_stack, outermost first; shared by the nodes of one module
  // call (the reader parses each distinct stack once) and by copies.
  std::shared_ptr<const std::vector<ModuleFrame>> moduleStack;
  const std::vector<ModuleFrame>& frames() const;  // empty when there is no stack

  bool isHigherOrder() const {
    if (higherOrderCache < 0) higherOrderCache = targetIsHigherOrder();
    return higherOrderCache != 0;
  }
  bool targetIsHigherOrder() const { return target.rfind("torch.ops.higher_order.", 0) == 0; }
  std::string opName() const;        // target without the "torch.ops." prefix
  std::string label() const;         // name, else first output's name, else target
  const std::string& modulePath() const;  // innermost module FQN ("" when none)
  // The input passed for the schema argument `name`, or nullptr when the
  // call left it to its default (export omits defaulted arguments).
  NamedArgument* input(std::string_view name);
  const NamedArgument* input(std::string_view name) const;
  // The tensor passed for `name`; nullptr when absent or not one tensor.
  Value* tensorInput(std::string_view name) const;
  template <class F> void forEachInputValue(F&& f) const {
    for (const auto& in : inputs) in.arg.forEachValue(f);
  }
  template <class F> void forEachOutputValue(F&& f) const {
    for (const auto& out : outputs) out.forEachValue(f);
  }
  // The bodies among the inputs. Only higher-order ops have any (the reader
  // refuses a graph argument elsewhere, the verifier checks it), so for
  // other nodes this reads the target alone.
  std::vector<Graph*> subgraphs() const;
};

struct Graph {
  std::vector<Argument> inputs;      // one per placeholder
  std::vector<Argument> outputs;
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<std::unique_ptr<Value>> values;
  bool isSingleTensorReturn = false;

  Value* find(std::string_view name) const;
  Value* define(const std::string& name, ValueKind kind, Node* producer);  // nullptr if taken
  // For a reader defining a whole scope: values added without indexing, then
  // indexed together (faster at 10^5 values, see ValueIndex::insertAll).
  // Until indexValuesFrom runs, find() and define() do not see them.
  Value* defineUnindexed(const std::string& name, ValueKind kind, Node* producer);
  // Indexes values[first..]; the first whose name was taken, or nullptr.
  const Value* indexValuesFrom(size_t first);
  void reserveValues(size_t n);  // room for n values without rehashing
  // Sets every owned Value's `number` to its index in `values`, so that
  // per-value state can live in a vector instead of a map keyed by pointers.
  // Nothing to do when nothing was added or removed since the last call
  // (the passes, the verifier and carving each ask; at 10^5 values a
  // numbering is a cache miss per value).
  void numberValues() const;
  // Whether `v` is one of this graph's values (valid after numberValues()).
  bool owns(const Value* v) const { return v && v->number < values.size() && values[v->number].get() == v; }
  // Drops Values no longer defined by an input or a node (after passes remove nodes).
  void pruneValues();
  // The same for a caller that has just walked the graph and knows which
  // values an input or a node still defines: keeps values[i] where
  // defined[i], with `values` as numberValues() last numbered it (nothing
  // added or removed since). Spares pruneValues' walk over every node's
  // outputs, a cache miss per node at 10^5 nodes.
  void pruneValues(const std::vector<char>& defined);
  size_t nodeCountRecursive() const;

 private:
  // Keyed by the Values' own names: a Value is never renamed, and it lives
  // (behind its unique_ptr) as long as its entry here.
  ValueIndex byName_;
  // values.size() when numberValues() last numbered them; kNotNumbered
  // after define(), defineUnindexed() or a pruneValues() that removed any
  // (the only writers of `values`).
  static constexpr size_t kNotNumbered = static_cast<size_t>(-1);
  mutable size_t numberedCount_ = kNotNumbered;
};

// Software prefetch for a walk over g.nodes, forward (step 1) or backward
// (step -1): call at the top of iteration i. At 10^5 nodes a walk misses the
// cache on each Node, on its argument arrays and on the Values they name, and
// each of those loads waits on the one before (a node holds its arrays'
// address, an argument its value's). This asks for node i+8, the arguments
// of node i+4 (their first lines, already asked for) and the values of node
// i+2, so that they arrive while the nodes before them are worked on.
inline void prefetchWalk(const Graph& g, size_t i, std::ptrdiff_t step = 1) {
  auto node = [&](std::ptrdiff_t ahead) -> const Node* {
    const std::ptrdiff_t j = static_cast<std::ptrdiff_t>(i) + ahead * step;
    return j >= 0 && static_cast<size_t>(j) < g.nodes.size() ? g.nodes[static_cast<size_t>(j)].get() : nullptr;
  };
  if (const Node* n = node(8)) __builtin_prefetch(n);
  if (const Node* n = node(4)) {
    for (const auto& in : n->inputs) __builtin_prefetch(&in);
    for (const auto& out : n->outputs) __builtin_prefetch(&out);
  }
  if (const Node* n = node(2)) {
    // A single reference lives inline (RefList): no further load to reach it.
    for (const auto& in : n->inputs)
      if (in.arg.refs.size() == 1) __builtin_prefetch(in.arg.refs[0].value);
    for (const auto& out : n->outputs)
      if (out.refs.size() == 1) __builtin_prefetch(out.refs[0].value);
  }
}

// ---- Signature and program -------------------------------------------------
enum class InputKind { UserInput, Parameter, Buffer, TensorConstant, CustomObj, ConstantInput, Token };
enum class OutputKind {
  UserOutput, LossOutput, BufferMutation, GradientToParameter, GradientToUserInput,
  UserInputMutation, Token, ParameterMutation,
};
const char* inputKindKey(InputKind);    // "user_input", "parameter", ...
const char* outputKindKey(OutputKind);

struct InputSpec {
  InputKind kind = InputKind::UserInput;
  Argument arg;                      // the placeholder (not used by ConstantInput)
  std::string target;                // parameter/buffer/constant/custom-obj FQN, or constant_input name
  std::optional<bool> persistent;    // Buffer
  Json constantValue;                // ConstantInput
};

struct OutputSpec {
  OutputKind kind = OutputKind::UserOutput;
  Argument arg;
  std::string target;                // mutated buffer/parameter/user input name
};

struct ModuleCallEntry {
  std::string fqn;
  Json signature;                    // verbatim (pytree spec strings untouched), or null
};

struct Program {
  Graph graph;
  std::vector<InputSpec> inputSpecs;
  std::vector<OutputSpec> outputSpecs;
  std::vector<ModuleCallEntry> moduleCallGraph;
  Json graphModuleMetadata = Json::object();
  Json treespecNamedtupleFields = Json::object();
  Json opsetVersion = Json::object();
  Json rangeConstraints = Json::object();
  Json verifiers = Json::array();
  Json guardsCode = Json::array();
  int schemaMajor = 8;
  int schemaMinor = 0;
  std::string torchVersion;
};

// nn_module_stack: "key,path,type;key,path,type", split on ',' only at bracket
// depth 0 (paths like "slice(1, None, None)" contain commas); an entry that is a
// JSON array is accepted too. Frames are interned in `paths`, which the
// stack keeps alive. nullptr when malformed, or when a path nests
// ModulePaths::kMaxDepth levels or more (*tooDeep is then set).
std::shared_ptr<const std::vector<ModuleFrame>> parseModuleStack(
    std::string_view text, const std::shared_ptr<ModulePaths>& paths = std::make_shared<ModulePaths>(),
    bool* tooDeep = nullptr);
// How many outer frames two stacks share (same call: key and path, outermost
// first). Consecutive module calls of a deep model share all but the
// innermost few: walks that resolve a stack's frames take those from the
// previous stack instead of looking each one up again.
size_t sharedFrames(const std::vector<ModuleFrame>& a, const std::vector<ModuleFrame>& b);

}  // namespace pipecut::ir
