#pragma once
// Carves one self-contained program per stage out of a normalized program and
// a stage assignment, and describes the boundaries in a Manifest.
//
// Values cross boundaries producer -> consumer directly: a skip connection or a
// user input needed three stages later is not relayed through the stages in
// between. Lifted parameters, buffers and constants go to every stage that
// reads them (tied weights become copies, reported as tied groups). Cheap
// values that need no activations (rotary tables, aranges, masks built from
// shapes) are recomputed in the consuming stage instead of being sent.
#include <vector>

#include "manifest/manifest.h"
#include "partition/assign.h"
#include "pt2/package.h"

namespace pipecut::partition {

struct CarveOptions {
  bool recompute = true;
  bool programs = true;  // false: only the manifest (a preview); stage packages stay empty
  size_t maxRecomputeNodes = 64;         // slices larger than this are sent, not recomputed
  uint64_t maxRecomputeLiftedBytes = 1 << 16;  // parameter bytes a slice may copy into the consumer
};

struct CarvedStage {
  pt2::Package package;   // the stage as a program, weights referencing the source archive
  Stage info;             // manifest entry (files are filled in by emission)
};

struct Carving {
  std::vector<CarvedStage> stages;
  Manifest manifest;      // everything but the stages' files
};

Carving carve(const pt2::Package& whole, const Assignment& assignment, const CarveOptions& options = {});
// The same with an index of `whole`'s tensors the caller holds anyway
// (building one walks both tables: a few ms at 10^4 tensors).
Carving carve(const pt2::Package& whole, const pt2::TensorIndex& index, const Assignment& assignment,
              const CarveOptions& options = {});

// Manifest helpers shared with emission.
TensorSpec tensorSpecOf(const ir::Value& v);
uint64_t perSampleBytes(const ir::Value& v);  // 0 when unknown

}  // namespace pipecut::partition
