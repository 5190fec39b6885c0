// FP4 E2M1, the element of MXFP4 and NVFP4: decoding, and encoding as CUDA's __nv_cvt_float_to_fp4 does.
// Bit layout, rounding and the NaN rule: docs/formats.md ("FP4 E2M1").
//
//   S EE M, bias 1: the sixteen values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}. No infinities, no NaN.
#pragma once

#include <cstdint>

namespace plumb {

// How a value between two FP4 values is rounded (the two modes CUDA's conversion accepts).
enum class Fp4Rounding : std::uint8_t {
  kNearestEven,  // cudaRoundNearest: the nearest value; a tie goes to the even code
  kTowardZero,   // cudaRoundZero: the nearest value not larger in magnitude
};

inline constexpr float kFp4MaxFinite = 6.0f;

// FP4 code (the low 4 bits of `code`; the high bits are ignored) -> float. Exact; code 0x8 is −0.
float Fp4ToF32(std::uint8_t code);

// The 16 values Fp4ToF32 gives, indexed by code.
const float* Fp4DecodeTable();

// float -> FP4 code (0 .. 15), exactly as CUDA 13's host-callable __nv_cvt_float_to_fp4(x, __NV_E2M1,
// rounding) (cuda_fp4.hpp): subnormal 0.5 included, the sign kept (−0 and negative values that round to 0
// give 0x8), every finite |x| beyond 6 and ±inf saturated to ±6, and NaN, of either sign, to +6 (0x7).
std::uint8_t F32ToFp4(float value, Fp4Rounding rounding);

}  // namespace plumb
