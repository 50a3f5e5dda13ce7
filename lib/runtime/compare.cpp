#include "runtime/compare.h"

#include <ATen/ATen.h>

namespace pipecut::runtime {

Comparison compareOutputs(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want, double atol,
                          double rtol) {
  Comparison c;
  auto fail = [&](std::string msg) {
    c.ok = c.exact = false;
    if (c.message.empty()) c.message = std::move(msg);
  };
  if (got.size() != want.size()) {
    fail(std::to_string(got.size()) + " outputs, the reference has " + std::to_string(want.size()));
    return c;
  }
  for (size_t j = 0; j < got.size(); ++j) {
    at::Tensor g = got[j].to(at::kCPU);
    const at::Tensor& w = want[j];
    if (g.sizes() != w.sizes() || g.scalar_type() != w.scalar_type()) {
      fail("output " + std::to_string(j) + " is " + c10::str(g.scalar_type(), g.sizes()) + ", the reference " +
           c10::str(w.scalar_type(), w.sizes()));
      continue;
    }
    if (!at::equal(g, w)) c.exact = false;
    if (w.numel() == 0) continue;
    at::Tensor diff = (g.to(at::kDouble) - w.to(at::kDouble)).abs();
    double err = diff.max().item<double>();
    c.maxAbsError = std::max(c.maxAbsError, err);
    // NaN in the difference counts as out of tolerance.
    bool within = diff.le(w.to(at::kDouble).abs() * rtol + atol).all().item<bool>();
    if (!within) {
      c.ok = false;
      if (c.message.empty())
        c.message = "output " + std::to_string(j) + ": max abs error " + std::to_string(err) + " exceeds atol " +
                    std::to_string(atol) + " + rtol " + std::to_string(rtol);
    }
  }
  return c;
}

}  // namespace pipecut::runtime
