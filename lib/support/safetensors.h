#pragma once
// The safetensors container (8-byte little-endian header length, a JSON
// header, raw little-endian data): parsed and checked without torch, so the
// runner's reference/input reader and the fuzzer share one parser.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pipecut::support {

struct SafetensorsEntry {
  std::string key;
  std::string dtype;           // the file's code: "F32", "BF16", "I64", "BOOL", ...
  int itemSize = 0;            // bytes per element of dtype
  std::vector<int64_t> shape;  // each >= 0
  uint64_t begin = 0, end = 0; // byte range in the data section; end - begin == numel * itemSize
};

struct SafetensorsFile {
  std::vector<SafetensorsEntry> tensors;     // in key order
  std::map<std::string, std::string> metadata;
  uint64_t dataOffset = 0;                   // where the data section starts in the file
};

// Item size of a safetensors dtype code this project reads; 0 if unknown.
int safetensorsItemSize(std::string_view code);

// Throws pipecut::Error (InvalidInput) with an empty file and `where` naming
// the header field ("header", "<key>.shape[1]", "__metadata__.<name>").
SafetensorsFile parseSafetensors(std::string_view bytes);

}  // namespace pipecut::support
