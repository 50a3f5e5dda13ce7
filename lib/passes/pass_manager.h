#pragma once
// Passes are small named units over an ir::Program. The manager runs them in
// order and, when asked (always in tests), verifies the program after each one,
// so a broken invariant is reported against the pass that broke it.
#include <functional>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/schedule.h"

namespace pipecut::passes {

struct Pass {
  std::string name;
  std::function<bool(ir::Program&)> run;  // returns whether it changed anything
  bool establishesOrder = false;          // leaves nodes in topological order
};

struct PassRecord {
  std::string name;
  bool changed = false;
  double seconds = 0;  // the pass alone, without verification
};

class PassManager {
 public:
  void add(Pass p) { passes_.push_back(std::move(p)); }
  void setVerifyEach(bool on) { verifyEach_ = on; }
  // Throws pipecut::Error: InvalidInput from a pass that rejects the input,
  // Internal when verification after a pass fails.
  void run(ir::Program& program);
  const std::vector<PassRecord>& records() const { return records_; }

 private:
  std::vector<Pass> passes_;
  std::vector<PassRecord> records_;
  bool verifyEach_ = false;
};

// Returns true when two constant FQNs hold byte-identical tensors.
using SameConstantFn = std::function<bool(const std::string&, const std::string&)>;
// What constants that SameConstantFn calls equal have in common (their size
// and a hash of their bytes, say): dedupe-attributes compares a constant only
// with the kept ones of its key. Without one, every kept constant is a
// candidate: quadratic in the constants a program lifts.
using ConstantKeyFn = std::function<std::string(const std::string& fqn)>;

Pass placeholderOrderPass();
Pass topologicalOrderPass();
Pass deadCodePass();
Pass dedupeAttributesPass(SameConstantFn sameConstant = nullptr, ConstantKeyFn constantKey = nullptr);
Pass moduleContiguousPass();
Pass inlineGradRegionsPass();   // passes/inline_grad_regions.h says what it does
Pass unrollStaticMapsPass();    // passes/unroll_map.h
Pass mapsAsLoopsPass();         // passes/map_as_loop.h
Pass groupedQueryAttentionPass();  // passes/grouped_query_attention.h
Pass metaDeviceToCpuPass();     // passes/meta_device.h

struct NormalizeOptions {
  bool moduleContiguous = false;
  bool metaDevice = false;  // the program names the meta device (passes/meta_device.h)
  bool verifyEach = false;
  SameConstantFn sameConstant;
  ConstantKeyFn constantKey;
};
// [meta-device-to-cpu,] placeholder-order, topological-order,
// dedupe-attributes, grouped-query-attention, dead-code (which drops what
// the attention calls no longer read)[, module-contiguous]
void addNormalizePipeline(PassManager& pm, const NormalizeOptions& options);

// What a stage program for LibTorch's NativeRT needs (split
// --inline-grad-regions): the higher-order ops it refuses that an
// inference-only stage may rewrite. inline-grad-regions, then the map rewrites.
void addNativeRtPipeline(PassManager& pm, bool verifyEach);

// Every top-level map as ops NativeRT and AOTInductor run (neither runs
// map_impl): unroll-static-maps, then maps-as-loops for the maps it leaves.
void addMapRewrites(PassManager& pm);

}  // namespace pipecut::passes
