#pragma once
// A package's stored tensors (parameters, buffers, lifted constants) as ATen
// tensors over their bytes where they lie in the memory-mapped archive: no
// copy, and one storage per record, so that tensors which shared a storage
// when saved (tied weights, views of one buffer) share it again.
//
// A mapped storage holds its archive open: its tensors may outlive the
// pt2::Package they came from. The mapping is read-only, so a write through
// such a tensor faults; Bytes::Copied gives every storage memory of its own
// (a module that updates its buffers, or outlives the archive). Bytes held
// inline by a package built in memory are always copied.
#include <cstdint>
#include <unordered_map>

#include <ATen/core/Tensor.h>

#include "pt2/package.h"

namespace pipecut::emit {

class StoredTensors {
 public:
  enum class Bytes { Mapped, Copied };
  explicit StoredTensors(Bytes bytes = Bytes::Mapped) : bytes_(bytes) {}

  // The tensor with its saved dtype, sizes, strides and storage offset, and
  // requires_grad for a parameter saved so. Throws pipecut::Error
  // (InvalidInput) with where = the FQN: a pickled tensor (a subclass), no
  // tensor metadata, a symbolic size, requires_grad on a dtype that cannot.
  at::Tensor load(const pt2::StoredTensor& t);

 private:
  Bytes bytes_;
  std::unordered_map<const uint8_t*, c10::Storage> storages_;  // by record start
};

}  // namespace pipecut::emit
