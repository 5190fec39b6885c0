// DType helpers and the FP16 / BF16 <-> FP32 conversions. The bit layouts and the rounding rule are in
// docs/formats.md, sections "FP16 (IEEE binary16)" and "BF16".
#include "plumb/formats/dtype.h"

#include <bit>
#include <cstdint>
#include <limits>

namespace plumb {

static_assert(std::numeric_limits<float>::is_iec559 && sizeof(float) == 4,
              "plumb needs IEEE binary32 floats");

namespace {

struct DTypeEntry {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::F64, "F64", 8},   {DType::F32, "F32", 4},         {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8},         {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},   {DType::I8, "I8", 1},           {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};

const DTypeEntry& Entry(DType dtype) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.dtype == dtype) return entry;
  }
  return kDTypes[0];  // unreachable for a valid enumerator
}

// binary32 fields (docs/formats.md): 1 sign bit, 8 exponent bits (bias 127), 23 mantissa bits.
constexpr std::uint32_t kF32SignMask = 0x80000000u;
constexpr std::uint32_t kF32ExpMask = 0x7F800000u;  // also the bits of +inf
constexpr std::uint32_t kF32MantMask = 0x007FFFFFu;

// binary16 fields: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
constexpr std::uint16_t kF16SignMask = 0x8000u;
constexpr std::uint16_t kF16ExpMask = 0x7C00u;  // also the bits of +inf
constexpr std::uint16_t kF16MantMask = 0x03FFu;

// The NaN CUDA's __float2half_rn and __float2bfloat16_rn return for every NaN input: positive, all
// mantissa bits set (quiet in both formats).
constexpr std::uint16_t kCanonicalNaN16 = 0x7FFFu;

}  // namespace

std::size_t DTypeSize(DType dtype) {
  return Entry(dtype).size;
}

std::string_view DTypeName(DType dtype) {
  return Entry(dtype).name;
}

std::optional<DType> ParseSafetensorsDType(std::string_view name) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

std::string_view SupportedDTypeNames() {
  return "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2";
}

bool IsFloatDType(DType dtype) {
  return dtype == DType::F64 || dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

float F16ToF32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & kF16SignMask) << 16;
  const std::uint32_t exponent = (bits & kF16ExpMask) >> 10;
  const std::uint32_t mantissa = bits & kF16MantMask;

  std::uint32_t out;
  if (exponent == 0x1F) {
    // inf (mantissa 0) or NaN (payload moved to the top of the binary32 mantissa, so it stays non-zero).
    out = sign | kF32ExpMask | (mantissa << 13);
  } else if (exponent != 0) {
    // Normal: value = 1.m * 2^(e - 15); rebias the exponent from 15 to 127.
    out = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;  // +-0
  } else {
    // Subnormal: value = m * 2^-24. With p the index of the highest set bit of m (0..9), the value is
    // 1.f * 2^(p - 24), a normal binary32 number with biased exponent p - 24 + 127.
    const int p = std::bit_width(mantissa) - 1;
    const std::uint32_t fraction = (mantissa << (23 - p)) & kF32MantMask;  // drop the leading 1
    out = sign | (static_cast<std::uint32_t>(p - 24 + 127) << 23) | fraction;
  }
  return std::bit_cast<float>(out);
}

std::uint16_t F32ToF16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits & kF32SignMask) >> 16);
  const std::uint32_t magnitude = bits & ~kF32SignMask;

  if (magnitude > kF32ExpMask) {
    // NaN: CUDA's __float2half_rn (and cvt.rn.f16.f32) give the canonical NaN 0x7FFF whatever the input's
    // sign and payload (docs/formats.md "FP16 (IEEE binary16)").
    return kCanonicalNaN16;
  }
  if (magnitude >= 0x477FF000u) {
    // >= 65520 = halfway between 65504 (0x7BFF, odd mantissa) and 2^16: ties to even go up, to inf.
    // This also maps +-inf to +-inf.
    return static_cast<std::uint16_t>(sign | kF16ExpMask);
  }
  if (magnitude >= 0x38800000u) {
    // Normal result (|x| >= 2^-14). Round the 23-bit mantissa to 10 bits, ties to even: add just under
    // half an FP16 ulp (0xFFF) plus the lowest kept bit, then truncate. A carry out of the mantissa
    // correctly bumps the exponent. Rebias the exponent from 127 to 15 by subtracting 112 << 23.
    const std::uint32_t lowest_kept_bit = (magnitude >> 13) & 1u;
    const std::uint32_t rounded = magnitude + 0x0FFFu + lowest_kept_bit;
    return static_cast<std::uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
  }
  if (magnitude <= 0x33000000u) {
    // |x| <= 2^-25, half the smallest subnormal: rounds to zero (2^-25 itself is a tie, and 0 is even).
    return sign;
  }
  // Subnormal result: the FP16 code is |x| / 2^-24 rounded to an integer, ties to even. With the implicit
  // bit restored, |x| = m * 2^(e - 150), so |x| / 2^-24 = m >> (126 - e), and here 14 <= 126 - e <= 24.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t m = (magnitude & kF32MantMask) | 0x00800000u;
  const std::uint32_t shift = 126u - exponent;
  std::uint32_t code = m >> shift;
  const std::uint32_t remainder = m & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (remainder > half || (remainder == half && (code & 1u) != 0)) {
    ++code;  // may become 0x400, the smallest normal: the encoding carries over correctly
  }
  return static_cast<std::uint16_t>(sign | code);
}

float BF16ToF32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t F32ToBF16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & ~kF32SignMask) > kF32ExpMask) {
    // NaN: CUDA's __float2bfloat16_rn gives the canonical 0x7FFF. Rounding it like a number could carry
    // into the sign or truncate it to inf (0x7F800001 -> 0x7F80); neither happens.
    return kCanonicalNaN16;
  }
  // Round the lower 16 bits away, ties to even: add just under half (0x7FFF) plus the lowest kept bit.
  // Carries propagate into the exponent; the largest finite values round up to inf, as they should.
  const std::uint32_t lowest_kept_bit = (bits >> 16) & 1u;
  return static_cast<std::uint16_t>((bits + 0x7FFFu + lowest_kept_bit) >> 16);
}

}  // namespace plumb
