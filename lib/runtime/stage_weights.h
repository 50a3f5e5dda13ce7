#pragma once
// A weightless split's tensors, bound from the model's own checkpoint as
// each rank loads its stages (pipecut-run --weights).
//
// A split of a program exported on the meta device without --weights (or
// with --bind-at run) writes stage files that hold no bytes for the tensors
// its manifest lists as external (Stage::external). The sources are opened
// once per process (headers only: every file is memory-mapped), and each
// stage binds its own tensors by name, through --weights-rename and
// --weights-prefix as split binds them (weights/binding.h), a tie's other
// names (ExternalTensor::aliases) when its own is absent. Each bound tensor
// is checked against the manifest: dtype and shape, and the digest split
// pinned, where it pinned one. A rank pages in only its own stages' tensors.
//
// Then every stage format takes them from here: a TorchScript module's
// stand-ins are replaced by the bound tensors, a .pt2 for NativeRT is
// written bound to a private file that NativeRT reads and that is unlinked
// at once, and an AOTInductor package gets them as it gets the .pt2's
// (runtime/aoti_package.h). Inference and generation use the checkpoint's
// bytes where they lie in the mapped file (read-only, shared with the page
// cache); training gets copies of its own, which the optimizer updates.
#include <map>
#include <memory>
#include <string>

#include "manifest/manifest.h"
#include "pt2/package.h"
#include "weights/options.h"

namespace pipecut::weights {
class WeightSource;
}

namespace pipecut::runtime {

class StageWeights {
 public:
  // Nothing to bind: a split that holds its weights, run without --weights.
  StageWeights() = default;
  // Throws pipecut::Error: InvalidInput naming `dir` for a weightless split
  // run without --weights, or --weights given for a split that holds its
  // weights; the sources' own errors (weights/checkpoint.h); Usage for bad
  // renames.
  StageWeights(const Manifest& m, const std::string& dir, const weights::BindOptions& options, bool copies);
  ~StageWeights();

  bool binds() const { return source_ != nullptr; }
  // Whether the tensors bound are copies of their own (training) rather
  // than views of the mapped checkpoint.
  bool copies() const { return copies_; }
  // Stage st's external tensors, by FQN, as stored tensors whose bytes are
  // the checkpoint's (or, cast, converted). Throws pipecut::Error
  // (InvalidInput): every tensor no source holds, listed and named against
  // the stage; a dtype, shape or pinned digest that differs, naming the
  // checkpoint file and tensor.
  std::map<std::string, pt2::StoredTensor> bind(const Stage& st) const;
  // The same bound into the payload entries of `stage`, a stage's .pt2
  // (those of its tensors the manifest lists), and its state that has no
  // bytes (a weightless split's KV cache) bound to zeros.
  void bindPackage(const Stage& st, pt2::Package& stage) const;

 private:
  std::string dir_;
  std::shared_ptr<const weights::WeightSource> source_;
  bool copies_ = false;
};

}  // namespace pipecut::runtime
