#pragma once
// The one adapter between pipecut's torch-free names for element types,
// layouts and memory formats (the export schema's numbering, torch's dtype
// names, safetensors codes: support/dtypes.h) and LibTorch's c10 enums.
#include <optional>
#include <string_view>

#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include "support/dtypes.h"
#include "support/error.h"

namespace pipecut::emit {

inline c10::ScalarType toC10(int code) {
  switch (code) {
    case 1: return c10::ScalarType::Byte;
    case 2: return c10::ScalarType::Char;
    case 3: return c10::ScalarType::Short;
    case 4: return c10::ScalarType::Int;
    case 5: return c10::ScalarType::Long;
    case 6: return c10::ScalarType::Half;
    case 7: return c10::ScalarType::Float;
    case 8: return c10::ScalarType::Double;
    case 9: return c10::ScalarType::ComplexHalf;
    case 10: return c10::ScalarType::ComplexFloat;
    case 11: return c10::ScalarType::ComplexDouble;
    case 12: return c10::ScalarType::Bool;
    case 13: return c10::ScalarType::BFloat16;
    case 28: return c10::ScalarType::UInt16;
    case 29: return c10::ScalarType::Float8_e4m3fn;
    case 30: return c10::ScalarType::Float8_e5m2;
    case 31: return c10::ScalarType::Float8_e4m3fnuz;
    case 32: return c10::ScalarType::Float8_e5m2fnuz;
    case 33: return c10::ScalarType::Float8_e8m0fnu;
    case 34: return c10::ScalarType::UInt32;
    case 35: return c10::ScalarType::UInt64;
  }
  invalidInput("dtype", "unknown dtype code " + std::to_string(code));
}

// The table's entry for a c10 type; nullptr for types the table lacks
// (quantized, bits, ...).
inline const support::DType* fromC10(c10::ScalarType type) {
  for (const support::DType& d : support::allDTypes())
    if (toC10(d.code) == type) return &d;
  return nullptr;
}

// "float32" -> Float; nullopt for names the table lacks.
inline std::optional<c10::ScalarType> scalarTypeFromTorchName(std::string_view name) {
  const support::DType* d = support::dtypeFromTorchName(name);
  return d ? std::optional<c10::ScalarType>(toC10(d->code)) : std::nullopt;
}

// "F32" -> Float; nullopt for codes the table lacks.
inline std::optional<c10::ScalarType> scalarTypeFromSafetensors(std::string_view code) {
  const support::DType* d = support::dtypeFromSafetensors(code);
  return d ? std::optional<c10::ScalarType>(toC10(d->code)) : std::nullopt;
}

inline c10::Layout layoutToC10(int code) {
  switch (code) {
    case 1: return c10::kSparse;
    case 2: return c10::kSparseCsr;
    case 3: return c10::kSparseCsc;
    case 4: return c10::kSparseBsr;
    case 5: return c10::kSparseBsc;
    case 6: return c10::kMkldnn;
    case 7: return c10::kStrided;
  }
  invalidInput("layout", "unknown layout code " + std::to_string(code));
}

inline c10::MemoryFormat memoryFormatToC10(int code) {
  switch (code) {
    case 1: return c10::MemoryFormat::Contiguous;
    case 2: return c10::MemoryFormat::ChannelsLast;
    case 3: return c10::MemoryFormat::ChannelsLast3d;
    case 4: return c10::MemoryFormat::Preserve;
  }
  invalidInput("memory_format", "unknown memory format code " + std::to_string(code));
}

}  // namespace pipecut::emit
