// safetensors bytes -> parseSafetensors, checking what the reference/input
// readers rely on afterwards: every tensor's byte range lies in the data section
// and holds exactly numel * item size bytes.
#include "support/safetensors.h"
#include "targets.h"

namespace pipecut::fuzz {

int safetensors(const uint8_t* data, size_t size) {
  support::SafetensorsFile f;
  if (!refusesOrRuns("parseSafetensors", [&] { f = support::parseSafetensors(asText(data, size)); })) return 0;
  if (f.dataOffset < 8 || f.dataOffset > size) finding("data section starts at " + std::to_string(f.dataOffset));
  const uint64_t dataLen = size - f.dataOffset;
  for (const auto& t : f.tensors) {
    const std::string at = "tensor '" + t.key + "': ";
    if (t.itemSize != support::safetensorsItemSize(t.dtype)) finding(at + "item size does not match dtype " + t.dtype);
    if (t.begin > t.end || t.end > dataLen) finding(at + "byte range outside the data section");
    unsigned __int128 numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) finding(at + "negative size");
      numel *= static_cast<uint64_t>(d);
      if (numel > dataLen) numel = static_cast<unsigned __int128>(dataLen) + 1;  // too big either way
    }
    if (numel * static_cast<unsigned>(t.itemSize) != t.end - t.begin) finding(at + "byte range does not fit dtype and shape");
  }
  return 0;
}

}  // namespace pipecut::fuzz
