#include "runtime/cpu_matmul.h"

#include "support/host_cpu.h"

namespace pipecut::runtime {

CpuMatmul resolveCpuMatmul(CpuMatmul m) {
  return m == CpuMatmul::Auto ? autoCpuMatmul(support::hostCpuVendor()) : m;
}

}  // namespace pipecut::runtime
