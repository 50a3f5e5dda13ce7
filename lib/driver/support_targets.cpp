#include "driver/support_targets.h"

#include "emit/libtorch_version.h"
#include "emit/torchscript.h"
#include "passes/inline_grad_regions.h"
#include "passes/map_as_loop.h"
#include "passes/unroll_map.h"
#include "support/files.h"

namespace pipecut::driver {

namespace {

std::string hopName(const ir::Node& n) {
  const std::string op = n.opName();
  const std::string prefix = "higher_order.";
  return op.rfind(prefix, 0) == 0 ? op.substr(prefix.size()) : op;
}

bool isMap(const ir::Node& n) { return n.target == passes::kMapTarget; }

class AotiTarget : public partition::SupportTarget {
 public:
  explicit AotiTarget(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::optional<std::string> refuses(const ir::Node& n, const partition::NodeContext& ctx) const override {
    if (!isMap(n)) return std::nullopt;
    const std::string aoti = "AOTInductor (torch " + emit::libtorchVersion() + ") cannot compile a map";
    if (ctx.enclosing) return aoti + " inside a " + hopName(*ctx.enclosing);
    if (passes::mapUnrollable(n) || passes::mapLoopable(n)) return std::nullopt;
    return aoti + ", and pipecut rewrites only one whose body's results have static sizes (unrolled, or as a "
                  "while_loop)";
  }

 private:
  std::string name_;
};

class NativeRtTarget : public partition::SupportTarget {
 public:
  explicit NativeRtTarget(bool inlineGradRegions) : inline_(inlineGradRegions) {}
  std::string name() const override { return "nativert"; }
  std::optional<std::string> refuses(const ir::Node& n, const partition::NodeContext& ctx) const override {
    if (!emit::libtorchHasNativeRt())
      return "this pipecut is built against LibTorch " + emit::libtorchVersion() + ", which has no NativeRT";
    if (!n.isHigherOrder()) return std::nullopt;
    const std::string op = hopName(n);
    if (op == "cond" || op == "while_loop" || op == "run_const_graph") return std::nullopt;
    const std::string unknown = "NativeRT (torch " + emit::libtorchVersion() + ") knows no higher-order op " + op;
    // The rewrites --inline-grad-regions makes work on the top level only
    // (maps inside an inlined region are at top level by then).
    const bool topLevel = !ctx.enclosing || hopName(*ctx.enclosing) == "wrap_with_set_grad_enabled" ||
                          hopName(*ctx.enclosing) == "wrap_with_autocast";
    if (op == "wrap_with_set_grad_enabled" || op == "wrap_with_autocast") {
      if (!passes::inlinesRegion(n)) return unknown + ", and an enabled autocast region changes dtypes, so it is not inlined";
      if (!inline_) return unknown + " (pipecut split --inline-grad-regions inlines it)";
      if (ctx.enclosing) return unknown + " inside a " + hopName(*ctx.enclosing) + " (only top-level regions are inlined)";
      return std::nullopt;
    }
    if (isMap(n)) {
      if (!inline_) return unknown + " (pipecut split --inline-grad-regions rewrites a top-level one)";
      if (!topLevel) return unknown + " inside a " + hopName(*ctx.enclosing) + " (only top-level maps are rewritten)";
      if (passes::mapUnrollable(n) || passes::mapLoopable(n)) return std::nullopt;
      return unknown + ", and pipecut rewrites only one whose body's results have static sizes";
    }
    return unknown;
  }

 private:
  bool inline_;
};

class TorchScriptTarget : public partition::SupportTarget {
 public:
  std::string name() const override { return "torchscript"; }
  std::optional<std::string> refuses(const ir::Node& n, const partition::NodeContext&) const override {
    return emit::torchScriptRefusal(n);
  }
};

}  // namespace

bool isBuiltinSupportTarget(const std::string& t) {
  return t == "aoti" || t == "aoti-cuda" || t == "nativert" || t == "torchscript";
}

bool compilesSupportedStages(const std::string& target) { return target == "aoti" || target == "aoti-cuda"; }

std::unique_ptr<partition::SupportTarget> makeSupportTarget(const SupportOptions& o) {
  const std::string& t = o.target;
  if (t == "aoti" || t == "aoti-cuda") return std::make_unique<AotiTarget>(t);
  if (t == "nativert") return std::make_unique<NativeRtTarget>(o.inlineGradRegions);
  if (t == "torchscript") return std::make_unique<TorchScriptTarget>();
  if (!t.empty() && t.front() == '{') return partition::dictionaryTarget(t, "--support", emit::operatorSignature);
  return partition::dictionaryTarget(support::readFile(t, "the support dictionary"), t, emit::operatorSignature);
}

}  // namespace pipecut::driver
