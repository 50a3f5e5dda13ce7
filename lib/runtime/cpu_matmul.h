#pragma once
// Which library runs a CPU stage's float32 linear layers (`pipecut-run
// --cpu-matmul`). Torch-free, like runtime/options.h; the rewrite itself is
// runtime/linear_kernels.h.
//
//   OneDnn  oneDNN (LibTorch's bundled MKL-DNN), the default for inference,
//           generation and --profile: it picks its kernels by the instruction
//           sets a CPU has. Same float32 arithmetic, another summation order.
//   Blas    ATen's own choice, the BLAS LibTorch was built with (MKL in the
//           pip wheel), which picks its kernels by CPU vendor: on AMD CPUs
//           it runs AVX2 code where the CPU has AVX-512. What PyTorch
//           computes; training always runs so (oneDNN's call has no backward).
#include <optional>
#include <string>

namespace pipecut::runtime {

enum class CpuMatmul { OneDnn, Blas };

inline const char* cpuMatmulName(CpuMatmul m) { return m == CpuMatmul::Blas ? "blas" : "onednn"; }

inline std::optional<CpuMatmul> parseCpuMatmul(const std::string& text) {
  if (text == "onednn") return CpuMatmul::OneDnn;
  if (text == "blas") return CpuMatmul::Blas;
  return std::nullopt;
}

}  // namespace pipecut::runtime
