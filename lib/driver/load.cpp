#include "driver/load.h"

#include <cstring>

#include "ir/verifier.h"
#include "passes/meta_device.h"
#include "passes/pass_manager.h"
#include "support/digest.h"
#include "support/error.h"
#include "support/phase_times.h"
#include "weights/binding.h"

namespace pipecut::driver {

void compareConstantsByContent(const pt2::Package& pkg, passes::NormalizeOptions& options) {
  // A constant dedupe may merge: stored, with tensor metadata, not pickled.
  // One rule for both functions below, so that the key never parts two
  // constants that sameConstant would call one.
  auto comparable = [&pkg](const std::string& fqn) -> const pt2::StoredTensor* {
    // An external tensor has no bytes to compare: unknown, it is like no other.
    auto it = pkg.constants.find(fqn);
    if (it == pkg.constants.end() || !it->second.meta || it->second.usePickle || it->second.external) return nullptr;
    return &it->second;
  };
  // Two constants are one when their metadata and bytes agree.
  options.sameConstant = [comparable](const std::string& a, const std::string& b) {
    const pt2::StoredTensor* ta = comparable(a);
    const pt2::StoredTensor* tb = comparable(b);
    if (!ta || !tb) return false;
    if (ta->entry().value("tensor_meta", ir::Json()) != tb->entry().value("tensor_meta", ir::Json())) return false;
    pt2::ByteView va = ta->data.view(), vb = tb->data.view();
    return va.size == vb.size && std::memcmp(va.data, vb.data, va.size) == 0;
  };
  // Equal bytes, equal key: sameConstant runs only within a key, not for
  // every pair of a program's lifted constants. One that sameConstant never
  // matches gets a key of its own.
  options.constantKey = [comparable](const std::string& fqn) {
    const pt2::StoredTensor* t = comparable(fqn);
    if (!t) return "unmatched " + fqn;
    pt2::ByteView v = t->data.view();
    return std::to_string(v.size) + " " + xxh3_128Bytes(v.data, v.size);
  };
}

pt2::Package loadNormalized(const std::string& model, const LoadOptions& o) {
  pt2::Package pkg = [&] {
    support::ScopedPhase phase("read");
    return pt2::readPackage(model);
  }();
  if (o.weights) {
    support::ScopedPhase phase("bind weights");
    weights::Binding b = weights::bindPackage(pkg, *o.weights);
    if (o.binding) *o.binding = std::move(b);
  }
  passes::NormalizeOptions opts;
  opts.moduleContiguous = o.moduleContiguous;
  opts.verifyEach = o.verifyEach;
  opts.metaDevice = pkg.metaExport || passes::namesMetaDevice(pkg.program);
  pkg.metaExport = opts.metaDevice;
  compareConstantsByContent(pkg, opts);
  passes::PassManager pm;
  passes::addNormalizePipeline(pm, opts);
  try {
    pm.run(pkg.program);
    for (const auto& r : pm.records()) support::recordPhase("pass " + r.name, r.seconds);
    support::ScopedPhase phase("verify");
    ir::verify(pkg.program);
  } catch (const Error& e) {
    e.rethrowWithFile(model);
  }
  return pkg;
}

}  // namespace pipecut::driver
