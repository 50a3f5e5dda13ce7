#include "weights/cast.h"

#include <cstring>

#include "support/error.h"

namespace pipecut::weights {

namespace {

enum class Kind { F64, F32, F16, BF16, Other };

Kind kindOf(const support::DType& d) {
  const std::string name = d.torchName;
  if (name == "float64") return Kind::F64;
  if (name == "float32") return Kind::F32;
  if (name == "float16") return Kind::F16;
  if (name == "bfloat16") return Kind::BF16;
  return Kind::Other;
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return floatOf(sign | 0x7f800000 | (mant << 13));  // inf, NaN (payload kept)
  if (exp != 0) return floatOf(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return floatOf(sign);
  // A subnormal half is mant x 2^-24, exactly a normal float.
  float v = static_cast<float>(mant) * floatOf(0x33800000);  // 2^-24
  return sign ? -v : v;
}

uint16_t floatToHalf(float f) {
  const uint32_t x = bitsOf(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return sign | 0x7e00;            // NaN
  if (ax >= 0x477ff000) return sign | 0x7c00;           // >= 65520 rounds to infinity
  const int e = static_cast<int>(ax >> 23) - 127;
  if (e >= -14) {                                       // a normal half
    const uint32_t mant = ax & 0x7fffff;
    uint32_t h = (static_cast<uint32_t>(e + 15) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry moves into the exponent, as it should
    return static_cast<uint16_t>(sign | h);
  }
  if (ax <= 0x33000000) return sign;                    // at most half the smallest subnormal: to zero (ties even)
  // A subnormal half: value / 2^-24, rounded.
  const uint32_t mant = (ax & 0x7fffff) | 0x800000;
  const int shift = -(e + 1);                           // 14..24
  uint32_t q = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (q & 1))) ++q;
  return static_cast<uint16_t>(sign | q);
}

uint16_t floatToBfloat16(float f) {
  const uint32_t x = bitsOf(f);
  if ((x & 0x7fffffff) > 0x7f800000) return 0x7fc0;     // NaN, as c10 makes it
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float bfloat16ToFloat(uint16_t b) { return floatOf(static_cast<uint32_t>(b) << 16); }

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

}  // namespace

bool castable(const support::DType& from, const support::DType& to) {
  return kindOf(from) != Kind::Other && kindOf(to) != Kind::Other;
}

std::string castTo(const support::DType& from, const support::DType& to, pt2::ByteView bytes, uint64_t numel) {
  const Kind f = kindOf(from), t = kindOf(to);
  if (f == Kind::Other || t == Kind::Other || bytes.size != numel * static_cast<uint64_t>(from.itemSize))
    internalError("--weights-cast", std::string("cannot convert ") + from.torchName + " to " + to.torchName);
  std::string out(static_cast<size_t>(numel * static_cast<uint64_t>(to.itemSize)), '\0');
  auto* dst = reinterpret_cast<uint8_t*>(out.data());
  const uint8_t* src = bytes.data;
  for (uint64_t i = 0; i < numel; ++i) {
    const uint8_t* s = src + i * static_cast<uint64_t>(from.itemSize);
    uint8_t* d = dst + i * static_cast<uint64_t>(to.itemSize);
    if (f == Kind::F64 && t == Kind::F64) {
      std::memcpy(d, s, 8);
      continue;
    }
    if (t == Kind::F64) {
      double v = f == Kind::F32 ? load<float>(s) : f == Kind::F16 ? halfToFloat(load<uint16_t>(s))
                                                                  : bfloat16ToFloat(load<uint16_t>(s));
      store<double>(d, v);
      continue;
    }
    // Everything else goes through float32, as c10's 16-bit types convert.
    float v = f == Kind::F64   ? static_cast<float>(load<double>(s))
              : f == Kind::F32 ? load<float>(s)
              : f == Kind::F16 ? halfToFloat(load<uint16_t>(s))
                               : bfloat16ToFloat(load<uint16_t>(s));
    if (t == Kind::F32) store<float>(d, v);
    else if (t == Kind::F16) store<uint16_t>(d, floatToHalf(v));
    else store<uint16_t>(d, floatToBfloat16(v));
  }
  return out;
}

}  // namespace pipecut::weights
