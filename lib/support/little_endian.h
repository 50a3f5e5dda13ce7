#pragma once
// Unsigned little-endian integers of 1 to 8 bytes, as binary formats store
// them (zip records, pickle opcodes, the safetensors header length),
// whatever the host's byte order. The caller checks that the bytes exist.
#include <cstdint>

namespace pipecut::support {

inline uint64_t littleEndian(const void* at, int bytes) {
  const auto* p = static_cast<const unsigned char*>(at);
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace pipecut::support
