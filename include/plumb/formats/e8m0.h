// E8M0, the shared scale of the OCP microscaling (MX) formats: a bare power of two. Decoding, and encoding
// as CUDA's __nv_cvt_float_to_e8m0 does. Bit layout and the rounding rules: docs/formats.md ("E8M0").
//
//   EEEEEEEE, bias 127, no sign, no mantissa: code e is 2^(e − 127) for e = 0 .. 254; 0xFF is NaN.
#pragma once

#include <cstdint>

#include "plumb/formats/fp8.h"  // Fp8Overflow: CUDA treats E8M0 as an FP8 storage type with __nv_saturation_t

namespace plumb {

// How a float that is not a power of two becomes one (the two modes CUDA's conversion accepts).
enum class E8M0Rounding : std::uint8_t {
  kTowardZero,    // cudaRoundZero: 2^floor(log2 |x|), the exponent of |x| as it stands
  kTowardPosInf,  // cudaRoundPosInf: 2^ceil(log2 |x|), the smallest power of two not below |x|
};

inline constexpr std::uint8_t kE8M0Nan = 0xFF;

// E8M0 code -> float: 2^(code − 127), exact (code 0 is 2^−127, an FP32 subnormal); 0xFF gives a quiet NaN.
float E8M0ToF32(std::uint8_t code);

// The 256 values E8M0ToF32 gives, indexed by code (built once; kernels decode scales with it).
const float* E8M0DecodeTable();

// float -> E8M0 code, exactly as CUDA 13's host-callable __nv_cvt_float_to_e8m0(x, saturation, rounding)
// (cuda_fp8.hpp): the sign is dropped (a scale is a magnitude); zero and every |x| at or below 2^−127 give
// code 0, the smallest scale; NaN gives 0xFF; a result past 2^127 (±inf, or kTowardPosInf above 2^127)
// gives 2^127 (0xFE) under Fp8Overflow::kSaturate and NaN (0xFF) under kNoSaturate.
std::uint8_t F32ToE8M0(float value, E8M0Rounding rounding, Fp8Overflow overflow);

}  // namespace plumb
