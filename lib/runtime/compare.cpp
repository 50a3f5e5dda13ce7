#include "runtime/compare.h"

#include <cstdio>
#include <cstring>

#include <ATen/ATen.h>

namespace pipecut::runtime {

std::pair<double, double> defaultTolerance(at::ScalarType dtype, const std::string& computeDtype) {
  if (computeDtype == "bfloat16" || dtype == at::kBFloat16) return {1.6e-2, 1e-3};
  if (computeDtype == "float16" || dtype == at::kHalf) return {1e-3, 1e-3};
  switch (dtype) {
    case at::kFloat: return {1.3e-6, 1e-5};
    case at::kDouble: return {1e-7, 1e-7};
    case at::kComplexFloat: return {1.3e-6, 1e-5};
    case at::kComplexDouble: return {1e-7, 1e-7};
    default: return {0, 0};
  }
}

namespace {

// Bitwise: the bytes, not the values (at::equal says -0 == +0 and NaN != NaN).
bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor x = a.contiguous(), y = b.contiguous();
  size_t n = static_cast<size_t>(x.numel()) * x.element_size();
  return n == static_cast<size_t>(y.numel()) * y.element_size() &&
         (n == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), n) == 0);
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

Comparison compareOutputs(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want,
                          const Tolerance& tol) {
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
    bool bitwise = sameBits(g, w);
    if (!bitwise) c.exact = false;
    if (w.numel() == 0) continue;
    at::Tensor diff = (g.to(at::kDouble) - w.to(at::kDouble)).abs();
    // NaN - NaN is NaN: count NaN where both have NaN as agreement.
    diff = at::where(g.to(at::kDouble).isnan() & w.to(at::kDouble).isnan(), at::zeros_like(diff), diff);
    double err = diff.max().item<double>();
    if (!(err <= c.maxAbsError)) c.maxAbsError = err;  // propagates NaN
    if (tol.exact) {
      if (!bitwise) {
        c.ok = false;
        if (c.message.empty())
          c.message = "output " + std::to_string(j) + " differs bitwise (max abs error " + fmt(err) + ")";
      }
      continue;
    }
    auto [rtol, atol] = defaultTolerance(w.scalar_type(), tol.computeDtype);
    if (tol.rtol) rtol = *tol.rtol;
    if (tol.atol) atol = *tol.atol;
    // NaN in the difference counts as out of tolerance.
    bool within = diff.le(w.to(at::kDouble).abs() * rtol + atol).all().item<bool>();
    if (!within) {
      c.ok = false;
      if (c.message.empty())
        c.message = "output " + std::to_string(j) + ": max abs error " + fmt(err) + " exceeds atol " + fmt(atol) +
                    " + rtol " + fmt(rtol) + " x |reference|";
    }
  }
  return c;
}

}  // namespace pipecut::runtime
