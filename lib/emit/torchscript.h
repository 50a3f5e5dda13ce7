#pragma once
// Emits a stage program as a TorchScript module (built with the LibTorch graph
// API, not generated source): parameters and buffers registered under their
// original FQNs as a submodule hierarchy, one `forward` taking the stage's
// inputs in manifest order and returning a tuple in manifest order.
// This header keeps torch's types out, so drivers can include it cheaply.
#include <functional>
#include <optional>
#include <string>

#include "partition/support.h"
#include "pt2/package.h"

namespace pipecut::emit {

// Throws pipecut::Error (InvalidInput) for what TorchScript cannot express
// (e.g. an enabled autocast region, cond/map), naming the node.
// The module's bytes go to `sink` (a zip archive), which returns the bytes it took.
// Why the emitter cannot express `n` itself (its bodies aside), or nullopt:
// the rule `--support torchscript` reports, and the first check the emitter
// makes of every node, so the two never disagree.
std::optional<std::string> torchScriptRefusal(const ir::Node& n);

// The positional arguments of an ATen operator ("aten.gelu.default") as its
// schema in LibTorch's registry declares them; nullopt for one it does not
// know. What `--support` dictionaries are checked against.
std::optional<partition::OperatorSignature> operatorSignature(const std::string& opName);

void writeTorchScript(const pt2::Package& stage, const std::string& className,
                      const std::function<size_t(const void*, size_t)>& sink);

}  // namespace pipecut::emit
