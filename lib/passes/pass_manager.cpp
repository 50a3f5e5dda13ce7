#include "passes/pass_manager.h"

#include <chrono>

#include "ir/verifier.h"
#include "support/error.h"

namespace pipecut::passes {

void PassManager::run(ir::Program& program) {
  // Order is only demanded once the input had it or a pass established it:
  // fixing the order of a shuffled graph is itself one of the passes.
  bool ordered = true;
  if (verifyEach_) {
    try {
      ir::verify(program);
    } catch (const Error&) {
      ordered = false;
    }
  }
  for (const Pass& pass : passes_) {
    PassRecord rec;
    rec.name = pass.name;
    auto t0 = std::chrono::steady_clock::now();
    rec.changed = pass.run(program);
    rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    records_.push_back(rec);
    if (verifyEach_) {
      try {
        ordered |= pass.establishesOrder;
        ir::verify(program, ir::VerifyOptions{ordered});
      } catch (const Error& e) {
        internalError("pass '" + pass.name + "'", std::string("left an invalid graph: ") + e.what());
      }
    }
  }
}

void addNormalizePipeline(PassManager& pm, const NormalizeOptions& o) {
  pm.setVerifyEach(o.verifyEach);
  // First: every later pass (and the stages) sees a CPU program.
  if (o.metaDevice) pm.add(metaDeviceToCpuPass());
  pm.add(placeholderOrderPass());
  pm.add(topologicalOrderPass());
  pm.add(dedupeAttributesPass(o.sameConstant, o.constantKey));
  pm.add(groupedQueryAttentionPass());
  pm.add(deadCodePass());
  if (o.moduleContiguous) pm.add(moduleContiguousPass());
}

void addNativeRtPipeline(PassManager& pm, bool verifyEach) {
  pm.setVerifyEach(verifyEach);
  pm.add(inlineGradRegionsPass());
  addMapRewrites(pm);  // after inlining: maps inside inlined regions are top level then
}

void addMapRewrites(PassManager& pm) {
  pm.add(unrollStaticMapsPass());
  pm.add(mapsAsLoopsPass());  // the maps unrolling leaves
}

}  // namespace pipecut::passes
