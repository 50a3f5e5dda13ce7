#include "passes/inline_grad_regions.h"

#include <memory>
#include <unordered_map>

#include "ir/clone.h"
#include "passes/pass_manager.h"
#include "support/error.h"

namespace pipecut::passes {

namespace {

constexpr const char* kGradRegion = "torch.ops.higher_order.wrap_with_set_grad_enabled";
constexpr const char* kAutocastRegion = "torch.ops.higher_order.wrap_with_autocast";

// Where the body graph sits among a region's arguments, or 0 when the node is
// not a region this pass inlines: a grad region (enable_grad, body,
// *operands), or a disabled autocast region (device_type, dtype, enabled,
// cache_enabled, body, *operands). A top-level region that disables autocast
// runs where autocast is off already (nothing enables it around a stage), so
// it changes nothing; an enabled one changes dtypes and stays.
size_t bodyIndex(const ir::Node& n) {
  if (n.target == kGradRegion) return 1;
  if (n.target == kAutocastRegion && n.inputs.size() >= 5 && n.inputs[2].arg.tag == ir::ArgTag::Bool &&
      !n.inputs[2].arg.asBool())
    return 4;
  return 0;
}

}  // namespace

bool inlinesRegion(const ir::Node& n) { return bodyIndex(n) != 0; }

size_t inlineGradRegions(ir::Program& p) {
  ir::Graph& g = p.graph;
  size_t inlined = 0;
  std::unordered_map<const ir::Value*, ir::Value*> replaced;  // a region's output -> what the body returned
  auto fail = [](const ir::Node& n, const std::string& msg) {
    throw Error(ErrorKind::InvalidInput, "", "node '" + n.label() + "' (" + n.opName() + ")", msg);
  };
  std::vector<std::unique_ptr<ir::Node>> nodes;
  nodes.reserve(g.nodes.size());
  for (auto& node : g.nodes) {
    const size_t at = bodyIndex(*node);
    if (!at) {
      nodes.push_back(std::move(node));
      continue;
    }
    const ir::Graph* bodyPtr = at < node->inputs.size() ? node->inputs[at].arg.body() : nullptr;
    if (!bodyPtr) fail(*node, "expected a body graph at argument " + std::to_string(at));
    const ir::Graph& body = *bodyPtr;
    if (node->inputs.size() - at - 1 != body.inputs.size())
      fail(*node, "the body takes " + std::to_string(body.inputs.size()) + " operands, given " +
                      std::to_string(node->inputs.size() - at - 1));
    ir::ValueMap map;
    for (size_t k = 0; k < body.inputs.size(); ++k) {
      const ir::Value* formal = body.inputs[k].value();
      ir::Value* operand = node->inputs[at + 1 + k].arg.value();
      if (!formal) continue;
      if (!operand) fail(*node, "operand " + std::to_string(k) + " is not a value");
      auto it = replaced.find(operand);
      map[formal] = it == replaced.end() ? operand : it->second;
    }
    for (const auto& bn : body.nodes) nodes.push_back(ir::copyNodeFresh(*bn, g, map, "_inlined"));
    std::vector<const ir::Value*> outs;
    node->forEachOutputValue([&](const ir::Value* v) { outs.push_back(v); });
    if (outs.size() != body.outputs.size())
      fail(*node, "returns " + std::to_string(outs.size()) + " values, its body " + std::to_string(body.outputs.size()));
    for (size_t k = 0; k < outs.size(); ++k) {
      const ir::Value* result = body.outputs[k].value();
      if (!result) fail(*node, "body output " + std::to_string(k) + " is not a value");
      replaced[outs[k]] = map.at(result);
    }
    ++inlined;
  }
  // Every node moved to `nodes`, region or not: put them back either way.
  g.nodes = std::move(nodes);
  if (!inlined) return 0;
  auto rewrite = [&](ir::Ref& r) {
    if (!r.value) return;
    auto it = replaced.find(r.value);
    if (it != replaced.end()) r.value = it->second;
  };
  for (auto& n : g.nodes)
    for (auto& in : n->inputs) in.arg.forEachRef(rewrite);
  for (auto& out : g.outputs) out.forEachRef(rewrite);
  for (auto& spec : p.outputSpecs) spec.arg.forEachRef(rewrite);
  g.pruneValues();
  return inlined;
}

Pass inlineGradRegionsPass() {
  return {"inline-grad-regions", [](ir::Program& p) { return inlineGradRegions(p) > 0; }};
}

}  // namespace pipecut::passes
