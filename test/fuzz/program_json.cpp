// program JSON (models/<name>.json) -> parseProgram, then what `pipecut split`
// runs next without torch: verification, the normalization pipeline
// (module-contiguous), the module tree, NativeRT's pipeline (inlined regions,
// maps unrolled or written as loops, as `split --inline-grad-regions` and
// `pipecut compile` rewrite them); and serialize -> parse round trips, which
// must succeed and reach a fixed point.
#include "ir/module_tree.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "pt2/program_json.h"
#include "targets.h"

namespace pipecut::fuzz {

namespace {

// serializeProgram -> dumpJson -> parseProgram must succeed, and writing the
// result again gives the same JSON.
void roundTrip(const ir::Program& p, const char* what) {
  mustSucceed(what, [&] {
    ir::Json first = pt2::serializeProgram(p);
    ir::Program again = pt2::parseProgram(first);
    if (pt2::serializeProgram(again) != first)
      finding(std::string(what) + ": serialize(parse(serialize(p))) differs from serialize(p)");
  });
}

}  // namespace

int program_json(const uint8_t* data, size_t size) {
  ir::Program program;
  if (!refusesOrRuns("parseProgram", [&] { program = pt2::parseProgram(asText(data, size)); })) return 0;
  roundTrip(program, "round trip of the parsed program");

  // Structure apart from node order (normalization fixes the order). `pipecut
  // split` does not check this before normalizing, so a program the verifier
  // refuses still goes through the passes (as split would run them); one it
  // accepts is verified after every pass, and a pass that breaks it is a
  // finding (PassManager reports it as Internal).
  bool wellFormed = refusesOrRuns("verify (unordered)", [&] { ir::verify(program, {false}); });
  lastOutcome() = {};  // not a refusal by itself
  passes::PassManager pm;
  passes::NormalizeOptions opts;
  opts.moduleContiguous = true;
  opts.verifyEach = wellFormed;
  passes::addNormalizePipeline(pm, opts);
  if (!refusesOrRuns("normalize", [&] { pm.run(program); })) return 0;
  if (wellFormed)
    mustSucceed("verify after normalizing a well-formed program", [&] { ir::verify(program); });
  else if (!refusesOrRuns("verify after normalizing", [&] { ir::verify(program); }))
    return 0;

  if (!refusesOrRuns("ModuleTree::build", [&] {
        ir::ModuleTree tree = ir::ModuleTree::build(program, {});
        (void)tree.preorder();
      }))
    return 0;
  roundTrip(program, "round trip of the normalized program");

  // The rewrites for NativeRT and AOTInductor, on the normalized program:
  // verified after each pass when the input was well formed.
  passes::PassManager native;
  passes::addNativeRtPipeline(native, wellFormed);
  if (!refusesOrRuns("NativeRT pipeline", [&] { native.run(program); })) return 0;
  roundTrip(program, "round trip of the program rewritten for NativeRT");
  return 0;
}

}  // namespace pipecut::fuzz
