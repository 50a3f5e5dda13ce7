#pragma once
// The one table of element types pipecut knows, under each name it meets them
// by: the export schema's ScalarType number and name (program JSON, the
// manifest's sizes), torch's dtype name (manifests, `inspect`, example-input
// specs) and the safetensors code (references, checkpoints, inputs). Every
// other place maps through this table; LibTorch's c10::ScalarType is reached
// only through emit/dtypes.h, the one adapter, so the core stays torch-free.
#include <span>
#include <string_view>

namespace pipecut::support {

struct DType {
  int code;                // the schema's ScalarType number (not c10's)
  const char* schemaName;  // "FLOAT"
  const char* torchName;   // "float32", as torch prints dtypes without "torch."
  int itemSize;            // bytes per element
  const char* safetensors; // "F32"; "" where safetensors has no code for it
};

// Each lookup returns nullptr for a name or number the table lacks.
const DType* dtypeFromCode(int schemaCode);
const DType* dtypeFromTorchName(std::string_view torchName);
const DType* dtypeFromSafetensors(std::string_view code);  // "" never matches
std::span<const DType> allDTypes();

}  // namespace pipecut::support
