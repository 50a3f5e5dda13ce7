// meta-device-to-cpu (passes/meta_device.h).
#include "passes/meta_device.h"

#include "passes/pass_manager.h"

namespace pipecut::passes {

namespace {

bool isMeta(const ir::Json& device) {
  return device.is_object() && device.contains("type") && device["type"] == "meta";
}

// The argument's device literals (a device, or one inside a
// string-to-argument entry), rewritten; whether any was.
bool rewriteArgument(ir::Argument& a) {
  bool changed = false;
  if (a.tag == ir::ArgTag::Device && isMeta(a.literal)) {
    a.literal["type"] = "cpu";
    a.literal["index"] = nullptr;
    changed = true;
  }
  if (a.tag == ir::ArgTag::StringToArgument)
    for (auto& entry : a.rare().entries) changed |= rewriteArgument(entry.second);
  return changed;
}

bool rewriteValue(ir::Value& v) {
  if (!v.meta || v.meta->device.type != "meta") return false;
  ir::TensorMeta m = *v.meta;
  m.device = ir::Device{"cpu", std::nullopt};
  v.meta = ir::SharedTensorMeta(std::move(m));
  return true;
}

bool rewriteGraph(ir::Graph& g) {
  bool changed = false;
  for (auto& v : g.values) changed |= rewriteValue(*v);
  for (auto& n : g.nodes) {
    for (auto& in : n->inputs) changed |= rewriteArgument(in.arg);
    for (ir::Graph* body : n->subgraphs()) changed |= rewriteGraph(*body);
  }
  return changed;
}

}  // namespace

bool namesMetaDevice(const ir::Program& program) {
  for (const auto& s : program.inputSpecs) {
    const ir::Value* v = s.arg.value();
    if (v && v->meta && v->meta->device.type == "meta") return true;
  }
  return false;
}

Pass metaDeviceToCpuPass() {
  return {"meta-device-to-cpu", [](ir::Program& p) { return rewriteGraph(p.graph); }};
}

}  // namespace pipecut::passes
