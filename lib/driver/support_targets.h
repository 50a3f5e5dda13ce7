#pragma once
// The targets `--support` names (partition/support.h): the stage formats'
// rules, each in one place with the reason it reports, and a user's
// dictionary.
//
//   aoti, aoti-cuda  what `pipecut compile` compiles: AOTInductor cannot
//                    compile a map, and pipecut rewrites only a top-level one
//                    it can unroll or turn into a loop (passes/unroll_map.h,
//                    passes/map_as_loop.h), so a map inside another op's body,
//                    or one neither rewrite takes, is unsupported.
//   nativert         what NativeRT in the linked LibTorch loads: of the
//                    higher-order ops, cond, while_loop and run_const_graph;
//                    with --inline-grad-regions also the grad and disabled
//                    autocast regions it inlines and the top-level maps it
//                    rewrites. Nothing when the LibTorch has no NativeRT.
//   torchscript      what pipecut's TorchScript emitter expresses
//                    (emit::torchScriptRefusal, the emitter's own first check).
//   anything else    a dictionary: inline JSON when it starts with '{', else
//                    the path of a JSON file.
#include <memory>
#include <string>

#include "partition/support.h"

namespace pipecut::driver {

struct SupportOptions {
  std::string target;               // as given to --support ("" none)
  bool inlineGradRegions = false;   // the split's --inline-grad-regions (nativert's rewrites)
  bool given() const { return !target.empty(); }
};

// Throws pipecut::Error (InvalidInput) for a dictionary that is malformed
// (partition::dictionaryTarget) or a file that cannot be read.
std::unique_ptr<partition::SupportTarget> makeSupportTarget(const SupportOptions& o);

// Whether `target` names a built-in target (not a dictionary).
bool isBuiltinSupportTarget(const std::string& target);

// Whether `target` names a built-in target whose supported stages
// `pipecut compile` compiles ("aoti", "aoti-cuda").
bool compilesSupportedStages(const std::string& target);

}  // namespace pipecut::driver
