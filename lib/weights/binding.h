#pragma once
// Binding a program's tensors to a checkpoint's: the one place where a
// parameter, buffer or constant gets its bytes from somewhere other than the
// .pt2 it was exported in, for `pipecut split` (stage files written with
// the checkpoint's bytes), `pipecut inspect --weights` (what would bind) and
// `pipecut-run` (a weightless split's stages bound as they load).
//
// Names. A checkpoint tensor binds to the program tensor of the same FQN,
// after --weights-rename (REGEX=REPLACEMENT, repeatable: the first pattern
// that matches a name rewrites it, every match in it, as transformers'
// key_mapping does; \1 or $1 name groups) and then --weights-prefix (the
// attribute a wrapper holds the model under: a loss, a KV-cache wrapper).
// Two checkpoint names that come out as one program name are refused.
//
// Tensors of one storage (tied weights: one record of a .pt2 under several
// FQNs, or a meta export's declared ties) bind from any one of their names,
// as transformers saves a tied tensor once. Each tensor takes its own name
// first; a tie binds it from its group's first name (in name order) that
// the checkpoint holds, when that one has its dtype and shape.
//
// A bound tensor is the checkpoint's bytes where they lie in the mapped
// file, as a contiguous CPU tensor: its payload entry's device, strides and
// offset say so. Its dtype and shape must be the program's: a shape never
// changes, and a dtype only with --weights-cast (weights/cast.h), whose
// converted bytes live in memory. Torch-free.
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "pt2/package.h"
#include "weights/checkpoint.h"
#include "weights/options.h"

namespace pipecut::weights {

// --weights-rename and --weights-prefix, compiled.
class NameMapping {
 public:
  NameMapping() = default;
  // Throws pipecut::Error (Usage) naming the option: a rename without '='
  // or with an empty pattern, a pattern std::regex (ECMAScript) refuses.
  NameMapping(const std::vector<std::string>& renames, std::string prefix);
  // The program name a checkpoint name binds to.
  std::string programName(const std::string& checkpointName) const;

 private:
  struct Rename {
    std::string text;
    std::regex pattern;
    std::string replacement;  // in std::regex's format syntax ($1)
  };
  std::vector<Rename> renames_;
  std::string prefix_;
};

// A checkpoint under the program's names.
class WeightSource {
 public:
  // Opens options.sources (Checkpoint::open's errors) and maps every name.
  // Throws pipecut::Error (InvalidInput) naming both files when two
  // checkpoint names map to one program name; Usage for bad renames.
  explicit WeightSource(const BindOptions& options);

  const Checkpoint& checkpoint() const { return checkpoint_; }
  bool casts() const { return cast_; }
  // The tensor the program name binds to, or nullptr.
  const CheckpointTensor* find(std::string_view programName) const;
  // The program name checkpoint().tensors()[i] binds to.
  const std::string& programNameOf(size_t i) const { return programNames_[i]; }
  // What a name reads as in messages: "'a' (the checkpoint's 'b')" when renamed.
  std::string describe(const CheckpointTensor& c) const;

  // The bytes `c` gives a program tensor of dtype `dtype` and shape
  // `shape`: its mapped bytes, or with --weights-cast its converted ones
  // (Blob::inlineBytes). Throws pipecut::Error (InvalidInput) naming c's
  // file and the tensor, with both dtypes or shapes.
  pt2::Blob bytesFor(const CheckpointTensor& c, const std::string& fqn, const support::DType& dtype,
                     const std::vector<int64_t>& shape) const;

 private:
  Checkpoint checkpoint_;
  bool cast_ = false;
  std::vector<std::string> programNames_;               // by checkpoint tensor
  absl::flat_hash_map<std::string, size_t> byProgram_;  // program name -> checkpoint tensor
};

// What binding did to a package.
struct Binding {
  struct Bound {
    std::string fqn;                   // the program tensor
    const CheckpointTensor* from = nullptr;
  };
  std::vector<Bound> bound;            // in FQN order
  std::vector<std::string> kept;       // tensors that keep the .pt2's own bytes (no source has them)
  std::vector<std::string> missing;    // external tensors no source has
  std::vector<const CheckpointTensor*> unused;  // checkpoint tensors no program tensor took
};

// Binds every tensor of pkg's tables (weights, constants) that `source`
// holds, under its own name or its tie group's; the others keep their bytes
// or, external, stay so. Tensors are rebound in place (rebind): the package
// becomes a view of the checkpoint's mapping, which its blobs hold.
// pkg.metaExport stays: the program still names the meta device. Errors as
// WeightSource::bytesFor.
Binding bindPackage(pt2::Package& pkg, const WeightSource& source);

// `b` as the program needs it after normalization (dead code dropped what
// nothing reads): `bound` and `kept` keep the tensors pkg's program still
// lifts. `unused` stays what bound to no name of the program at all (a
// tensor matched by name that dead code or deduplication dropped is not a
// naming problem).
void restrictToProgram(Binding& b, const pt2::Package& pkg, const WeightSource& source);

// The lifted tensors of pkg's program that have no bytes (external), sorted.
std::vector<std::string> externalTensors(const pt2::Package& pkg);
// Those of them that need bytes: all but state, which starts at zeros.
std::vector<std::string> missingTensors(const pt2::Package& pkg);

// Throws pipecut::Error (InvalidInput) naming `model` when any lifted
// tensor of pkg's program that is not state has no bytes, listing every
// one; says that a further --weights file can supply what checkpoints lack
// (non-persistent buffers such as rotary inv_freq, constants), and, when the
// checkpoint holds a missing name without its first components (a wrapper's
// attribute), the --weights-prefix that would bind it. `source`: the
// weights given, or nullptr.
void requireBound(const pt2::Package& pkg, const std::string& model, const WeightSource* source);

// The --weights-prefix that would bind `fqn` from `source`: the leading
// components whose removal leaves a name the checkpoint holds (after its
// renames), e.g. "model." for "model.model.layers.0..."; "" when none does.
std::string prefixHint(const WeightSource& source, const std::string& fqn);

// A stored tensor's payload entry and metadata as a contiguous CPU tensor
// of its dtype and sizes with `data` for bytes (what binding makes it).
void rebind(pt2::StoredTensor& t, pt2::Blob data);

// The reverse: t without bytes (device "meta" in its entry, as a meta
// export's), its storage named `storage` (tensors with one name are one).
// What a split that leaves weights to the run (--bind-at run) writes.
void unbind(pt2::StoredTensor& t, const std::string& storage);

// `size` zero bytes that cost no memory: an anonymous read-only mapping,
// every page the kernel's zero page.
pt2::Blob zeroBlob(uint64_t size, const std::string& record);

// A meta export's state tensors (a KV cache the program updates in place:
// ir/state.h) that have no bytes start at zeros, as torch.export.load makes
// a tensor of no bytes and as the real export held them: bound to zeros.
void zeroExternalState(pt2::Package& pkg);

// XXH3-128 of the bytes bound, and of a source file's bound tensors
// ("name dtype shape digest" lines in name order): what the manifest records.
std::string tensorDigest(pt2::ByteView bytes);

}  // namespace pipecut::weights
