// `pipecut normalize`: read, run the normalization passes, verify, write.
#include <cstring>
#include <iostream>

#include "commands.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "pt2/package.h"
#include "support/error.h"

namespace pipecut::cli {

int runNormalize(const NormalizeOptions& o) {
  pt2::Package pkg = pt2::readPackage(o.model);
  passes::NormalizeOptions opts;
  opts.moduleContiguous = o.moduleContiguous;
  opts.verifyEach = o.verifyEach;
  opts.sameConstant = [&pkg](const std::string& a, const std::string& b) {
    auto ia = pkg.constants.find(a), ib = pkg.constants.find(b);
    if (ia == pkg.constants.end() || ib == pkg.constants.end()) return false;
    const auto& ta = ia->second;
    const auto& tb = ib->second;
    if (!ta.meta || !tb.meta || ta.usePickle || tb.usePickle) return false;
    if (ta.entry.value("tensor_meta", ir::Json()) != tb.entry.value("tensor_meta", ir::Json())) return false;
    pt2::ByteView va = ta.data.view(), vb = tb.data.view();
    return va.size == vb.size && std::memcmp(va.data, vb.data, va.size) == 0;
  };
  passes::PassManager pm;
  passes::addNormalizePipeline(pm, opts);
  try {
    pm.run(pkg.program);
    ir::verify(pkg.program);
  } catch (const Error& e) {
    throw Error(e.kind(), o.model, e.where(), e.message());
  }
  pt2::writePackageFile(pkg, o.output);
  return 0;
}

}  // namespace pipecut::cli
