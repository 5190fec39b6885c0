// Element types of tensors as stored in files, and the exact FP16 / BF16 <-> FP32 scalar conversions.
//
// Bit layouts and the rounding rule are specified in docs/formats.md ("FP16 (IEEE binary16)", "BF16").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace plumb {

// The tensor element types plumb reads and writes (a subset of the safetensors dtypes; docs/formats.md).
// F8_E4M3 and F8_E5M2 are one FP8 code per element (formats/fp8.h, docs/formats.md "FP8").
enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2 };

// Bytes per element: 8, 4, 2, 2, 8, 4, 2, 1, 1, 1, 1, 1.
std::size_t DTypeSize(DType dtype);

// The safetensors spelling of the dtype: "F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8",
// "BOOL", "F8_E4M3", "F8_E5M2".
std::string_view DTypeName(DType dtype);

// Inverse of DTypeName (case-sensitive, as in the safetensors format); nullopt for any other string,
// including safetensors dtypes plumb does not support (U16, U32, U64, F8_E8M0, F4, ...).
std::optional<DType> ParseSafetensorsDType(std::string_view name);

// "F64, F32, ..., F8_E5M2": every dtype plumb reads, for error messages.
std::string_view SupportedDTypeNames();

// True for F64, F32, F16 and BF16: the dtypes that convert to float on their own. FP8 needs its scale
// (docs/formats.md "Packed checkpoints"), so it is not one of them.
bool IsFloatDType(DType dtype);

// FP16 bits -> float. Exact: every binary16 value (normal, subnormal, +-0, +-inf) is a binary32 value.
// A NaN stays a NaN with the same sign and its 10 payload bits moved to the top of the 23-bit mantissa.
float F16ToF32(std::uint16_t bits);

// float -> FP16 bits, rounding to nearest, ties to even. |x| >= 65520 (halfway between the largest finite
// FP16, 65504, and 2^16) becomes +-inf; results below 2^-14 become subnormals or +-0 (sign kept).
// Exactly CUDA's __float2half_rn: every NaN, whatever its sign and payload, becomes 0x7FFF.
std::uint16_t F32ToF16(float value);

// BF16 bits -> float. Exact: the BF16 bits are the upper 16 bits of the float.
float BF16ToF32(std::uint16_t bits);

// float -> BF16 bits: the upper 16 bits rounded to nearest, ties to even (finite values beyond the largest
// BF16 round to +-inf). Exactly CUDA's __float2bfloat16_rn: every NaN becomes 0x7FFF (never inf, as plain
// rounding of e.g. 0x7F800001 would give).
std::uint16_t F32ToBF16(float value);

}  // namespace plumb
