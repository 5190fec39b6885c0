// scalar::Exp, plumb's e^x (include/plumb/kernels/scalar.h states the steps; the constants and why these:
// src/kernels/exp/exp_constants.h).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "exp_constants.h"
#include "plumb/kernels/scalar.h"

namespace plumb::kernels::scalar {

float Exp(float x) {
  using namespace exp_constants;
  const auto bits = std::bit_cast<std::uint32_t>(x);
  if (IsLarge(bits)) {
    if (bits == 0xff800000u) return 0.0f;              // −inf
    if (std::isnan(x) || std::isinf(x)) return x + x;  // +inf, and NaN quietened
    if (x > kOverflow) return std::numeric_limits<float>::infinity();
    if (x < kUnderflow) return 0.0f;
    if (x < kSubnormal) return 0x1p-149f;
    // Otherwise (88 ≤ |x| in range) the polynomial, as for every other input.
  }
  const double xd = x;
  const double shifted = std::fma(kInvLn2N, xd, kShift);  // k + 1.5 · 2^52: k = round(x · N / ln 2)
  const auto k = std::bit_cast<std::uint64_t>(shifted);   // k in the low bits (two's complement)
  const double kd = shifted - kShift;
  const double r = std::fma(kInvLn2N, xd, -kd);  // x · N / ln 2 − k, exact but for the fma's one rounding
  const double s = std::bit_cast<double>(kTable[k % 32] + (k << 47));  // 2^(k/N)
  const double z = std::fma(kC0, r, kC1);
  const double r2 = r * r;
  double y = std::fma(r, kC2, 1.0);
  y = std::fma(z, r2, y);
  return static_cast<float>(y * s);
}

}  // namespace plumb::kernels::scalar
