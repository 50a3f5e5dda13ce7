// The two oracles the numeric tests stand on: tolerance against references
// from any machine, bitwise against the same program run here.
#include <catch2/catch.hpp>
#include <cmath>

#include <ATen/ATen.h>

#include "runtime/compare.h"

using namespace pipecut::runtime;

namespace {
at::Tensor oneUlpUp(const at::Tensor& t) { return at::nextafter(t, at::full_like(t, INFINITY)); }
}  // namespace

TEST_CASE("fp32 defaults: a few ulps pass, 1e-3 does not; exact sees one ulp", "[compare]") {
  at::Tensor ref = at::linspace(-3, 3, 64);
  Tolerance tol;
  CHECK(compareOutputs({oneUlpUp(ref)}, {ref}, tol).ok);
  CHECK_FALSE(compareOutputs({oneUlpUp(ref)}, {ref}, tol).exact);
  CHECK_FALSE(compareOutputs({ref + 1e-3}, {ref}, tol).ok);
  tol.exact = true;
  Comparison c = compareOutputs({oneUlpUp(ref)}, {ref}, tol);
  CHECK_FALSE(c.ok);
  CHECK_THAT(c.message, Catch::Contains("output 0 differs bitwise"));
  CHECK(compareOutputs({ref.clone()}, {ref}, tol).ok);
}

TEST_CASE("exact compares bits: -0 is not +0, NaN equals the same NaN", "[compare]") {
  Tolerance exact;
  exact.exact = true;
  at::Tensor pos = at::zeros({3}), neg = -at::zeros({3});
  CHECK(compareOutputs({neg}, {pos}, Tolerance{}).ok);
  CHECK_FALSE(compareOutputs({neg}, {pos}, exact).ok);
  at::Tensor nan = at::full({2}, NAN);
  CHECK(compareOutputs({nan.clone()}, {nan}, exact).ok);
  CHECK_FALSE(compareOutputs({at::zeros({2})}, {nan}, Tolerance{}).ok);
}

TEST_CASE("tolerance follows the declared compute dtype; integers are exact", "[compare]") {
  at::Tensor ref = at::linspace(1, 2, 16);
  at::Tensor bf16Rounded = ref.to(at::kBFloat16).to(at::kFloat);
  CHECK_FALSE(compareOutputs({bf16Rounded}, {ref}, Tolerance{}).ok);
  Tolerance bf16;
  bf16.computeDtype = "bfloat16";
  CHECK(compareOutputs({bf16Rounded}, {ref}, bf16).ok);
  at::Tensor ints = at::arange(10);
  CHECK_FALSE(compareOutputs({ints + 1}, {ints}, Tolerance{}).ok);
  Tolerance loose;
  loose.atol = 2.0;
  CHECK(compareOutputs({ints + 1}, {ints}, loose).ok);
}

TEST_CASE("shape, dtype and count mismatches are reported", "[compare]") {
  at::Tensor a = at::zeros({2, 3});
  CHECK_THAT(compareOutputs({a}, {at::zeros({3, 2})}, Tolerance{}).message, Catch::Contains("output 0 is"));
  CHECK_THAT(compareOutputs({a, a}, {a}, Tolerance{}).message, Catch::Contains("2 outputs, the reference has 1"));
}
