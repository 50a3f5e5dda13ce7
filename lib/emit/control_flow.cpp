#include "emit/control_flow.h"

#include <limits>

#include "support/error.h"

namespace pipecut::emit {

namespace jit = torch::jit;

namespace {

[[noreturn]] void fail(const BodyEmitter& e, const std::string& msg) {
  throw Error(ErrorKind::InvalidInput, "", e.where(), msg);
}

c10::Symbol op(const char* qualified) { return c10::Symbol::fromQualString(qualified); }

const ir::Graph& bodyAt(const BodyEmitter& e, const ir::Node& n, size_t k) {
  const ir::Graph* body = k < n.inputs.size() ? n.inputs[k].arg.body() : nullptr;
  if (!body) fail(e, "expected a body graph at argument " + std::to_string(k));
  return *body;
}

std::vector<jit::Value*> valuesOf(BodyEmitter& e, const ir::Node& n, size_t k, const char* what) {
  std::vector<jit::Value*> out;
  for (const ir::Ref& r : n.inputs.at(k).arg.refs) {
    ir::Argument one;
    one.tag = ir::ArgTag::Tensor;
    one.refs = {r};
    out.push_back(e.value(one, what));
  }
  return out;
}

// A predicate as a bool: export gives a 0-d bool tensor or a SymBool.
jit::Value* asBool(BodyEmitter& e, jit::Value* v) {
  if (v->type()->kind() == c10::TypeKind::BoolType) return v;
  return e.jitGraph().insert(op("aten::Bool"), {v});
}

jit::Value* single(const BodyEmitter& e, const std::vector<jit::Value*>& v, const char* what) {
  if (v.size() != 1) fail(e, std::string(what) + " returns " + std::to_string(v.size()) + " values, expected 1");
  return v[0];
}

}  // namespace

std::vector<jit::Value*> emitCond(BodyEmitter& e, const ir::Node& n) {
  if (n.inputs.size() != 4) fail(e, "cond takes (pred, true_fn, false_fn, operands)");
  jit::Graph& g = e.jitGraph();
  jit::Value* pred = asBool(e, e.value(n.inputs[0].arg, "predicate"));
  std::vector<jit::Value*> operands = valuesOf(e, n, 3, "operand");
  jit::Node* ifNode = g.insertNode(g.create(c10::prim::If, {pred}, 0));
  jit::Block* thenBlock = ifNode->addBlock();
  jit::Block* elseBlock = ifNode->addBlock();
  std::vector<jit::Value*> thenOut, elseOut;
  {
    jit::WithInsertPoint in(thenBlock);
    thenOut = e.emitBody(bodyAt(e, n, 1), operands);
  }
  {
    jit::WithInsertPoint in(elseBlock);
    elseOut = e.emitBody(bodyAt(e, n, 2), operands);
  }
  if (thenOut.size() != elseOut.size())
    fail(e, "the branches return " + std::to_string(thenOut.size()) + " and " + std::to_string(elseOut.size()) +
                " values");
  for (size_t i = 0; i < thenOut.size(); ++i) {
    auto type = c10::unifyTypes(thenOut[i]->type(), elseOut[i]->type());
    if (!type)
      fail(e, "the branches' result " + std::to_string(i) + " differ in type (" + thenOut[i]->type()->str() + " vs " +
                  elseOut[i]->type()->str() + ")");
    thenBlock->registerOutput(thenOut[i]);
    elseBlock->registerOutput(elseOut[i]);
    ifNode->addOutput()->setType(*type);
  }
  return ifNode->outputs().vec();
}

// The first test runs before the loop (as Python's while does); the loop's
// block runs the body and tests again; its results are the last carried values.
std::vector<jit::Value*> emitWhileLoop(BodyEmitter& e, const ir::Node& n) {
  if (n.inputs.size() != 4) fail(e, "while_loop takes (cond_fn, body_fn, carried_inputs, additional_inputs)");
  jit::Graph& g = e.jitGraph();
  const ir::Graph& test = bodyAt(e, n, 0);
  const ir::Graph& body = bodyAt(e, n, 1);
  std::vector<jit::Value*> carried = valuesOf(e, n, 2, "carried input");
  std::vector<jit::Value*> extra = valuesOf(e, n, 3, "additional input");
  auto withExtra = [&](std::vector<jit::Value*> v) {
    v.insert(v.end(), extra.begin(), extra.end());
    return v;
  };
  jit::Value* first = asBool(e, single(e, e.emitBody(test, withExtra(carried)), "cond_fn"));
  std::vector<jit::Value*> loopInputs{g.insertConstant(std::numeric_limits<int64_t>::max()), first};
  loopInputs.insert(loopInputs.end(), carried.begin(), carried.end());
  jit::Node* loop = g.insertNode(g.create(c10::prim::Loop, loopInputs, 0));
  jit::Block* block = loop->addBlock();
  block->addInput()->setType(c10::IntType::get());  // the trip count
  std::vector<jit::Value*> inner;
  for (jit::Value* c : carried) inner.push_back(block->addInput()->setType(c->type()));
  {
    jit::WithInsertPoint in(block);
    std::vector<jit::Value*> next = e.emitBody(body, withExtra(inner));
    if (next.size() != carried.size())
      fail(e, "body_fn returns " + std::to_string(next.size()) + " values for " + std::to_string(carried.size()) +
                  " carried inputs");
    block->registerOutput(asBool(e, single(e, e.emitBody(test, withExtra(next)), "cond_fn")));
    for (jit::Value* v : next) block->registerOutput(v);
  }
  for (jit::Value* c : carried) loop->addOutput()->setType(c->type());
  return loop->outputs().vec();
}

// A loop over dimension 0 of xs appends f's results to one list per result;
// each list is then stacked.
std::vector<jit::Value*> emitMap(BodyEmitter& e, const ir::Node& n) {
  if (n.inputs.size() != 3) fail(e, "map_impl takes (f, xs, pos_args)");
  jit::Graph& g = e.jitGraph();
  const ir::Graph& body = bodyAt(e, n, 0);
  std::vector<jit::Value*> xs = valuesOf(e, n, 1, "mapped input");
  std::vector<jit::Value*> pos = valuesOf(e, n, 2, "positional input");
  if (xs.empty()) fail(e, "map over no tensors");
  jit::Value* zero = g.insertConstant(int64_t{0});
  jit::Value* trips = g.insert(op("aten::size"), {xs[0], zero});
  std::vector<jit::Value*> lists;
  for (size_t k = 0; k < body.outputs.size(); ++k)
    lists.push_back(g.insertNode(g.createList(c10::TensorType::get(), {}))->output());
  jit::Node* loop = g.insertNode(g.create(c10::prim::Loop, {trips, g.insertConstant(true)}, 0));
  jit::Block* block = loop->addBlock();
  jit::Value* i = block->addInput()->setType(c10::IntType::get());
  {
    jit::WithInsertPoint in(block);
    std::vector<jit::Value*> args;
    for (jit::Value* x : xs) args.push_back(g.insert(op("aten::select"), {x, zero, i}));
    args.insert(args.end(), pos.begin(), pos.end());
    std::vector<jit::Value*> results = e.emitBody(body, args);
    for (size_t k = 0; k < results.size(); ++k) g.insert(op("aten::append"), {lists[k], results[k]});
    block->registerOutput(g.insertConstant(true));
  }
  std::vector<jit::Value*> stacked;
  for (jit::Value* list : lists) stacked.push_back(g.insert(op("aten::stack"), {list, zero}));
  return stacked;
}

}  // namespace pipecut::emit
