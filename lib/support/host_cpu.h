#pragma once
// Who made the CPU this process runs on, for the choices whose best answer
// depends on it (runtime/cpu_matmul.h: MKL runs its best kernels on Intel
// CPUs only).
#include <string>

namespace pipecut::support {

// CPUID leaf 0's vendor string ("GenuineIntel", "AuthenticAMD", ...) on x86;
// "" on any other architecture.
std::string hostCpuVendor();

}  // namespace pipecut::support
