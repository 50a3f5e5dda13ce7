#include "emit/torchscript.h"
#include "emit/torchscript_profile.h"

#include <cctype>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/csrc/jit/serialization/export.h>
#include <ATen/ATen.h>

#include "emit/control_flow.h"
#include "emit/dtypes.h"
#include "emit/stored_tensors.h"
#include "ir/op_traits.h"
#include "ir/state.h"
#include "support/error.h"

namespace pipecut::emit {

namespace jit = torch::jit;
using c10::IValue;

namespace {

// Python-level symbolic integer arithmetic (_operator.mul, math.floor, ...)
// and the TorchScript operator each becomes.
const std::map<std::string, std::string>& symbolicOps() {
  static const std::map<std::string, std::string> kOps = {
      {"_operator.add", "aten::add"}, {"_operator.sub", "aten::sub"}, {"_operator.mul", "aten::mul"},
      {"_operator.floordiv", "aten::floordiv"}, {"_operator.mod", "aten::remainder"},
      {"_operator.truediv", "aten::div"}, {"_operator.eq", "aten::eq"}, {"_operator.ne", "aten::ne"},
      {"_operator.lt", "aten::lt"}, {"_operator.le", "aten::le"}, {"_operator.gt", "aten::gt"},
      {"_operator.ge", "aten::ge"}, {"_operator.neg", "aten::neg"}, {"_operator.pow", "aten::pow"},
      {"math.floor", "aten::floor"}, {"math.ceil", "aten::ceil"}, {"torch.sym_max", "prim::max"},
      {"torch.sym_min", "prim::min"}, {"torch.sym_float", "aten::Float"}, {"torch.sym_int", "aten::Int"},
      {"torch.sym_not", "aten::__not__"}, {"math.trunc", "aten::Int"}};
  return kOps;
}

// "aten.add.Tensor" as LibTorch's registry names it (aten::add, overload
// "Tensor"; "default" is the empty overload); nullopt for a name that is not
// "ns.op.overload".
std::optional<c10::OperatorName> registryName(const std::string& qual) {
  size_t d1 = qual.find('.'), d2 = qual.rfind('.');
  if (d1 == std::string::npos || d1 == d2) return std::nullopt;
  const std::string overload = qual.substr(d2 + 1);
  return c10::OperatorName(qual.substr(0, d1) + "::" + qual.substr(d1 + 1, d2 - d1 - 1),
                           overload == "default" ? "" : overload);
}

// The TorchScript operator an ATen target is emitted as ("aten::size" for
// aten.sym_size.int); nullopt for a target that is not "ns.op.overload".
std::optional<c10::OperatorName> jitOperatorOf(const ir::Node& n) {
  std::optional<c10::OperatorName> name = registryName(n.opName());
  if (!name) return std::nullopt;
  if (name->name == "aten::sym_size" && name->overload_name == "int") return c10::OperatorName("aten::size", "int");
  if (name->name == "aten::sym_stride" && name->overload_name == "int") return c10::OperatorName("aten::stride", "int");
  if (name->name == "aten::sym_numel") return c10::OperatorName("aten::numel", "");
  return name;
}


class Emitter final : public BodyEmitter {
 public:
  Emitter(const pt2::Package& pkg, std::string className)
      : pkg_(pkg), cu_(std::make_shared<jit::CompilationUnit>()),
        root_(c10::QualifiedName("__torch__.pipecut." + className), cu_, false),
        graph_(std::make_shared<jit::Graph>()) {}

  // What is being emitted: a node or a lifted tensor ("" before either).
  const std::string& where() const override { return where_; }

  // For the profiler: remember which top-level program node inserted each
  // jit node (by index in the program's node list), and give tensors storage
  // of their own instead of the source's mapped bytes, so that the module may
  // outlive the package and a buffer update does not write to a read-only map.
  void trackOwners() {
    owners_.emplace();
    tensors_ = StoredTensors(StoredTensors::Bytes::Copied);
  }
  const std::unordered_map<jit::Node*, size_t>& owners() const { return *owners_; }
  const std::shared_ptr<jit::Graph>& graph() const { return graph_; }

  jit::Module build() {
    const ir::Program& p = pkg_.program;
    addTrainingAttr(root_);
    self_ = graph_->addInput("self");
    self_->setType(root_.type());
    homeDevice_ = findHomeDevice(p);

    // State (ir/state.h) comes as trailing forward() arguments, in spec
    // order, so that a runner passes the tensors of the sequence it runs;
    // the module's own attribute keeps its initial value.
    std::unordered_set<const ir::Value*> state;
    for (const auto& st : ir::findState(p)) state.insert(st.placeholder);
    std::vector<const ir::Value*> stateInputs;
    for (size_t i = 0; i < p.inputSpecs.size(); ++i) {
      const ir::InputSpec& s = p.inputSpecs[i];
      const ir::Value* v = s.arg.value();
      switch (s.kind) {
        case ir::InputKind::Parameter:
        case ir::InputKind::Buffer:
        case ir::InputKind::TensorConstant:
          registerTensor(s);
          if (state.count(v)) stateInputs.push_back(v);
          else env_[v] = attribute(s.target);
          break;
        case ir::InputKind::UserInput: {
          if (!v) fail("signature.input_specs[" + std::to_string(i) + "]", "constant user inputs are not supported");
          jit::Value* in = graph_->addInput(v->name);
          in->setType(typeOf(*v));
          env_[v] = in;
          break;
        }
        default:
          fail("signature.input_specs[" + std::to_string(i) + "]",
               std::string("inputs of kind '") + ir::inputKindKey(s.kind) + "' are not supported in TorchScript");
      }
    }
    for (const ir::Value* v : stateInputs) {
      jit::Value* in = graph_->addInput(v->name);
      in->setType(typeOf(*v));
      env_[v] = in;
    }
    makeRuntimeDevice();
    emitTopLevel(p.graph);

    std::vector<jit::Value*> results;
    for (size_t k = 0; k < p.outputSpecs.size(); ++k) {
      const ir::OutputSpec& s = p.outputSpecs[k];
      jit::Value* v = env_.at(s.arg.value());
      if (s.kind == ir::OutputKind::BufferMutation) {
        // Apply the update to the buffer the stage owns, as ExportedProgram.module() does.
        jit::Value* buffer = attribute(s.target);
        graph_->insert(c10::Symbol::fromQualString("aten::copy_"), {buffer, v});
        continue;
      }
      results.push_back(v);
    }
    jit::Value* tuple = graph_->insertNode(graph_->createTuple(results))->output();
    graph_->registerOutput(tuple);
    jit::EliminateDeadCode(graph_);
    graph_->lint();

    auto* fn = cu_->create_function(c10::QualifiedName(*root_.type()->name(), "forward"), graph_);
    root_.type()->addMethod(fn);
    root_.eval();
    return root_;
  }

 private:
  [[noreturn]] void fail(const std::string& where, const std::string& msg) {
    throw Error(ErrorKind::InvalidInput, "", where, msg);
  }

  static void addTrainingAttr(jit::Module& m) { m.register_attribute("training", c10::BoolType::get(), false); }

  static c10::TypePtr typeOf(const ir::Value& v) {
    switch (v.kind) {
      case ir::ValueKind::Tensor: return c10::TensorType::get();
      case ir::ValueKind::SymInt: return c10::IntType::get();
      case ir::ValueKind::SymFloat: return c10::FloatType::get();
      case ir::ValueKind::SymBool: return c10::BoolType::get();
      default: return c10::AnyType::get();
    }
  }

  static std::optional<ir::Device> findHomeDevice(const ir::Program& p) {
    for (const auto& v : p.graph.values)
      if (v->meta) return v->meta->device;
    return std::nullopt;
  }

  // The module that owns `fqn`'s leaf, created on first use.
  jit::Module& moduleFor(const std::string& path) {
    if (path.empty()) return root_;
    auto it = submodules_.find(path);
    if (it != submodules_.end()) return it->second;
    size_t dot = path.rfind('.');
    std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
    std::string leaf = dot == std::string::npos ? path : path.substr(dot + 1);
    jit::Module& up = moduleFor(parent);
    std::string cls = *root_.type()->name() == c10::QualifiedName() ? "m" : root_.type()->name()->qualifiedName();
    std::string mangled;
    for (char c : path) mangled += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
    jit::Module sub(c10::QualifiedName(cls + ".m_" + mangled), cu_, false);
    addTrainingAttr(sub);
    up.register_module(leaf, sub);
    return submodules_.emplace(path, sub).first->second;
  }

  void registerTensor(const ir::InputSpec& s) {
    where_ = "tensor '" + s.target + "'";
    const pt2::StoredTensor* t = pkg_.find(s.target);
    if (!t) fail(s.target, "no payload for this tensor");
    if (registered_.count(s.target)) return;
    at::Tensor value = tensors_.load(*t);
    size_t dot = s.target.rfind('.');
    std::string owner = dot == std::string::npos ? "" : s.target.substr(0, dot);
    std::string leaf = dot == std::string::npos ? s.target : s.target.substr(dot + 1);
    jit::Module& m = moduleFor(owner);
    if (s.kind == ir::InputKind::Parameter) m.register_parameter(leaf, value, false);
    else m.register_buffer(leaf, value);
    registered_.insert(s.target);
  }

  jit::Value* attribute(const std::string& fqn) {
    auto it = attrs_.find(fqn);
    if (it != attrs_.end()) return it->second;
    jit::Value* cur = self_;
    size_t start = 0;
    std::string prefix, parent = "m";
    while (true) {
      size_t dot = fqn.find('.', start);
      std::string part = fqn.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      prefix += (prefix.empty() ? "" : ".") + part;
      auto cached = attrs_.find(prefix);
      if (cached != attrs_.end()) {
        cur = cached->second;
      } else {
        cur = attrs_[prefix] = graph_->insertGetAttr(cur, part);
        // The printer names a getattr after its field, "_9" for a ModuleList's
        // "9", and its temporaries "_0", "_1", ...: with a list of 10^3 layers
        // each temporary's name search walked through the taken "_N" names
        // (quadratic: 6.7 s -> 1.8 s for the two stages of a 10^5-node split). "layers_9" collides
        // with nothing the printer makes up.
        if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos)
          cur->setDebugName(parent + "_" + part);
      }
      parent = part;
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return cur;
  }

  // The device value stages compute with: the device of their first tensor
  // input (or parameter), so a stage exported on CPU follows its inputs to a
  // GPU. Made before any node so that it dominates every use.
  void makeRuntimeDevice() {
    if (!homeDevice_) return;
    jit::Value* anchor = nullptr;
    for (jit::Value* in : graph_->inputs())
      if (in != self_ && in->type()->kind() == c10::TypeKind::TensorType) {
        anchor = in;
        break;
      }
    if (!anchor)
      for (const auto& s : pkg_.program.inputSpecs)
        if (s.kind == ir::InputKind::Parameter || s.kind == ir::InputKind::Buffer ||
            s.kind == ir::InputKind::TensorConstant) {
          anchor = attribute(s.target);
          break;
        }
    if (anchor) device_ = graph_->insert(c10::prim::device, {anchor});
  }

  void emitGraph(const ir::Graph& g) {
    for (const auto& n : g.nodes) emitNode(*n);
  }

  // The program's own nodes. Every insertion goes to the end of the graph, so
  // the jit nodes a program node adds are those after the last node before it.
  void emitTopLevel(const ir::Graph& g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      jit::Node* last = graph_->return_node()->prev();  // the param node while the graph is empty
      emitNode(*g.nodes[i]);
      if (owners_)
        for (jit::Node* jn = last->next(); jn != graph_->return_node(); jn = jn->next()) owners_->emplace(jn, i);
    }
  }

  void emitNode(const ir::Node& n) {
    where_ = "node '" + n.label() + "' (" + n.opName() + ")";
    if (ir::isExportGuard(n)) return;  // restates what export saw; would pin stages to its device
    if (std::optional<std::string> refusal = torchScriptRefusal(n)) fail(where_, *refusal);
    if (n.isHigherOrder()) return emitHigherOrder(n);
    if (n.target.rfind("torch.ops.", 0) != 0) return emitSymOp(n);
    if (n.opName() == "aten.item.default" && emitScalarOfTensor(n)) return;
    const c10::OperatorName name = *jitOperatorOf(n);  // torchScriptRefusal took it
    emitOperator(n, name.name, name.overload_name);
  }

  void emitOperator(const ir::Node& n, const std::string& name, const std::string& overload) {
    std::shared_ptr<jit::Operator> op = jit::findOperatorFor(c10::OperatorName(name, overload));
    if (!op) fail(where_, "operator " + name + (overload.empty() ? "" : "." + overload) + " has no TorchScript kernel");
    const c10::FunctionSchema& schema = op->schema();
    std::map<std::string, const ir::NamedArgument*> given;
    for (const auto& in : n.inputs) given[in.name] = &in;
    std::vector<jit::Value*> inputs;
    std::vector<bool> scalarForTensor;  // a Python number passed where the schema says Tensor
    for (const auto& a : schema.arguments()) {
      auto it = given.find(a.name());
      scalarForTensor.push_back(it != given.end() && a.type()->kind() == c10::TypeKind::TensorType &&
                                isNumberLiteral(it->second->arg));
      if (it != given.end()) {
        inputs.push_back(convert(it->second->arg, a.type(), a.name()));
        given.erase(it);
      } else if (a.default_value()) {
        inputs.push_back(graph_->insertConstant(*a.default_value()));
      } else {
        fail(where_, "argument '" + a.name() + "' of " + schema.name() + " is missing");
      }
    }
    if (!given.empty()) fail(where_, "argument '" + given.begin()->first + "' is not in the schema of " + toString(schema));
    jit::Node* jn = graph_->create(c10::Symbol::fromQualString(schema.name()), inputs, schema.returns().size());
    for (size_t i = 0; i < schema.returns().size(); ++i) jn->output(i)->setType(schema.returns()[i].type());
    graph_->insertNode(jn);
    // The saved file names only "aten::add"; loaders pick the overload by
    // argument types. Make sure that choice is the one the program named.
    const jit::Operator* chosen = jn->maybeOperator();
    if (!chosen || !sameOrScalarVariant(schema, chosen->schema(), scalarForTensor))
      fail(where_, "TorchScript would resolve " + toString(schema) + " to " +
                       (chosen ? toString(chosen->schema()) : std::string("no overload")));
    bindOutputs(n, jn->outputs().vec());
  }

  // item() whose result the program uses as a SymInt, SymFloat or SymBool
  // (a symbolic value carried across a boundary, partition/symbolic.h).
  // TorchScript's aten::item returns a generic Scalar, which int, float and
  // bool arguments do not accept: convert with the typed cast instead, which
  // reads the same element.
  bool emitScalarOfTensor(const ir::Node& n) {
    if (n.outputs.size() != 1 || !n.outputs[0].value() || n.inputs.size() != 1) return false;
    const char* cast = nullptr;
    switch (n.outputs[0].value()->kind) {
      case ir::ValueKind::SymInt: cast = "aten::Int"; break;
      case ir::ValueKind::SymFloat: cast = "aten::Float"; break;
      case ir::ValueKind::SymBool: cast = "aten::Bool"; break;
      default: return false;
    }
    jit::Value* t = convert(n.inputs[0].arg, c10::TensorType::get(), n.inputs[0].name);
    bindOutputs(n, {graph_->insert(c10::Symbol::fromQualString(cast), {t})});
    return true;
  }

  // A number where the schema takes a Tensor: a literal, or a symbolic scalar
  // (which torch wraps the same way).
  static bool isNumberLiteral(const ir::Argument& a) {
    switch (a.tag) {
      case ir::ArgTag::Int: case ir::ArgTag::Float: case ir::ArgTag::Bool:
      case ir::ArgTag::SymInt: case ir::ArgTag::SymFloat: case ir::ArgTag::SymBool:
        return true;
      default:
        return false;
    }
  }

  // torch calls like aten.add.Tensor(x, 1) wrap the number as a "wrapped
  // number" tensor, which promotes exactly like the Scalar overload
  // TorchScript picks for it. Accept that substitution and nothing else.
  static bool sameOrScalarVariant(const c10::FunctionSchema& want, const c10::FunctionSchema& got,
                                  const std::vector<bool>& scalarForTensor) {
    if (want.overload_name() == got.overload_name()) return true;
    if (want.arguments().size() != got.arguments().size()) return false;
    bool substituted = false;
    for (size_t i = 0; i < want.arguments().size(); ++i) {
      const auto& w = want.arguments()[i].type();
      const auto& g = got.arguments()[i].type();
      if (*w == *g) continue;
      if (!scalarForTensor[i] || g->kind() != c10::TypeKind::NumberType) return false;
      substituted = true;
    }
    return substituted;
  }

  static std::string toString(const c10::FunctionSchema& s) {
    return s.name() + (s.overload_name().empty() ? "" : "." + s.overload_name());
  }

  // The program's name on the emitted value, so that the saved code reads
  // "embedding = torch.embedding(...)" and a failure's traceback names the
  // node (runtime/stage_failure.h). TorchScript's printer keeps names clear
  // of keywords and of each other.
  static jit::Value* named(jit::Value* v, const ir::Value& value) {
    const std::string& n = value.name;
    bool ok = !n.empty() && !std::isdigit(static_cast<unsigned char>(n[0]));
    for (char c : n) ok &= std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (ok && !v->hasDebugName()) v->setDebugName(n);
    return v;
  }

  // Maps a node's output Arguments onto emitted values.
  void bindOutputs(const ir::Node& n, const std::vector<jit::Value*>& results) {
    size_t r = 0;
    for (const auto& out : n.outputs) {
      if (r >= results.size()) fail(where_, "more outputs than the operator returns");
      jit::Value* result = results[r++];
      switch (out.tag) {
        case ir::ArgTag::None: break;
        case ir::ArgTag::Tensors: {
          jit::Node* unpack = graph_->insertNode(graph_->createListUnpack(result, out.refs.size()));
          for (size_t k = 0; k < out.refs.size(); ++k)
            if (out.refs[k].value) env_[out.refs[k].value] = named(unpack->output(k), *out.refs[k].value);
          break;
        }
        default:
          if (out.refs.size() == 1 && out.refs[0].value) env_[out.refs[0].value] = named(result, *out.refs[0].value);
      }
    }
  }

  // Python-level symbolic integer arithmetic (_operator.mul, math.floor, ...).
  void emitSymOp(const ir::Node& n) {
    const std::map<std::string, std::string>& kOps = symbolicOps();
    auto it = kOps.find(n.target);
    if (it == kOps.end()) fail(where_, "unsupported symbolic operation '" + n.target + "'");
    std::vector<jit::NamedValue> args;
    for (const auto& in : n.inputs) args.emplace_back(convert(in.arg, nullptr, in.name));
    jit::Value* v = graph_->insert(c10::Symbol::fromQualString(it->second), args);
    bindOutputs(n, {v});
  }

  void emitHigherOrder(const ir::Node& n) {
    std::string op = n.opName().substr(std::string("higher_order.").size());
    auto bodyAt = [&](size_t k) -> const ir::Graph& {
      const ir::Graph* body = k < n.inputs.size() ? n.inputs[k].arg.body() : nullptr;
      if (!body) fail(where_, "expected a body graph at argument " + std::to_string(k));
      return *body;
    };
    if (op == "wrap_with_set_grad_enabled") {
      bool enable = n.inputs.at(0).arg.asBool();
      const ir::Graph& body = bodyAt(1);
      jit::Value* prev = graph_->insert(c10::Symbol::fromQualString("aten::is_grad_enabled"), {});
      graph_->insert(c10::Symbol::fromQualString("aten::set_grad_enabled"), {graph_->insertConstant(enable)});
      inlineBody(n, body, 2);
      graph_->insert(c10::Symbol::fromQualString("aten::set_grad_enabled"), {prev});
      return;
    }
    if (op == "wrap_with_autocast") {
      // (device_type, dtype, enabled, cache_enabled, body, *operands); an
      // enabled one was refused (torchScriptRefusal). pipecut-run never
      // enables autocast around a stage, so a region that disables it is
      // already in the mode it asks for.
      inlineBody(n, bodyAt(4), 5);
      return;
    }
    if (op == "cond") return bindOutputs(n, emitCond(*this, n));
    if (op == "while_loop") return bindOutputs(n, emitWhileLoop(*this, n));
    if (op == "map_impl") return bindOutputs(n, emitMap(*this, n));
    fail(where_, *torchScriptRefusal(n));  // it refuses every other op
  }

  // BodyEmitter, for emit/control_flow.
  jit::Graph& jitGraph() override { return *graph_; }
  jit::Value* value(const ir::Argument& a, const std::string& what) override { return convert(a, nullptr, what); }
  std::vector<jit::Value*> emitBody(const ir::Graph& body, const std::vector<jit::Value*>& operands) override {
    if (operands.size() != body.inputs.size())
      fail(where_, "the body takes " + std::to_string(body.inputs.size()) + " operands, given " +
                       std::to_string(operands.size()));
    for (size_t k = 0; k < body.inputs.size(); ++k)
      if (const ir::Value* formal = body.inputs[k].value()) env_[formal] = operands[k];
    std::string saved = where_;
    emitGraph(body);
    where_ = saved;
    std::vector<jit::Value*> results;
    for (const auto& o : body.outputs) results.push_back(o.value() ? env_.at(o.value()) : convert(o, nullptr, "output"));
    return results;
  }

  // A wrapper region's body emitted in place: its operands follow the body.
  void inlineBody(const ir::Node& n, const ir::Graph& body, size_t firstOperand) {
    std::vector<jit::Value*> operands;
    for (size_t k = firstOperand; k < n.inputs.size(); ++k) operands.push_back(convert(n.inputs[k].arg, nullptr, "operand"));
    bindOutputs(n, emitBody(body, operands));
  }

  jit::Value* valueOf(const ir::Ref& r, const std::string& what) {
    if (r.value) {
      auto it = env_.find(r.value);
      if (it == env_.end()) fail(where_, what + ": value '" + r.value->name + "' was not emitted");
      return it->second;
    }
    const ir::Json& lit = r.literal;
    if (lit.contains("as_int")) return graph_->insertConstant(lit["as_int"].get<int64_t>());
    if (lit.contains("as_float")) return graph_->insertConstant(lit["as_float"].get<double>());
    if (lit.contains("as_bool")) return graph_->insertConstant(lit["as_bool"].get<bool>());
    return graph_->insertConstant(IValue());
  }

  // An Argument as a TorchScript value of the schema type `type` (nullptr: infer).
  jit::Value* convert(const ir::Argument& a, c10::TypePtr type, const std::string& what) {
    if (type && type->kind() == c10::TypeKind::OptionalType && a.tag != ir::ArgTag::None)
      type = type->expectRef<c10::OptionalType>().getElementType();
    auto listOf = [&](const c10::TypePtr& fallback) {
      c10::TypePtr elem = fallback;
      if (type && type->kind() == c10::TypeKind::ListType) elem = type->expectRef<c10::ListType>().getElementType();
      std::vector<jit::Value*> items;
      for (const auto& r : a.refs) items.push_back(valueOf(r, what));
      return graph_->insertNode(graph_->createList(elem, items))->output();
    };
    switch (a.tag) {
      case ir::ArgTag::None: return graph_->insertConstant(IValue());
      case ir::ArgTag::Tensor: case ir::ArgTag::SymInt: case ir::ArgTag::SymBool: case ir::ArgTag::SymFloat:
      case ir::ArgTag::OptionalTensor:
        return valueOf(a.refs.at(0), what);
      case ir::ArgTag::Tensors: return listOf(c10::TensorType::get());
      case ir::ArgTag::OptionalTensors: return listOf(c10::OptionalType::create(c10::TensorType::get()));
      case ir::ArgTag::SymInts: return listOf(c10::IntType::get());
      case ir::ArgTag::SymBools: return listOf(c10::BoolType::get());
      case ir::ArgTag::SymFloats: return listOf(c10::FloatType::get());
      case ir::ArgTag::Int:
        if (type && type->kind() == c10::TypeKind::FloatType) return graph_->insertConstant(static_cast<double>(a.asInt()));
        return graph_->insertConstant(a.asInt());
      case ir::ArgTag::Float: return graph_->insertConstant(a.asFloat());
      case ir::ArgTag::Bool:
        // TorchScript's Scalar admits int, float and complex but not bool.
        if (type && type->kind() == c10::TypeKind::NumberType) return graph_->insertConstant(int64_t{a.asBool()});
        return graph_->insertConstant(a.asBool());
      case ir::ArgTag::String: return graph_->insertConstant(a.asString());
      case ir::ArgTag::Ints: return graph_->insertConstant(a.literal.get<std::vector<int64_t>>());
      case ir::ArgTag::Floats: {
        std::vector<double> v;
        for (const auto& x : a.literal) v.push_back(ir::Argument::literalOf(ir::ArgTag::Float, x).asFloat());
        return graph_->insertConstant(v);
      }
      case ir::ArgTag::Bools: {
        c10::List<bool> bools;
        for (const auto& b : a.literal) bools.push_back(b.get<bool>());
        return graph_->insertConstant(bools);
      }
      case ir::ArgTag::Strings: return graph_->insertConstant(a.literal.get<std::vector<std::string>>());
      case ir::ArgTag::ScalarType:
        return graph_->insertConstant(static_cast<int64_t>(toC10(static_cast<int>(a.asInt()))));
      case ir::ArgTag::Layout: return graph_->insertConstant(static_cast<int64_t>(layoutToC10(static_cast<int>(a.asInt()))));
      case ir::ArgTag::MemoryFormat:
        return graph_->insertConstant(static_cast<int64_t>(memoryFormatToC10(static_cast<int>(a.asInt()))));
      case ir::ArgTag::Device: {
        ir::Device d{a.literal.value("type", "cpu"), std::nullopt};
        if (a.literal.contains("index") && !a.literal["index"].is_null()) d.index = a.literal["index"].get<int64_t>();
        if (device_ && d.type == homeDevice_->type && d.index == homeDevice_->index) return device_;
        return graph_->insertConstant(c10::Device(d.type + (d.index ? ":" + std::to_string(*d.index) : "")));
      }
      case ir::ArgTag::Complex:
        return graph_->insertConstant(c10::complex<double>(ir::Argument::literalOf(ir::ArgTag::Float, a.literal["real"]).asFloat(),
                                                           ir::Argument::literalOf(ir::ArgTag::Float, a.literal["imag"]).asFloat()));
      default:
        fail(where_, std::string("argument '") + what + "' of variant " + ir::argTagKey(a.tag) +
                         " cannot be expressed in TorchScript");
    }
  }

  const pt2::Package& pkg_;
  std::shared_ptr<jit::CompilationUnit> cu_;
  jit::Module root_;
  std::shared_ptr<jit::Graph> graph_;
  jit::Value* self_ = nullptr;
  jit::Value* device_ = nullptr;
  std::optional<ir::Device> homeDevice_;
  std::map<std::string, jit::Module> submodules_;
  std::set<std::string> registered_;
  // Mapped from the source package (it outlives the module), unless
  // trackOwners; an external tensor (a weightless split) is written as a
  // stand-in, which pipecut-run replaces with the bound tensor.
  StoredTensors tensors_{StoredTensors::Bytes::Mapped, StoredTensors::Externals::Placeholder};
  std::unordered_map<std::string, jit::Value*> attrs_;
  std::unordered_map<const ir::Value*, jit::Value*> env_;
  std::string where_;
  std::optional<std::unordered_map<jit::Node*, size_t>> owners_;
};

// Builds the module; what torch still rejects after every overload and
// argument was checked against its schema is the program's own content (a
// malformed literal, a tensor whose metadata torch refuses): bad input, named
// by the node or tensor being emitted.
jit::Module buildModule(Emitter& emitter, const std::string& className) {
  try {
    return emitter.build();
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    throw Error(ErrorKind::InvalidInput, "", emitter.where().empty() ? className : emitter.where(),
                "TorchScript rejects it: " + firstLine(msg));
  }
}

}  // namespace

void writeTorchScript(const pt2::Package& stage, const std::string& className,
                      const std::function<size_t(const void*, size_t)>& sink) {
  Emitter emitter(stage, className);
  jit::Module m = buildModule(emitter, className);
  try {
    // Through a sink rather than a path: the caller hashes while writing, and
    // the archive's top folder is "archive" whatever the file is called.
    jit::ExportModule(m, sink);
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    internalError("saving " + className, firstLine(msg));
  }
}

ProfiledModule buildTorchScriptForProfile(const pt2::Package& stage, const std::string& className) {
  Emitter emitter(stage, className);
  emitter.trackOwners();
  ProfiledModule out;
  out.module = buildModule(emitter, className);
  out.graph = emitter.graph();
  const auto& programNodes = stage.program.graph.nodes;
  out.ranges.resize(programNodes.size());
  for (size_t i = 0; i < programNodes.size(); ++i) {
    out.ranges[i].name = programNodes[i]->label();
    out.ranges[i].module = programNodes[i]->modulePath();
  }
  // Walk what survived dead-code elimination; erased nodes are simply never met.
  // Owners must come in program order, each owner's nodes contiguous: nodes
  // before the first owned one (attribute reads, the device) and after the
  // last (buffer updates, the result tuple) belong to no program node.
  const auto& owners = emitter.owners();
  std::optional<size_t> current, firstOwned;
  bool after = false;  // past the last owned node
  for (jit::Node* jn : out.graph->nodes()) {
    size_t pos = out.nodes.size();
    out.nodes.push_back(jn);
    auto it = owners.find(jn);
    if (it == owners.end()) {
      after = current.has_value();
      continue;
    }
    size_t owner = it->second;
    bool seen = out.ranges[owner].end != 0;
    if (after || (current && owner < *current) || (owner != current && seen))
      internalError(className, "the jit nodes of program node '" + out.ranges[owner].name + "' are not contiguous");
    if (!seen) out.ranges[owner].begin = pos;
    out.ranges[owner].end = pos + 1;
    if (!firstOwned) firstOwned = pos;
    current = owner;
  }
  // A node that emitted nothing (an export guard) gets an empty range where it stood.
  size_t cursor = firstOwned.value_or(out.nodes.size());
  for (auto& r : out.ranges) {
    if (r.end == 0) r.begin = r.end = cursor;
    cursor = r.end;
  }
  return out;
}

std::optional<std::string> torchScriptRefusal(const ir::Node& n) {
  if (ir::isExportGuard(n)) return std::nullopt;  // dropped: restates what export saw
  if (n.isHigherOrder()) {
    const std::string op = n.opName().substr(std::string("higher_order.").size());
    if (op == "wrap_with_autocast") {
      // (device_type, dtype, enabled, cache_enabled, body, *operands)
      if (n.inputs.size() > 2 && n.inputs[2].arg.tag == ir::ArgTag::Bool && n.inputs[2].arg.asBool())
        return "an enabled autocast region cannot be expressed in TorchScript; use the .pt2 stage, "
               "or export the model without autocast";
      return std::nullopt;
    }
    if (op == "wrap_with_set_grad_enabled" || op == "cond" || op == "while_loop" || op == "map_impl") return std::nullopt;
    return "higher-order op '" + op + "' is not supported by the TorchScript emitter (the .pt2 stage keeps it)";
  }
  if (n.target.rfind("torch.ops.", 0) != 0) {
    if (symbolicOps().count(n.target)) return std::nullopt;
    return "unsupported symbolic operation '" + n.target + "'";
  }
  std::optional<c10::OperatorName> name = jitOperatorOf(n);
  if (!name) return "unrecognized operator target '" + n.target + "'";
  if (!jit::findOperatorFor(*name))
    return "operator " + name->name + (name->overload_name.empty() ? "" : "." + name->overload_name) +
           " has no TorchScript kernel";
  return std::nullopt;
}

std::optional<partition::OperatorSignature> operatorSignature(const std::string& opName) {
  std::optional<c10::OperatorName> name = registryName(opName);
  if (!name) return std::nullopt;
  std::shared_ptr<jit::Operator> op = jit::findOperatorFor(*name);
  if (!op) return std::nullopt;
  partition::OperatorSignature sig;
  for (const c10::Argument& a : op->schema().arguments()) {
    if (a.kwarg_only()) break;
    c10::TypePtr t = a.type();
    if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
    sig.names.push_back(a.name());
    sig.tensor.push_back(t->kind() == c10::TypeKind::TensorType);
  }
  return sig;
}

}  // namespace pipecut::emit
