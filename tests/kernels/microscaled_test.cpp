// The microscaled weight format (MXFP4, NVFP4, MXFP8; kernels/weight_format.h's kMicroscaledFormat) against
// docs/formats.md "Microscaled formats", read by a decoder of its own in double: every element of a row is
// its code's value times its block's scale, exactly, so decode_rows must give the double decoder's values
// bit for bit; a row's dot is within Higham's bound of the double dot (γ_{n+1}·Σ|w·x|: the n-term dot and
// NVFP4's tensor scale), and so are kernels::Gemv and the prefill Gemm (decoded tiles and sgemm). The
// contract every ISA keeps is weight_format_test.cpp's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using testing::Gamma;
using testing::RandomMicroscaled;
using testing::RandomVector;

// ---- an independent decoder (from docs/formats.md, in double) -------------------------------------------

double NaiveFp4(int code) {  // S EE M, bias 1; e = 0 is the subnormal m · 0.5
  const int e = (code >> 1) & 3, m = code & 1;
  const double magnitude = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1);
  return (code & 8) ? -magnitude : magnitude;
}

double NaiveFp8(int code, bool e4m3) {
  const int m_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, max_e = e4m3 ? 15 : 31;
  const int e = (code & 0x7F) >> m_bits, m = code & ((1 << m_bits) - 1);
  double magnitude;
  if (e4m3 && e == max_e && m == 7) {
    magnitude = NAN;
  } else if (!e4m3 && e == max_e) {
    magnitude = m == 0 ? INFINITY : NAN;
  } else {
    magnitude = e == 0 ? std::ldexp(m, 1 - bias - m_bits) : std::ldexp((1 << m_bits) + m, e - bias - m_bits);
  }
  return (code & 0x80) ? -magnitude : magnitude;
}

std::vector<double> NaiveRow(const WeightMatrix& W, int r) {
  const bool fp4 = W.mx_scheme == MicroscalingScheme::kMxfp4 || W.mx_scheme == MicroscalingScheme::kNvfp4;
  const int block = W.mx_scheme == MicroscalingScheme::kNvfp4 ? 16 : 32;
  const int blocks = (W.cols + block - 1) / block;
  const std::uint8_t* codes = W.data + static_cast<std::size_t>(r) * (fp4 ? (W.cols + 1) / 2 : W.cols);
  std::vector<double> w(W.cols);
  for (int c = 0; c < W.cols; ++c) {
    const int s = W.mx_scales[static_cast<std::size_t>(r) * blocks + c / block];
    const double scale = W.mx_scheme == MicroscalingScheme::kNvfp4 ? NaiveFp8(s, true)
                         : s == 0xFF                               ? NAN
                                                                   : std::ldexp(1.0, s - 127);
    const double element = fp4 ? NaiveFp4((codes[c / 2] >> (4 * (c % 2))) & 0xF)
                               : NaiveFp8(codes[c], W.mx_scheme == MicroscalingScheme::kMxfp8E4M3);
    w[c] = element * scale;
  }
  return w;
}

std::vector<WeightMatrix> Matrices(bool specials) {
  std::vector<WeightMatrix> out;
  std::uint32_t seed = 100;
  for (const MicroscalingScheme scheme : kMicroscalingSchemes) {
    for (int cols : {1, 15, 16, 17, 33, 257, 600})
      out.push_back(RandomMicroscaled(scheme, 9, cols, seed++, specials));
  }
  return out;
}

TEST(Microscaled, DecodedElementsAreTheCodeTimesTheBlockScaleExactly) {
  for (const WeightMatrix& W : Matrices(/*specials=*/true)) {
    std::vector<float> row(W.cols);
    for (int r = 0; r < W.rows; ++r) {
      kernels::DecodeRowsOf(W, r, 1, row.data());
      const std::vector<double> expected = NaiveRow(W, r);
      for (int c = 0; c < W.cols; ++c) {
        if (std::isnan(expected[c])) {
          ASSERT_TRUE(std::isnan(row[c]))
              << MicroscalingSchemeName(W.mx_scheme) << " [" << r << "][" << c << "]";
        } else {
          ASSERT_EQ(static_cast<double>(row[c]), expected[c])
              << MicroscalingSchemeName(W.mx_scheme) << " " << W.cols << " cols [" << r << "][" << c << "]";
        }
      }
    }
  }
}

TEST(Microscaled, RowDotsGemvAndGemmAreWithinTheDotProductBound) {
  // 3 rows of X take the batched decode's small GEMM, 70 the prefill's decoded tiles and sgemm.
  for (const WeightMatrix& W : Matrices(/*specials=*/false)) {
    for (const int m : {3, 70}) {
      const std::vector<float> X = RandomVector(static_cast<std::size_t>(m) * W.cols, 7u * W.cols + m);
      std::vector<float> y(W.rows), gemv(W.rows), gemm(static_cast<std::size_t>(m) * W.rows);
      kernels::Gemm(X.data(), m, W, gemm.data());
      for (int i = 0; i < m; ++i) {
        const float* x = X.data() + static_cast<std::size_t>(i) * W.cols;
        kernels::RowDotsOf(W, 0, W.rows, x, y.data());
        kernels::Gemv(W, x, gemv.data());
        for (int r = 0; r < W.rows; ++r) {
          const std::vector<double> w = NaiveRow(W, r);
          double dot = 0, abs_sum = 0;
          for (int c = 0; c < W.cols; ++c) {
            dot += w[c] * x[c];
            abs_sum += std::fabs(w[c] * x[c]);
          }
          const double t = W.mx_tensor_scale;
          const double bound = Gamma(W.cols + 1) * t * abs_sum + 1e-300;
          const std::string where = std::string(MicroscalingSchemeName(W.mx_scheme)) + " " +
                                    std::to_string(W.cols) + " cols, m " + std::to_string(m) + ", x row " +
                                    std::to_string(i) + ", row " + std::to_string(r);
          ASSERT_LE(std::fabs(y[r] - t * dot), bound) << where;
          ASSERT_EQ(gemv[r], y[r]) << where << ": Gemv is the definition";
          ASSERT_LE(std::fabs(gemm[static_cast<std::size_t>(i) * W.rows + r] - t * dot), bound) << where;
        }
      }
    }
  }
}

// A NaN block scale makes its block's elements NaN, and with them the row's dot (OCP MX: a NaN scale means
// every element of the block is NaN); the other rows are untouched.
TEST(Microscaled, ANanScaleMakesItsRowNan) {
  const WeightMatrix W = RandomMicroscaled(MicroscalingScheme::kMxfp4, 4, 64, 5);
  std::vector<std::uint8_t> scales(W.mx_scales, W.mx_scales + 4 * 2);
  scales[1 * 2 + 1] = 0xFF;  // row 1, block 1
  const WeightMatrix nan_scale =
      WeightMatrix::MicroscaledView(W.mx_scheme, 4, 64, W.data, scales.data(), 1.0f, W.owner);
  const std::vector<float> x = RandomVector(64, 3);
  std::vector<float> y(4), y_nan(4);
  kernels::Gemv(W, x.data(), y.data());
  kernels::Gemv(nan_scale, x.data(), y_nan.data());
  EXPECT_TRUE(std::isnan(y_nan[1]));
  for (int r : {0, 2, 3}) EXPECT_EQ(y_nan[r], y[r]) << r;
}

TEST(Microscaled, ATensorScaleIsNvfp4sAlone) {
  const WeightMatrix W = RandomMicroscaled(MicroscalingScheme::kMxfp4, 2, 32, 1);
  EXPECT_THROW(
      WeightMatrix::MicroscaledView(MicroscalingScheme::kMxfp4, 2, 32, W.data, W.mx_scales, 2.0f, W.owner),
      Error);
  for (const float bad : {0.0f, -1.0f, INFINITY, NAN}) {
    EXPECT_THROW(
        WeightMatrix::MicroscaledView(MicroscalingScheme::kNvfp4, 2, 32, W.data, W.mx_scales, bad, W.owner),
        Error)
        << bad;
  }
}

}  // namespace
}  // namespace plumb
