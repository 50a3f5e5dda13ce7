#pragma once
// A whole .pt2 package: the program plus its weights, constants, sample inputs
// and extra files. Tensors are references into the source archive (memory-
// mapped, read only when bytes are asked for), so opening a multi-GB package
// costs little memory.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <absl/container/flat_hash_map.h>

#include "ir/ir.h"
#include "pt2/zip_archive.h"
#include "support/staging.h"

namespace pipecut::pt2 {

class TensorIndex;

// Bytes that live in a source archive, in another memory-mapped file (a
// checkpoint's tensor, bound by weights/binding.h), or in memory; or nowhere
// (an external tensor: a program exported on the meta device).
struct Blob {
  std::shared_ptr<const ArchiveReader> source;
  // Full record name inside source. For an external tensor, what names its
  // storage (StoredTensor::external).
  std::string record;
  std::string inlineBytes;
  // Bytes of another mapped file, alive while `owner` lives (when set, it
  // is what view() returns).
  ByteView mapped;
  std::shared_ptr<const void> owner;
  ByteView view() const;
  size_t size() const { return view().size; }
  // The source record's CRC-32 from its archive's directory; nullopt for
  // inline or mapped bytes, or a memory-backed source.
  std::optional<uint32_t> crc32() const;
  // What keeps view()'s bytes alive: the archive or the mapping's owner
  // (nullptr for inline bytes).
  std::shared_ptr<const void> keepAlive() const;
  // Which storage the bytes are: tensors with equal keys share one (tied
  // weights; views of one buffer). The same record of the same archive; the
  // same mapped bytes under the same `record` (for a checkpoint's tensor, its
  // name there: an empty tensor may start where the next one does); for
  // inline bytes and external tensors `record`, or when empty the FQN given.
  std::pair<const void*, std::string_view> storageKey(std::string_view fqn) const;
};

struct StoredTensor {
  std::string fqn;
  std::string entryJson;                // the payload-config entry, verbatim (PayloadEntry::entryJson)
  ir::Json entry() const;               // entryJson parsed
  std::optional<ir::TensorMeta> meta;   // absent for entries without tensor_meta
  bool isParam = false;
  bool usePickle = false;
  // No bytes anywhere: the program was exported on the meta device, which
  // torch.export.save writes as records of 0 bytes whose metadata keeps
  // dtype, shape and device "meta". Its bytes come from a weight source
  // (weights/binding.h), which clears the flag; until then `data` is empty
  // and `data.record` names its storage (its FQN, or its tie group's).
  bool external = false;
  Blob data;
  // Bytes the tensor itself spans (numel * item size); 0 if symbolic or unknown.
  uint64_t logicalBytes() const;
};

struct Package {
  std::string path;                     // where it was read from ("" if built)
  std::string modelName = "model";
  ir::Program program;
  std::map<std::string, StoredTensor> weights;    // data/weights: params, persistent buffers
  std::map<std::string, StoredTensor> constants;  // data/constants: lifted constants, other buffers, objects
  std::optional<Blob> sampleInputs;
  std::map<std::string, Blob> extra;              // extra/<name>
  std::shared_ptr<const ArchiveReader> archive;
  // Exported on the meta device: its tensors have no bytes (StoredTensor::
  // external) and its graph names the meta device (passes/meta_device.h).
  bool metaExport = false;

  // The payload entry of a lifted tensor: weights first, then constants.
  const StoredTensor* find(const std::string& fqn) const;
  uint64_t tensorBytes(const std::string& fqn) const;  // 0 when absent or symbolic
  // (FQN, bytes) of every parameter and buffer the signature lifts, in
  // signature order: what ir::ModuleTree::build takes. The FQNs view the
  // input specs' targets. With the index of this package a caller holds
  // anyway, if it has one (building one walks both tables).
  std::vector<std::pair<std::string_view, uint64_t>> liftedTensorBytes() const;
  std::vector<std::pair<std::string_view, uint64_t>> liftedTensorBytes(const TensorIndex& index) const;
};

// `pkg` with `program` in place of its own, sharing its payload (weights,
// constants, sample inputs and extras name records of the same archive):
// what a rewritten copy of a stage's program is written with.
Package withProgram(const Package& pkg, ir::Program program);

// A package's lifted tensors by FQN, hashed, as Package::find resolves them
// (weights first, then constants). For walks that ask about every lifted
// tensor: a deep model has 10^4 of them, and each ordered-map lookup's string
// comparisons (long shared prefixes, "model.layers.1234.mlp...") cost a
// cache miss per tree level. A view: valid while the package's tables are
// neither changed nor moved.
class TensorIndex {
 public:
  explicit TensorIndex(const Package& pkg);
  const StoredTensor* find(std::string_view fqn) const;
  uint64_t bytes(std::string_view fqn) const;  // as Package::tensorBytes

 private:
  absl::flat_hash_map<std::string_view, const StoredTensor*> byFqn_;
};

// Throws pipecut::Error (InvalidInput) naming the file and the offending
// record, field, node or value.
Package readPackage(const std::string& path);

// Gives each group of `text` (kTiedWeightsExtra's JSON) one storage among
// the external tensors of `pkg`. Throws pipecut::Error (InvalidInput) with an
// empty file and `where` naming the group ("tied[1][0]"): not that JSON, a
// name of no tensor, members of different dtype or shape.
void applyDeclaredTies(Package& pkg, std::string_view text);

// Serializes to bytes in the 2.9+ layout. Identical packages give identical
// bytes: record order and names are canonical and nothing time-dependent is written.
// `markAsOutput`: add the record writePackageFile's outputs carry.
void writePackage(const Package& pkg, const std::function<size_t(const void*, size_t)>& sink,
                  bool markAsOutput = false);

// `pipecut normalize`'s output: the package plus a record saying pipecut
// wrote the file (extra/pipecut_output), so that a later run may replace it
// and nothing else (support/staging.h). The reader drops that record: it
// describes a file, not the model, and must not reach the stages of a split.
// Written beside `path` and renamed into place.
inline constexpr const char* kOutputMarkerExtra = "pipecut_output";
// Which tensors of a meta export are one (tied weights), which its records
// cannot say: torch.export.save puts every meta tensor of a dtype in one
// 0-byte record. {"tied": [["lm_head.weight", "model.embed_tokens.weight"], ...]},
// written by scripts/export_meta.py (torch.export.save's extra_files). The
// reader gives each group one storage and drops the record.
inline constexpr const char* kTiedWeightsExtra = "pipecut_tied_weights.json";
void writePackageFile(const Package& pkg, const support::Destination& dst);
// A .pt2 destination: replaces only a .pt2 that carries the record.
support::Destination packageDestination(const std::string& path, std::vector<std::string> inputs = {},
                                        bool force = false);

}  // namespace pipecut::pt2
