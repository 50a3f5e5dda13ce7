#include "emit/stored_tensors.h"

#include <cstring>
#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include "emit/dtypes.h"
#include "support/error.h"

namespace pipecut::emit {

namespace {

// The DataPtr's context: what keeps the mapping the bytes lie in alive.
void releaseMapping(void* context) { delete static_cast<std::shared_ptr<const void>*>(context); }

}  // namespace

at::Tensor StoredTensors::load(const pt2::StoredTensor& t) {
  auto fail = [&](const std::string& msg) -> void { throw Error(ErrorKind::InvalidInput, "", t.fqn, msg); };
  if (t.usePickle) fail("pickled tensors (tensor subclasses) are not supported");
  if (!t.meta) fail("no tensor metadata");
  const ir::TensorMeta& m = *t.meta;
  std::vector<int64_t> sizes, strides;
  for (const auto& s : m.sizes) {
    if (s.isExpr) fail("symbolic size in a parameter");
    sizes.push_back(s.value);
  }
  for (const auto& s : m.strides) strides.push_back(s.value);
  const auto options = at::TensorOptions().dtype(toC10(m.dtype));
  at::Tensor out;
  if (t.external) {
    if (externals_ == Externals::Refuse)
      fail("has no bytes: the program was exported on the meta device; give its weights with --weights");
    out = at::zeros({}, options).expand(sizes);  // one element, whatever the rank (a 0-d buffer too)
  } else {
    // The reader checked that the record holds every byte the view spans.
    const pt2::ByteView bytes = t.data.view();
    auto [it, fresh] = storages_.try_emplace({bytes.data, bytes.size});
    const std::shared_ptr<const void> keep = t.data.keepAlive();
    const auto itemSize = static_cast<uintptr_t>(c10::elementSize(toC10(m.dtype)));
    const bool aligned = reinterpret_cast<uintptr_t>(bytes.data) % itemSize == 0;
    if (fresh && (bytes_ == Bytes::Copied || !keep || !aligned)) {
      it->second = c10::Storage(c10::Storage::use_byte_size_t(), bytes.size, c10::GetDefaultCPUAllocator(),
                                /*resizable=*/false);
      if (bytes.size) std::memcpy(it->second.mutable_data(), bytes.data, bytes.size);
    } else if (fresh) {
      auto* context = new std::shared_ptr<const void>(keep);
      it->second = c10::Storage(c10::Storage::use_byte_size_t(), bytes.size,
                                c10::DataPtr(const_cast<uint8_t*>(bytes.data), context, &releaseMapping,
                                             c10::Device(c10::kCPU)),
                                /*allocator=*/nullptr, /*resizable=*/false);
    }
    out = at::empty({0}, options).set_(it->second, m.storageOffset.value, sizes, strides);
  }
  if (t.isParam && m.requiresGrad) {
    if (!out.is_floating_point() && !out.is_complex())
      fail(std::string("is saved as requiring gradients, which a tensor of ") + c10::toString(out.scalar_type()) +
           " cannot");
    out.set_requires_grad(true);
  }
  return out;
}

}  // namespace pipecut::emit
