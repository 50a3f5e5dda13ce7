#pragma once
// A model's own checkpoint, as transformers writes it: one `.safetensors`
// file, or shards listed by `model.safetensors.index.json`
// ({"metadata": {...}, "weight_map": {tensor name: shard file}}). Each
// `--weights SOURCE` is one of:
//   - a .safetensors file;
//   - a *.safetensors.index.json and the shards it names, beside it;
//   - a directory holding model.safetensors.index.json (first) or
//     model.safetensors.
// Every file is memory-mapped, not read: a tensor's bytes are paged in when
// something reads them (the stage file a split writes, a stage that binds
// them at run time), so opening a 140 GB checkpoint reads its headers only,
// and a rank reads only the tensors of its own stages.
//
// Nothing is trusted before it is checked. A safetensors file's header
// (support/safetensors.h: its length, offsets against the file's size,
// dtype x shape against the byte count, no overlaps); an index's fields;
// that each shard it names is a plain file name beside it (an index is data,
// and data never becomes a path elsewhere), exists, is a regular file and
// holds each tensor the index places there; and that no tensor name comes
// from two places. Torch-free.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "pt2/zip_archive.h"
#include "support/dtypes.h"
#include "support/mapped_file.h"

namespace pipecut::weights {

struct CheckpointFile {
  std::string path;       // the file opened: the source, or a shard beside its index
  std::string source;     // the --weights argument it came through
  std::shared_ptr<const support::MappedFile> mapping;
  uint64_t size() const { return mapping->size(); }
};

struct CheckpointTensor {
  std::string name;                  // as the checkpoint names it
  const support::DType* dtype = nullptr;
  std::vector<int64_t> shape;
  pt2::ByteView bytes;               // in the file's mapping: numel x item size of them
  uint32_t file = 0;                 // index into Checkpoint::files()
  uint64_t numel() const;
  std::string shapeStr() const;      // "[4096, 11008]", as ir::TensorMeta::shapeStr
};

class Checkpoint {
 public:
  Checkpoint() = default;
  // Opens every source, in order. Throws pipecut::Error (InvalidInput) naming
  // the file and the tensor or field at fault: a truncated file, an absurd
  // header, an index that is not one, an index naming a missing shard or a
  // tensor its shard lacks, the same name in two sources; or a source that
  // is a FIFO, a device or a directory holding no checkpoint. Environment
  // for what the OS refuses.
  static Checkpoint open(const std::vector<std::string>& sources);

  bool empty() const { return tensors_.empty() && files_.empty(); }
  const std::vector<CheckpointFile>& files() const { return files_; }
  // Every tensor, in source order, each source's in name order.
  const std::vector<CheckpointTensor>& tensors() const { return tensors_; }
  const CheckpointTensor* find(std::string_view name) const;

 private:
  void add(const std::string& source);
  void addFile(const std::string& source, const std::string& path, const std::vector<std::string>* only,
               const std::string& index);
  std::vector<CheckpointFile> files_;
  std::vector<CheckpointTensor> tensors_;
  absl::flat_hash_map<std::string, size_t> byName_;  // into tensors_
};

}  // namespace pipecut::weights
