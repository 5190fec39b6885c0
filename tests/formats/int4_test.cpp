// Tests of INT4 round-to-nearest quantization (docs/formats.md "INT4"): the scale and zero each scheme
// chooses, the half-step error bound per group, partial last groups, all-zero groups, extremes and bad input.
// Values are read back through DequantizeInt4Row, the definition.
#include "plumb/formats/int4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/dtype.h"

namespace plumb {
namespace {

constexpr Int4Scheme kSchemes[] = {Int4Scheme::kSymmetric, Int4Scheme::kAsymmetric,
                                   Int4Scheme::kAsymmetricF16Zero};

std::vector<float> Dequantize(const Int4Matrix& m, int r) {
  std::vector<float> out(static_cast<std::size_t>(m.cols));
  const int groups = Int4Groups(m.cols, m.params.group_size);
  const std::size_t zero_row = Int4ZeroRowBytes(m.params, m.cols);
  DequantizeInt4Row(m.params, m.codes.data() + static_cast<std::size_t>(r) * Int4RowBytes(m.cols),
                    m.scales.data() + static_cast<std::size_t>(r) * groups,
                    m.zeros.empty() ? nullptr : m.zeros.data() + static_cast<std::size_t>(r) * zero_row,
                    m.cols, out.data());
  return out;
}

// Every group of every row: the stored scale is the rule's scale rounded to FP16, and every weight comes
// back within half a step (plus the error that rounding the scale, and an FP16 zero, can add at the ends
// of the range: at most 8 steps' worth of a 2^-11 relative error, and 2^-7 of a step for the zero).
void CheckRoundTrip(const std::vector<float>& w, int rows, int cols, Int4Params params) {
  const Int4Matrix m = QuantizeInt4(w.data(), rows, cols, params);
  const int groups = Int4Groups(cols, params.group_size);
  ASSERT_EQ(m.codes.size(), static_cast<std::size_t>(rows) * Int4RowBytes(cols));
  ASSERT_EQ(m.scales.size(), static_cast<std::size_t>(rows) * groups);
  ASSERT_EQ(m.zeros.size(), static_cast<std::size_t>(rows) * Int4ZeroRowBytes(params, cols));
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> back = Dequantize(m, r);
    if (cols % 2 == 1) {
      ASSERT_EQ(m.codes[(static_cast<std::size_t>(r) + 1) * Int4RowBytes(cols) - 1] >> 4, 0) << "odd row pad";
    }
    for (int g = 0; g < groups; ++g) {
      const int begin = g * params.group_size;
      const int end = std::min(cols, begin + params.group_size);
      float lo = 0.0f;
      float hi = 0.0f;
      for (int c = begin; c < end; ++c) {
        lo = std::min(lo, w[static_cast<std::size_t>(r) * cols + c]);
        hi = std::max(hi, w[static_cast<std::size_t>(r) * cols + c]);
      }
      const float rule =
          params.scheme == Int4Scheme::kSymmetric ? 2.0f * std::max(-lo, hi) / 15.0f : (hi - lo) / 15.0f;
      const float scale = F16ToF32(m.scales[static_cast<std::size_t>(r) * groups + g]);
      ASSERT_EQ(scale, F16ToF32(F32ToF16(rule))) << "row " << r << " group " << g;
      const double bound = scale * (0.5 + 8.0 / 2048 + 1.0 / 128) + 1e-12;
      for (int c = begin; c < end; ++c) {
        const float x = w[static_cast<std::size_t>(r) * cols + c];
        ASSERT_LE(std::fabs(static_cast<double>(back[c]) - x), bound)
            << Int4SchemeName(params.scheme) << " G" << params.group_size << " [" << r << "][" << c
            << "] x=" << x << " back=" << back[c] << " scale=" << scale;
        if (x == 0.0f && params.scheme != Int4Scheme::kAsymmetricF16Zero) {
          ASSERT_EQ(back[c], 0.0f) << "an exact zero stays zero (an integer zero point is exact)";
        }
      }
    }
  }
}

TEST(Int4Quantize, RandomRowsWithPartialGroupsStayWithinHalfAStep) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (const Int4Scheme scheme : kSchemes) {
    for (const int group_size : {32, 64, 128}) {
      for (const int cols : {1, 7, 33, 129, 256, 300}) {
        const int rows = 3;
        std::vector<float> w(static_cast<std::size_t>(rows) * cols);
        for (float& x : w) x = normal(rng);
        w[1] = 0.0f;
        CheckRoundTrip(w, rows, cols, {scheme, group_size});
      }
    }
  }
}

TEST(Int4Quantize, ExtremesUseTheFullRange) {
  // One group of 32: -1 and +1 among small values. Sym: scale 2/15, ±1 -> ±7.5 -> -8 and 8 (clamped to 7).
  std::vector<float> w(32, 0.01f);
  w[3] = -1.0f;
  w[30] = 1.0f;
  const Int4Matrix sym = QuantizeInt4(w.data(), 1, 32, {Int4Scheme::kSymmetric, 32});
  EXPECT_EQ(sym.scales[0], F32ToF16(2.0f / 15.0f));
  EXPECT_EQ(Int4Code(sym.codes.data(), 3), 0x8u);   // -8 in two's complement
  EXPECT_EQ(Int4Code(sym.codes.data(), 30), 0x7u);  // 7
  EXPECT_EQ(Int4Code(sym.codes.data(), 0), 0x0u);   // 0.01 / 0.1333 rounds to 0
  // Asym: range [-1, 1], scale 2/15, zero round(7.5) = 8; -1 -> 0, +1 -> 15.
  const Int4Matrix asym = QuantizeInt4(w.data(), 1, 32, {Int4Scheme::kAsymmetric, 32});
  EXPECT_EQ(Int4Code(asym.zeros.data(), 0), 8u);
  EXPECT_EQ(Int4Code(asym.codes.data(), 3), 0u);
  EXPECT_EQ(Int4Code(asym.codes.data(), 30), 15u);
  // All positive: the range is widened to include 0, so the zero point is 0 and the largest value is 15.
  std::vector<float> positive(40);
  for (int c = 0; c < 40; ++c) positive[c] = 0.5f + c;
  const Int4Matrix pos = QuantizeInt4(positive.data(), 1, 40, {Int4Scheme::kAsymmetric, 32});
  EXPECT_EQ(Int4Code(pos.zeros.data(), 0), 0u);
  EXPECT_EQ(Int4Code(pos.codes.data(), 31), 15u);
  EXPECT_EQ(Int4Code(pos.zeros.data(), 1), 0u);  // the partial second group
  const Int4Matrix f16 = QuantizeInt4(positive.data(), 1, 40, {Int4Scheme::kAsymmetricF16Zero, 32});
  std::uint16_t z;
  std::memcpy(&z, f16.zeros.data(), sizeof z);
  EXPECT_EQ(F16ToF32(z), 0.0f);
  // All negative: zero 15.
  std::vector<float> negative(32, -2.0f);
  const Int4Matrix neg = QuantizeInt4(negative.data(), 1, 32, {Int4Scheme::kAsymmetric, 32});
  EXPECT_EQ(Int4Code(neg.zeros.data(), 0), 15u);
  EXPECT_EQ(Dequantize(neg, 0)[5], -15.0f * F16ToF32(F32ToF16(2.0f / 15.0f)));  // (0 - 15) * scale
}

TEST(Int4Quantize, AllZeroGroupGivesScaleZeroAndNoNaN) {
  for (const Int4Scheme scheme : kSchemes) {
    std::vector<float> w(70, 0.0f);
    w[65] = 3.0f;  // the third group (partial) is not zero
    const Int4Matrix m = QuantizeInt4(w.data(), 1, 70, {scheme, 32});
    EXPECT_EQ(m.scales[0], 0u);
    EXPECT_EQ(m.scales[1], 0u);
    EXPECT_NE(m.scales[2], 0u);
    const std::vector<float> back = Dequantize(m, 0);
    for (int c = 0; c < 64; ++c) ASSERT_EQ(back[c], 0.0f) << Int4SchemeName(scheme) << " " << c;
    EXPECT_NEAR(back[65], 3.0f, 3.0f / 15.0f * 1.01f);  // half a step (+ the FP16 scale's rounding)
    CheckRoundTrip(w, 1, 70, {scheme, 32});
  }
}

TEST(Int4Quantize, BadInputIsAnError) {
  const std::vector<float> w(64, 1.0f);
  EXPECT_THROW(QuantizeInt4(w.data(), 1, 64, {Int4Scheme::kSymmetric, 16}), Error);
  EXPECT_THROW(QuantizeInt4(w.data(), 1, 64, {Int4Scheme::kSymmetric, 96}), Error);
  EXPECT_THROW(QuantizeInt4(w.data(), -1, 64, {Int4Scheme::kSymmetric, 32}), Error);
  std::vector<float> nan = w;
  nan[40] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(QuantizeInt4(nan.data(), 1, 64, {Int4Scheme::kAsymmetric, 32}), Error);
  std::vector<float> huge = w;
  huge[0] = 1e7f;  // scale 1.3e6: beyond FP16
  EXPECT_THROW(QuantizeInt4(huge.data(), 1, 64, {Int4Scheme::kSymmetric, 32}), Error);
  const Int4Matrix empty = QuantizeInt4(nullptr, 0, 0, {Int4Scheme::kAsymmetric, 128});
  EXPECT_TRUE(empty.codes.empty());
}

}  // namespace
}  // namespace plumb
