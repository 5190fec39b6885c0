// The constants of plumb's e^x (scalar::Exp, include/plumb/kernels/scalar.h), shared by the definition and
// its SIMD variants. They are the published ones of the expf in glibc (sysdeps/ieee754/flt-32/e_expf.c and
// e_exp2f_data.c, from Arm's optimized-routines, N = 32 table entries), so that on an x86-64 host whose
// libm picks that expf's FMA build plumb's Exp gives the very bits std::exp gave before (checked for all
// 2^32 inputs, docs/formats.md "e^x"), and on any other host, libm or CPU the same bits as there.
// Internal to src/kernels.
#pragma once

#include <cstdint>

namespace plumb::kernels::exp_constants {

inline constexpr double kInvLn2N = 0x1.71547652b82fep+5;  // N / ln 2, N = 32
inline constexpr double kShift = 0x1.8p+52;               // adding it rounds to an integer, ties to even
// e^x = 2^(k/N) · 2^(r/N), 2^(r/N) ≈ ((C0·r + C1)·r² + (C2·r + 1)) for r in [−1/2, 1/2].
inline constexpr double kC0 = 0x1.c6af84b912394p-20;
inline constexpr double kC1 = 0x1.ebfce50fac4f3p-13;
inline constexpr double kC2 = 0x1.62e42ff0c52d6p-6;
// kTable[i] = bits(2^(i/N)) − (i << 47): adding k << 47 (k the integer whose low 5 bits are i) gives the
// bits of 2^(k/N) itself, the high bits of k landing in the exponent.
inline constexpr std::uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
// Inputs whose bits 20..30 exceed this (|x| ≥ 2^6 · 1.375 = 88, infinities, NaN) take the special cases;
// every other input the polynomial.
inline constexpr std::uint32_t kLargeTop = 0x42a;
inline constexpr float kOverflow = 0x1.62e42ep6f;    // above: +inf (ln 2^128 ≈ 88.72)
inline constexpr float kUnderflow = -0x1.9fe368p6f;  // below: +0 (ln 2^-150 ≈ −103.97)
inline constexpr float kSubnormal = -0x1.9d1d9ep6f;  // in [kUnderflow, this): 2^-149 (ln 2^-149 ≈ −103.28)

// Whether x takes a special case rather than the polynomial (its bits, as an unsigned integer).
inline bool IsLarge(std::uint32_t bits) {
  return ((bits >> 20) & 0x7ff) > kLargeTop;
}

}  // namespace plumb::kernels::exp_constants
