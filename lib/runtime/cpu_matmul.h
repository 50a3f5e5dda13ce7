#pragma once
// Which library runs a CPU stage's float32 linear layers (`pipecut-run
// --cpu-matmul`, `pipecut compile --cpu-matmul`). Torch-free, like
// runtime/options.h; the rewrite itself is runtime/linear_kernels.h.
//
//   OneDnn  oneDNN (LibTorch's bundled MKL-DNN): it picks its kernels by the
//           instruction sets a CPU has. Same float32 arithmetic, another
//           summation order.
//   Blas    ATen's own choice, the BLAS LibTorch was built with (MKL in the
//           pip wheel), which picks its kernels by CPU vendor: on AMD CPUs
//           it runs AVX2 code where the CPU has AVX-512. What PyTorch
//           computes; training always runs so (oneDNN's call has no backward).
//   Auto    the default for inference, generation and --profile: the one of
//           the two that is faster on this CPU, by who made it
//           (resolveCpuMatmul), settled where the stages load, so that ranks
//           on different CPUs each take their own.
//
// Why by vendor (bench/gemm_ceiling.py, one thread, float32, at the bench
// models' shapes): on a Zen 5 AMD EPYC with AVX-512, MKL 70-107 GFLOP/s and
// oneDNN 190-245 at 128 rows; on an Intel Xeon with AVX-512, MKL equal to
// oneDNN at 128 rows (139-145 against 130-142) and ahead below (32 rows:
// 90-105 against 69-85; one row, a decode step's: 12-25 against 10-16).
// Off x86 neither is measured, and ATen's own choice stands.
#include <optional>
#include <string>
#include <string_view>

namespace pipecut::runtime {

enum class CpuMatmul { Auto, OneDnn, Blas };

inline const char* cpuMatmulName(CpuMatmul m) {
  return m == CpuMatmul::Blas ? "blas" : m == CpuMatmul::OneDnn ? "onednn" : "auto";
}

inline std::optional<CpuMatmul> parseCpuMatmul(const std::string& text) {
  if (text == "auto") return CpuMatmul::Auto;
  if (text == "onednn") return CpuMatmul::OneDnn;
  if (text == "blas") return CpuMatmul::Blas;
  return std::nullopt;
}

// `m` settled on a CPU whose CPUID vendor string is `vendor` ("" off x86;
// support::hostCpuVendor() gives this machine's): Auto becomes oneDNN on an
// x86 CPU that MKL does not give its best code (any maker but Intel), ATen's
// BLAS elsewhere. Never Auto.
inline CpuMatmul resolveCpuMatmul(CpuMatmul m, std::string_view vendor) {
  if (m != CpuMatmul::Auto) return m;
  return !vendor.empty() && vendor != "GenuineIntel" ? CpuMatmul::OneDnn : CpuMatmul::Blas;
}

}  // namespace pipecut::runtime
