#pragma once
// The safetensors container (8-byte little-endian header length, a JSON
// header, raw little-endian data): parsed and checked without torch, so the
// runner's reference/input reader and the fuzzer share one parser; and
// written without torch, for training checkpoints and `pipecut merge`.
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

// Item size of a safetensors dtype code (support/dtypes.h); 0 if unknown.
int safetensorsItemSize(std::string_view code);

// Checks the header's length against the file and the format's bound, each
// tensor's offsets against the data section, its dtype and shape against its
// byte count, and that no two tensors overlap. Throws pipecut::Error
// (InvalidInput) with an empty file and `where` naming the header field
// ("header", "<key>.shape[1]", "<key>.data_offsets", "__metadata__.<name>").
SafetensorsFile parseSafetensors(std::string_view bytes);

// One tensor to write: `bytes` raw little-endian bytes at `data` (which may be
// null when bytes == 0), numel(shape) * itemSize(dtype) of them.
struct SafetensorsTensorRef {
  std::string key;
  std::string dtype;           // the file's code: "F32", "BF16", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

// For support::Destination::previousOutput: "" when `path` is a safetensors
// file whose metadata says `format` (what pipecut writes in its own), else
// what it is. Reads the header only; never throws.
std::string safetensorsInTheWay(const std::string& path, const std::string& format);

// Writes `path` (created or truncated) in the canonical layout: the header is
// compact JSON with keys sorted ("__metadata__" omitted when `metadata` is
// empty), padded with spaces to a multiple of 8 bytes so the data section is
// 8-byte aligned; the data section holds the tensors in key order, back to
// back. Same input, same bytes. Returns the file's SHA-256 (lowercase hex),
// hashed on the way out (support::HashingWriter). Throws pipecut::Error:
// Internal naming the key for an unknown dtype, a size that disagrees with
// dtype and shape, or a key given twice; Internal naming the file for I/O.
// Readers: parseSafetensors, and safetensors' own (Python, Rust).
std::string writeSafetensors(const std::string& path, std::vector<SafetensorsTensorRef> tensors,
                             const std::map<std::string, std::string>& metadata);

}  // namespace pipecut::support
