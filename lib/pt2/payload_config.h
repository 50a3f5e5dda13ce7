#pragma once
// The payload configs of a .pt2 (data/weights/<model>_weights_config.json,
// data/constants/<model>_constants_config.json): which record holds each
// lifted tensor, with its metadata. Parsed without the archive itself (record
// sizes come through a callback), so the parser is torch-free and fuzzable.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"

namespace pipecut::pt2 {

struct PayloadEntry {
  std::string fqn;
  // The config entry, verbatim, as minified JSON text: a deep model has 10^4
  // entries and a preview reads none of them, so StoredTensor::entry() parses
  // one when a stage writes it (as nlohmann::json, the entries' ~40 values
  // each cost ~2 us and ~40 allocations at read).
  std::string entryJson;
  std::optional<ir::TensorMeta> meta;  // absent for entries without tensor_meta (custom objects)
  bool isParam = false;
  bool usePickle = false;
  std::string record;                  // full record name: dir + path_name
  // A 0-byte record for a tensor on the meta device, which is what
  // torch.export.save writes for a meta export: its bytes come from
  // elsewhere (pt2::StoredTensor::external).
  bool external = false;
};

// Size of a record, or nullopt when the archive has none of that name.
using RecordSizeFn = std::function<std::optional<uint64_t>(const std::string& record)>;

// Checks every field it reads, and that each tensor's record holds the bytes
// its sizes, strides, storage offset and dtype span, unless it is a 0-byte
// record of a tensor on the meta device (PayloadEntry::external). Throws pipecut::Error
// (InvalidInput) with an empty file and `where` = "<configRecord>: config.<fqn>.<field>"
// or the data record; the caller attaches the file.
std::vector<PayloadEntry> parsePayloadConfig(std::string_view text, const std::string& dir,
                                             const std::string& configRecord, const RecordSizeFn& recordSize);

// Bytes a strided view needs from the start of its storage; nullopt when a
// size, stride or offset is symbolic, strides are missing, or the count
// overflows 64 bits.
std::optional<uint64_t> requiredStorageBytes(const ir::TensorMeta& m);

}  // namespace pipecut::pt2
