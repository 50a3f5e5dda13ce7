#include "support/dtypes.h"

namespace pipecut::support {

namespace {

// Numbers from torch/_export/serde/schema.py (ScalarType); safetensors codes
// from the safetensors format's Dtype enum.
constexpr DType kDTypes[] = {
    {1, "BYTE", "uint8", 1, "U8"},
    {2, "CHAR", "int8", 1, "I8"},
    {3, "SHORT", "int16", 2, "I16"},
    {4, "INT", "int32", 4, "I32"},
    {5, "LONG", "int64", 8, "I64"},
    {6, "HALF", "float16", 2, "F16"},
    {7, "FLOAT", "float32", 4, "F32"},
    {8, "DOUBLE", "float64", 8, "F64"},
    {9, "COMPLEXHALF", "complex32", 4, ""},
    {10, "COMPLEXFLOAT", "complex64", 8, "C64"},
    {11, "COMPLEXDOUBLE", "complex128", 16, ""},
    {12, "BOOL", "bool", 1, "BOOL"},
    {13, "BFLOAT16", "bfloat16", 2, "BF16"},
    {28, "UINT16", "uint16", 2, "U16"},
    {29, "FLOAT8E4M3FN", "float8_e4m3fn", 1, "F8_E4M3"},
    {30, "FLOAT8E5M2", "float8_e5m2", 1, "F8_E5M2"},
    {31, "FLOAT8E4M3FNUZ", "float8_e4m3fnuz", 1, ""},
    {32, "FLOAT8E5M2FNUZ", "float8_e5m2fnuz", 1, ""},
    {33, "FLOAT8E8M0FNU", "float8_e8m0fnu", 1, ""},
    {34, "UINT32", "uint32", 4, "U32"},
    {35, "UINT64", "uint64", 8, "U64"},
};

}  // namespace

const DType* dtypeFromCode(int code) {
  for (const auto& d : kDTypes)
    if (d.code == code) return &d;
  return nullptr;
}

const DType* dtypeFromTorchName(std::string_view name) {
  for (const auto& d : kDTypes)
    if (name == d.torchName) return &d;
  return nullptr;
}

const DType* dtypeFromSafetensors(std::string_view code) {
  if (code.empty()) return nullptr;
  for (const auto& d : kDTypes)
    if (code == d.safetensors) return &d;
  return nullptr;
}

std::span<const DType> allDTypes() { return kDTypes; }

}  // namespace pipecut::support
