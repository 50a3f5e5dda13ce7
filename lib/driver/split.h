#pragma once
// `pipecut split` as a library call: read -> normalize -> assign -> carve ->
// emit -> write the directory -> swap it into place. The CLI only parses flags.
#include <memory>
#include <string>

#include "driver/support_targets.h"
#include "manifest/manifest.h"
#include "partition/balance.h"
#include "weights/binding.h"

namespace pipecut::driver {

struct SplitRequest {
  std::string model;    // the .pt2
  std::string spec;     // split spec file (unless balancing)
  // Automatic balancing instead of a spec: `stages` > 0 and a cost.
  int stages = 0;
  partition::BalanceBy balanceBy = partition::BalanceBy::Params;
  std::string costProfile;  // --balance time: pipecut-run --profile output
  std::string output;   // directory (replaced atomically); unused by a preview
  // Replace an output pipecut did not write (support/staging.h); inputs and
  // the directories holding them stay refused.
  bool force = false;
  bool torchscript = true;
  bool pt2 = true;
  bool recompute = true;    // recompute cheap values in consuming stages
  // .pt2 stages without no_grad regions (passes/inline_grad_regions.h); the
  // TorchScript stages keep them. The manifest records it.
  bool inlineGradRegions = false;
  bool verifyEach = false;  // verify the graph after every pass
  bool preview = false;     // plan only: no files, no source hash
  // Also the whole source file's SHA-256 (manifest source_sha256; it reads
  // every weight). The manifest always has the cheap source_directory_sha256.
  bool hashSource = false;
  // Also each stage file's SHA-256 (StageFile::sha256) beside its XXH3-128:
  // the files' cryptographic identity, for pipecut verify --sha256. Off by
  // default: it is most of a split's CPU time on real weights.
  bool stageSha256 = false;
  std::string dotFile;      // also draw the stages (Graphviz)
  bool progress = false;    // a progress line on stderr while writing
  unsigned jobs = 0;        // stage files written at once (0: two per core)
  // The caller exits right after: the program and its stage programs are left
  // to the OS instead of freed one node at a time (~0.5 s at 10^5 nodes).
  bool exitsAfter = false;
  // --weights and friends (weights/binding.h): every tensor the stages need
  // from the checkpoint (or, absent there, the .pt2's own bytes), written
  // into the stage files; the manifest records the files read.
  weights::BindOptions weights;
  // --bind-at run: the checkpoint is read and checked, every tensor it
  // gives pinned in the manifest by its digest, and the stage files are
  // written without those bytes, for pipecut-run --weights to bind.
  bool bindAtRun = false;
  // --support TARGET: also cut wherever the target's support ends, alone or
  // with a spec or balancing (partition/support.h); the manifest marks each
  // stage supported or not. A supported run of fewer compute nodes than
  // minSupportedNodes joins its unsupported neighbours.
  SupportOptions support;
  size_t minSupportedNodes = 1;
};

// What binding the weights did (runSplit's `binding`).
struct SplitWeights {
  std::shared_ptr<const weights::WeightSource> source;  // what `binding` points into
  weights::Binding binding;
};

// The manifest of the split (written to `output` unless previewing); with
// balancing, also what the balancer chose (into `balanced` when given); the
// SHA-256 of the manifest.pb written (into `manifestSha256` when given: what
// --expect-manifest pins). Destinations are checked before anything is read.
// Throws pipecut::Error naming the model, spec, profile or node at fault.
// With --weights, what binding did goes into `weightsReport` when given (the
// unused checkpoint tensors are reported from it). A program exported on
// the meta device and split without --weights is a weightless split: its
// manifest lists each stage's external tensors.
Manifest runSplit(const SplitRequest& request, partition::BalanceResult* balanced = nullptr,
                  std::string* manifestSha256 = nullptr, SplitWeights* weightsReport = nullptr);

// "stage_000", ...
std::string stageName(uint32_t index);

}  // namespace pipecut::driver
