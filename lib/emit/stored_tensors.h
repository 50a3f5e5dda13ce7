#pragma once
// A package's stored tensors (parameters, buffers, lifted constants) as ATen
// tensors over their bytes where they lie: in the memory-mapped archive, or
// in a memory-mapped checkpoint they were bound from (weights/binding.h). No
// copy, and one storage per record (or per checkpoint tensor), so that
// tensors which shared a storage when saved (tied weights, views of one
// buffer) share it again.
//
// A mapped storage holds its file open: its tensors may outlive the
// pt2::Package they came from. The mapping is read-only, so a write through
// such a tensor faults; Bytes::Copied gives every storage memory of its own
// (a module that updates its buffers, or outlives the archive). Bytes held
// inline by a package built in memory are always copied, and so are mapped
// bytes not aligned to their element size (a checkpoint need not align its
// tensors).
#include <cstdint>
#include <map>
#include <utility>

#include <ATen/core/Tensor.h>

#include "pt2/package.h"

namespace pipecut::emit {

class StoredTensors {
 public:
  enum class Bytes { Mapped, Copied };
  // What an external tensor (pt2::StoredTensor::external: no bytes) loads
  // as. Refuse: an error naming it (it must be bound first). Placeholder: a
  // stand-in of its dtype and shape over one zero element (stride 0), which
  // is what a weightless stage file holds in its place (its manifest lists
  // it; pipecut-run binds the real one as the stage loads).
  //
  // A checkpoint's bytes (weights/checkpoint.h) are mapped copy-on-write: a
  // program that writes a buffer it was given (Phi-3's longrope inv_freq,
  // updated in place) gets a page of its own, the file is never written.
  enum class Externals { Refuse, Placeholder };
  explicit StoredTensors(Bytes bytes = Bytes::Mapped, Externals externals = Externals::Refuse)
      : bytes_(bytes), externals_(externals) {}

  // The tensor with its saved dtype, sizes, strides and storage offset, and
  // requires_grad for a parameter saved so. Throws pipecut::Error
  // (InvalidInput) with where = the FQN: a pickled tensor (a subclass), no
  // tensor metadata, a symbolic size, requires_grad on a dtype that cannot,
  // an external tensor under Externals::Refuse.
  at::Tensor load(const pt2::StoredTensor& t);

 private:
  Bytes bytes_;
  Externals externals_;
  // By where the bytes start and how many: an empty checkpoint tensor starts
  // where the next one does.
  std::map<std::pair<const uint8_t*, size_t>, c10::Storage> storages_;
};

}  // namespace pipecut::emit
