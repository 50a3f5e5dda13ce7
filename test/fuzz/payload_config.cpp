// payload config (data/weights/<m>_weights_config.json and the constants one)
// -> parsePayloadConfig. The record-size callback answers from the input's
// first 8 bytes (see targets.h); the rest is the config JSON.
#include "pt2/payload_config.h"
#include "targets.h"
#include "support/dtypes.h"

namespace pipecut::fuzz {

int payload_config(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t word = 0;
  for (int i = 7; i >= 0; --i) word = (word << 8) | data[i];
  const bool oddMissing = word >> 63;
  const uint64_t recordBytes = word & ~(uint64_t{1} << 63);
  const std::string_view text = asText(data + 8, size - 8);

  auto recordSize = [&](const std::string& record) -> std::optional<uint64_t> {
    if (oddMissing && !record.empty() && record.back() >= '0' && record.back() <= '9' && (record.back() - '0') % 2)
      return std::nullopt;
    return recordBytes;
  };
  const std::string dir = "data/weights/";
  std::vector<pt2::PayloadEntry> entries;
  if (!refusesOrRuns("parsePayloadConfig", [&] {
        entries = pt2::parsePayloadConfig(text, dir, dir + "model_weights_config.json", recordSize);
      }))
    return 0;

  // What the package reader relies on afterwards.
  for (const auto& e : entries) {
    if (e.record.rfind(dir, 0) != 0) finding("entry '" + e.fqn + "': record '" + e.record + "' is outside " + dir);
    if (!recordSize(e.record)) finding("entry '" + e.fqn + "' names a missing record '" + e.record + "'");
    if (!e.meta || e.usePickle) continue;
    const support::DType* d = support::dtypeFromCode(e.meta->dtype);
    if (!d) finding("entry '" + e.fqn + "': accepted with unknown dtype " + std::to_string(e.meta->dtype));
    if (e.meta->strides.size() != e.meta->sizes.size()) finding("entry '" + e.fqn + "': accepted without strides");
    if (auto need = pt2::requiredStorageBytes(*e.meta); need && *need > recordBytes)
      finding("entry '" + e.fqn + "': accepted although its record is too short");
  }
  return 0;
}

}  // namespace pipecut::fuzz
