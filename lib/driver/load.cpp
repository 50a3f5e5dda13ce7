#include "driver/load.h"

#include <cstring>

#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "support/digest.h"
#include "support/error.h"
#include "support/phase_times.h"

namespace pipecut::driver {

pt2::Package loadNormalized(const std::string& model, const LoadOptions& o) {
  pt2::Package pkg = [&] {
    support::ScopedPhase phase("read");
    return pt2::readPackage(model);
  }();
  passes::NormalizeOptions opts;
  opts.moduleContiguous = o.moduleContiguous;
  opts.verifyEach = o.verifyEach;
  // Two constants are one when their metadata and bytes agree.
  opts.sameConstant = [&pkg](const std::string& a, const std::string& b) {
    auto ia = pkg.constants.find(a), ib = pkg.constants.find(b);
    if (ia == pkg.constants.end() || ib == pkg.constants.end()) return false;
    const auto& ta = ia->second;
    const auto& tb = ib->second;
    if (!ta.meta || !tb.meta || ta.usePickle || tb.usePickle) return false;
    if (ta.entry().value("tensor_meta", ir::Json()) != tb.entry().value("tensor_meta", ir::Json())) return false;
    pt2::ByteView va = ta.data.view(), vb = tb.data.view();
    return va.size == vb.size && std::memcmp(va.data, vb.data, va.size) == 0;
  };
  // Equal bytes, equal key: sameConstant runs only within a key, not for
  // every pair of a program's lifted constants. One that sameConstant never
  // matches gets a key of its own.
  opts.constantKey = [&pkg](const std::string& fqn) {
    auto it = pkg.constants.find(fqn);
    if (it == pkg.constants.end() || !it->second.meta || it->second.usePickle) return "unmatched " + fqn;
    pt2::ByteView v = it->second.data.view();
    return std::to_string(v.size) + " " + xxh3_128Bytes(v.data, v.size);
  };
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
