// The block-scaled FP8 weight format (fp8-block128; kernels/weight_format.h's kBlockFp8Format) against
// docs/formats.md "Block-scaled FP8 (128×128)", read by a decoder of its own in double: element c of row r is
// its E4M3 code's value times scales[r / 128][c / 128], the product exact in double and rounded once to
// FP32, so decode_rows must give the double decoder's values bit for bit; a row's dot is within Higham's
// bound of the double dot of those values (γ_n·Σ|w·x|), and so are kernels::Gemv and the prefill Gemm. The
// quantizer against DeepGEMM's per_block_cast_to_fp8 rule, recomputed: each block's scale, and every code
// the nearest E4M3 value to w · (448 / amax). The contract every ISA keeps is weight_format_test.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/block_fp8.h"
#include "plumb/formats/fp8.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using testing::Gamma;
using testing::RandomBlockFp8;
using testing::RandomVector;

// ---- an independent decoder (from docs/formats.md, in double) -------------------------------------------

double NaiveE4M3(int code) {  // S EEEE MMM, bias 7; e = 0 subnormal m · 2^-9; S.1111.111 NaN
  const int e = (code >> 3) & 0xF, m = code & 7;
  const double magnitude = e == 15 && m == 7 ? NAN : e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (code & 0x80) ? -magnitude : magnitude;
}

// Row r decoded: each value the exact double product rounded to FP32.
std::vector<float> NaiveRow(const WeightMatrix& W, int r) {
  const int block_cols = (W.cols + 127) / 128;
  std::vector<float> w(W.cols);
  for (int c = 0; c < W.cols; ++c) {
    const double scale = W.fp8_block_scales[static_cast<std::size_t>(r / 128) * block_cols + c / 128];
    w[c] = static_cast<float>(NaiveE4M3(W.data[static_cast<std::size_t>(r) * W.cols + c]) * scale);
  }
  return w;
}

std::vector<WeightMatrix> Matrices(bool specials) {
  std::vector<WeightMatrix> out;
  std::uint32_t seed = 100;
  for (const auto& [rows, cols] : {std::pair{1, 1}, {2, 15}, {5, 128}, {9, 129}, {130, 37}, {131, 333}})
    out.push_back(RandomBlockFp8(rows, cols, seed++, specials));
  return out;
}

std::string Where(const WeightMatrix& W, int r, int c) {
  return std::to_string(W.rows) + "x" + std::to_string(W.cols) + " [" + std::to_string(r) + "][" +
         std::to_string(c) + "]";
}

TEST(BlockFp8, DecodedElementsAreTheCodeTimesTheBlockScaleRoundedOnce) {
  for (const WeightMatrix& W : Matrices(/*specials=*/true)) {
    std::vector<float> row(W.cols);
    for (int r = 0; r < W.rows; ++r) {
      kernels::DecodeRowsOf(W, r, 1, row.data());
      const std::vector<float> expected = NaiveRow(W, r);
      for (int c = 0; c < W.cols; ++c) ASSERT_TRUE(testing::SameBits(row[c], expected[c])) << Where(W, r, c);
    }
  }
}

TEST(BlockFp8, RowDotsGemvAndGemmAreWithinTheDotProductBound) {
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
          const std::vector<float> w = NaiveRow(W, r);
          double dot = 0, abs_sum = 0;
          for (int c = 0; c < W.cols; ++c) {
            dot += static_cast<double>(w[c]) * x[c];
            abs_sum += std::fabs(static_cast<double>(w[c]) * x[c]);
          }
          const double bound = Gamma(W.cols) * abs_sum + 1e-300;
          const std::string where =
              Where(W, r, -1) + ", m " + std::to_string(m) + ", x row " + std::to_string(i);
          ASSERT_LE(std::fabs(y[r] - dot), bound) << where;
          ASSERT_EQ(gemv[r], y[r]) << where << ": Gemv is the definition";
          ASSERT_LE(std::fabs(gemm[static_cast<std::size_t>(i) * W.rows + r] - dot), bound) << where;
        }
      }
    }
  }
}

// A scale grid read transposed ([c/128][r/128]) or one scale a row: each gives other values than the
// definition on a matrix of 2 × 3 blocks, whose scales all differ.
TEST(BlockFp8, EachBlockHasItsOwnScale) {
  const WeightMatrix W = RandomBlockFp8(200, 300, 9);
  std::vector<float> decoded(static_cast<std::size_t>(200) * 300);
  kernels::DecodeRowsOf(W, 0, 200, decoded.data());
  for (int bi = 0; bi < 2; ++bi) {
    for (int bj = 0; bj < 3; ++bj) {
      const int r = bi * 128 + 5, c = bj * 128 + 7;  // inside block (bi, bj)
      const double expected =
          NaiveE4M3(W.data[static_cast<std::size_t>(r) * 300 + c]) * W.fp8_block_scales[bi * 3 + bj];
      EXPECT_EQ(decoded[static_cast<std::size_t>(r) * 300 + c], static_cast<float>(expected))
          << bi << "," << bj;
    }
  }
}

// ---- the quantizer --------------------------------------------------------------------------------------

std::vector<float> RandomWeights(int rows, int cols, std::uint32_t seed) {
  std::vector<float> w = RandomVector(static_cast<std::size_t>(rows) * cols, seed, 0.05f);
  // Blocks of different magnitudes, so each block's scale is its own.
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      w[static_cast<std::size_t>(r) * cols + c] *= static_cast<float>(1 + (r / 128) * 3 + c / 128);
  return w;
}

TEST(BlockFp8, QuantizerScalesAreTheBlockAmaxOver448ClampedAt1e4) {
  const int rows = 131, cols = 333;
  std::vector<float> w = RandomWeights(rows, cols, 4);
  for (int r = 128; r < rows; ++r)  // block (1, 2), partial both ways: all zero
    for (int c = 256; c < cols; ++c) w[static_cast<std::size_t>(r) * cols + c] = 0.0f;
  const BlockFp8Matrix q = QuantizeBlockFp8(w.data(), rows, cols);
  ASSERT_EQ(q.scales.size(), 2u * 3);
  ASSERT_EQ(q.codes.size(), static_cast<std::size_t>(rows) * cols);
  for (int bi = 0; bi < 2; ++bi) {
    for (int bj = 0; bj < 3; ++bj) {
      float amax = 0;
      for (int r = bi * 128; r < std::min(rows, bi * 128 + 128); ++r)
        for (int c = bj * 128; c < std::min(cols, bj * 128 + 128); ++c)
          amax = std::max(amax, std::fabs(w[static_cast<std::size_t>(r) * cols + c]));
      const float clamped = std::max(amax, 1e-4f);
      EXPECT_EQ(q.scales[bi * 3 + bj], clamped / 448.0f) << bi << "," << bj;
      if (bi == 1 && bj == 2) {
        EXPECT_EQ(amax, 0.0f);
      }
    }
  }
}

TEST(BlockFp8, QuantizerCodesAreTheNearestE4M3ToTheScaledWeight) {
  const int rows = 130, cols = 140;
  const std::vector<float> w = RandomWeights(rows, cols, 5);
  const BlockFp8Matrix q = QuantizeBlockFp8(w.data(), rows, cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const float amax = q.scales[(r / 128) * 2 + c / 128] * 448.0f;  // exact back: 448 = 7 · 2^6
      const double t = static_cast<double>(w[static_cast<std::size_t>(r) * cols + c] * (448.0f / amax));
      const double got = NaiveE4M3(q.codes[static_cast<std::size_t>(r) * cols + c]);
      ASSERT_LE(std::fabs(t), 448.0 * (1 + 0x1p-22)) << "[" << r << "][" << c << "]";  // never saturates
      for (int code = 0; code < 256; ++code) {
        const double v = NaiveE4M3(code);
        if (std::isnan(v)) continue;
        ASSERT_LE(std::fabs(got - t), std::fabs(v - t)) << "[" << r << "][" << c << "] code " << code;
      }
    }
  }
}

TEST(BlockFp8, QuantizedMatrixDecodesCloseToTheWeights) {
  const int rows = 131, cols = 333;
  const std::vector<float> w = RandomWeights(rows, cols, 6);
  const WeightMatrix W = WeightMatrix::FromBlockFp8(QuantizeBlockFp8(w.data(), rows, cols));
  EXPECT_EQ(W.format->describe(W), "fp8-block128");
  std::vector<float> decoded(static_cast<std::size_t>(rows) * cols);
  kernels::DecodeRowsOf(W, 0, rows, decoded.data());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * cols + c;
      const double scale = W.fp8_block_scales[(r / 128) * 3 + c / 128];
      // E4M3 rounds a normal value within 2^-4 relative, a subnormal one within 2^-10 · scale.
      ASSERT_LE(std::fabs(decoded[i] - w[i]), 0x1p-4 * std::fabs(w[i]) + 0x1p-10 * scale * 1.0001)
          << r << "," << c;
    }
  }
}

TEST(BlockFp8, QuantizerRefusesNonFiniteWeightsNamingTheElement) {
  std::vector<float> w(3 * 5, 0.5f);
  w[2 * 5 + 4] = NAN;
  try {
    (void)QuantizeBlockFp8(w.data(), 3, 5);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2][4]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace plumb
