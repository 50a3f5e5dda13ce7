#include "runtime/train/weight_grad.h"

#include "emit/libtorch_compat.h"

#include <unordered_map>
#include <unordered_set>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace pipecut::runtime {

namespace {

using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::variable_list;
using NodePtr = emit::compat::AutogradNodePtr;  // shared_ptr or intrusive_ptr, by torch version

}  // namespace

struct WeightGradCapture::State {
  struct Captured {
    NodePtr node;
    variable_list grads;  // what the node received during I
  };
  bool recording = true;
  std::vector<Captured> captured;
  std::vector<std::pair<Edge, at::Tensor>> directRoots;  // outputs whose graph reaches no input
  // The nodes on paths to the inputs: I has run them. W starts at the
  // captured ones and must not flow from one of them into another (that
  // would count a gradient twice), so it cuts the edges into these first.
  std::vector<NodePtr> inputPath;
  std::unordered_set<Node*> onInputPath;
  std::vector<at::Tensor> params;
};

namespace {

// Records the gradients a node receives, while the state is recording (I);
// W runs the node again from the recorded gradients, unrecorded.
struct Record : torch::autograd::FunctionPreHook {
  Record(std::shared_ptr<WeightGradCapture::State> s, size_t i) : state(std::move(s)), index(i) {}
  variable_list operator()(const variable_list& grads) override {
    if (state->recording) state->captured[index].grads = grads;
    return grads;
  }
  std::shared_ptr<WeightGradCapture::State> state;
  size_t index;
};

// Which nodes lead to a target set (iterative post-order over the graph:
// stages have tens of thousands of nodes).
std::unordered_map<Node*, bool> leadsTo(const std::vector<NodePtr>& roots,
                                        const std::unordered_set<Node*>& targets) {
  std::unordered_map<Node*, bool> memo;
  std::vector<std::pair<Node*, size_t>> stack;
  for (const auto& r : roots) {
    if (!r || memo.count(r.get())) continue;
    stack.push_back({r.get(), 0});
    memo[r.get()] = targets.count(r.get()) > 0;
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      const auto& next = n->next_edges();
      if (i < next.size()) {
        Node* c = next[i++].function.get();
        if (!c) continue;
        auto it = memo.find(c);
        if (it == memo.end()) {
          memo[c] = targets.count(c) > 0;
          stack.push_back({c, 0});
        }
        continue;
      }
      bool any = memo[n];
      for (const auto& e : next)
        if (e.function) any = any || memo[e.function.get()];
      memo[n] = any;
      stack.pop_back();
    }
  }
  return memo;
}

}  // namespace

WeightGradCapture::WeightGradCapture(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& gradOutputs,
                                     const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& params)
    : state_(std::make_shared<State>()) {
  namespace impl = torch::autograd::impl;
  state_->params = params;
  std::unordered_set<Node*> inputNodes, paramNodes;
  for (const auto& t : inputs) inputNodes.insert(impl::gradient_edge(t).function.get());
  for (const auto& p : params) paramNodes.insert(impl::gradient_edge(p).function.get());
  std::vector<Edge> rootEdges;
  std::vector<NodePtr> roots;
  for (const auto& o : outputs) {
    rootEdges.push_back(impl::gradient_edge(o));
    roots.push_back(rootEdges.back().function);
  }
  auto toInput = leadsTo(roots, inputNodes);
  auto toParam = leadsTo(roots, paramNodes);
  auto reachesInput = [&](Node* n) { return n && toInput[n]; };
  auto reachesParam = [&](Node* n) { return n && toParam[n]; };
  for (size_t i = 0; i < rootEdges.size(); ++i)
    if (!reachesInput(rootEdges[i].function.get()) && reachesParam(rootEdges[i].function.get()))
      state_->directRoots.push_back({rootEdges[i], gradOutputs[i]});
  // Capture nodes: on a path to an input, with a branch that reaches
  // parameters without reaching inputs.
  std::unordered_set<Node*>& seen = state_->onInputPath;
  std::vector<NodePtr> todo;
  for (const auto& r : roots)
    if (reachesInput(r.get()) && seen.insert(r.get()).second) todo.push_back(r);
  while (!todo.empty()) {
    NodePtr n = std::move(todo.back());
    todo.pop_back();
    state_->inputPath.push_back(n);
    bool branch = false;
    for (const auto& e : n->next_edges()) {
      Node* c = e.function.get();
      if (!c) continue;
      if (reachesInput(c)) {
        if (seen.insert(c).second) todo.push_back(e.function);
      } else if (reachesParam(c)) {
        branch = true;
      }
    }
    if (branch) {
      state_->captured.push_back({n, {}});
      n->add_pre_hook(std::make_unique<Record>(state_, state_->captured.size() - 1));
    }
  }
}

// The hooks stay on the graph's nodes and hold the state; the state lets go
// of the nodes, so that the graph is freed with its stage's outputs.
WeightGradCapture::~WeightGradCapture() {
  state_->recording = false;
  state_->captured.clear();
  state_->directRoots.clear();
  state_->inputPath.clear();
}

std::vector<at::Tensor> WeightGradCapture::weightGrads() {
  namespace impl = torch::autograd::impl;
  state_->recording = false;
  torch::autograd::edge_list roots, outputs;
  variable_list grads;
  for (const auto& c : state_->captured)
    for (uint32_t k = 0; k < c.grads.size(); ++k)
      if (c.grads[k].defined()) {
        roots.emplace_back(c.node, k);
        grads.push_back(c.grads[k]);
      }
  for (const auto& [edge, grad] : state_->directRoots) {
    roots.push_back(edge);
    grads.push_back(grad);
  }
  std::vector<at::Tensor> result(state_->params.size());
  if (roots.empty()) return result;
  for (const auto& n : state_->inputPath)
    for (auto& e : n->next_edges())
      if (e.function && state_->onInputPath.count(e.function.get())) e = Edge();
  for (const auto& p : state_->params) outputs.push_back(impl::gradient_edge(p));
  auto got = torch::autograd::Engine::get_default_engine().execute(roots, grads, /*keep_graph=*/false,
                                                                   /*create_graph=*/false, /*accumulate_grad=*/false,
                                                                   outputs);
  for (size_t i = 0; i < result.size() && i < got.size(); ++i) result[i] = got[i];
  state_->captured.clear();
  state_->inputPath.clear();
  return result;
}

}  // namespace pipecut::runtime
