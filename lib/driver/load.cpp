#include "driver/load.h"

#include <cstring>

#include "ir/verifier.h"
#include "passes/pass_manager.h"
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
