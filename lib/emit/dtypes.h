#pragma once
// Schema enum numbering (torch/_export/serde/schema.py) -> c10 enums.
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

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
