// PackedRowDots (FP8 and INT4 rows times a vector) and the GEMV / GEMM / row lookup built on it.
//
// Matrices are made straight from random codes and scales (no quantizer involved), so every code, scale and
// zero point a file could hold is reachable. Three kinds of check:
//   - the scalar definition against a naive double-precision dot of independently decoded weights, within
//     Higham's bound (tests/kernels/kernels_test.cpp): γ_n·Σ|w·x| for the n-term dot, plus one rounding for
//     each of the ≤ 3 float operations that make or scale a weight (decode products, the FP8 scale), so
//     γ_{n+3}·Σ|w·x| covers it (the γ's compose: (1+γ_a)(1+γ_b) ≤ 1+γ_{a+b});
//   - every vector variant (avx2, avx512, neon: each where the CPU has it; see support/isa_variants.h)
//   against
//     the scalar definition, bit for bit, on awkward shapes, misaligned rows, and NaN / inf / subnormal
//     codes;
//   - kernels::Gemv bitwise the definition at any thread count, kernels::Gemm within the bound.
#include "plumb/kernels/packed_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/dtype.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/row_dot.h"
#include "support/isa_variants.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using kernels::Isa;
using testing::Bits;
using testing::Fp8IsSpecial;
using testing::Gamma;
using testing::RandomFiniteF16;
using testing::RandomFp8;
using testing::RandomInt4;
using testing::RandomVector;
using testing::SameBits;
using testing::Storage;

// ---- independent decoders (from docs/formats.md, in double) ---------------------------------------------

double NaiveF16(std::uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);  // finite only
  return sign ? -magnitude : magnitude;
}

double NaiveFp8(std::uint8_t c, Fp8Format format) {
  const bool e4m3 = format == Fp8Format::kE4M3;
  const int m_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int exponent = (c & 0x7F) >> m_bits, mantissa = c & ((1 << m_bits) - 1);
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, 1 - bias - m_bits)
                                         : std::ldexp((1 << m_bits) + mantissa, exponent - bias - m_bits);
  return (c & 0x80) ? -magnitude : magnitude;
}

// Row r of W, decoded in double straight from the layout; for FP8 the scale is included.
std::vector<double> NaiveRow(const WeightMatrix& W, int r) {
  std::vector<double> w(W.cols);
  const std::uint8_t* row = W.Row(r);
  if (W.Is(kernels::kFp8Format)) {
    const double scale = W.fp8_scales[W.fp8_per_row ? r : 0];
    for (int c = 0; c < W.cols; ++c) w[c] = scale * NaiveFp8(row[c], W.fp8_format);
    return w;
  }
  const int G = W.int4.group_size, groups = Int4Groups(W.cols, G);
  const std::size_t zero_row = Int4ZeroRowBytes(W.int4, W.cols);
  for (int c = 0; c < W.cols; ++c) {
    const int g = c / G;
    const int nibble = (row[c / 2] >> (4 * (c % 2))) & 0xF;
    const double scale = NaiveF16(W.int4_scales[static_cast<std::size_t>(r) * groups + g]);
    const std::uint8_t* z = W.int4_zeros == nullptr ? nullptr : W.int4_zeros + r * zero_row;
    switch (W.int4.scheme) {
      case Int4Scheme::kSymmetric:
        w[c] = (nibble >= 8 ? nibble - 16 : nibble) * scale;
        break;
      case Int4Scheme::kAsymmetric:
        w[c] = (nibble - ((z[g / 2] >> (4 * (g % 2))) & 0xF)) * scale;
        break;
      case Int4Scheme::kAsymmetricF16Zero: {
        std::uint16_t zero;
        std::memcpy(&zero, z + 2 * g, sizeof zero);
        w[c] = (nibble - NaiveF16(zero)) * scale;
        break;
      }
    }
  }
  return w;
}

// Checks y[r] against the double dot of NaiveRow(W, r) and x within γ_{cols+3}·Σ|w·x|.
void ExpectNearNaive(const WeightMatrix& W, const float* x, const float* y, const std::string& what) {
  for (int r = 0; r < W.rows; ++r) {
    const std::vector<double> w = NaiveRow(W, r);
    double exact = 0, abs_sum = 0;
    for (int c = 0; c < W.cols; ++c) {
      exact += w[c] * x[c];
      abs_sum += std::fabs(w[c] * x[c]);
    }
    ASSERT_NEAR(y[r], exact, Gamma(W.cols + 3) * abs_sum + 1e-30) << what << " row " << r;
  }
}

std::string Describe(const WeightMatrix& W) {
  std::string s = std::to_string(W.rows) + "x" + std::to_string(W.cols) + " ";
  if (W.Is(kernels::kFp8Format)) {
    return s + Fp8FormatName(W.fp8_format) + (W.fp8_per_row ? " per-row" : " per-tensor");
  }
  return s + Int4SchemeName(W.int4.scheme) + " g" + std::to_string(W.int4.group_size);
}

// Every packed kind: 2 FP8 formats × per-row / per-tensor, 3 INT4 schemes × group 32 / 64 / 128.
std::vector<WeightMatrix> AllKinds(int rows, int cols, std::uint32_t seed, int misalign = 0) {
  std::vector<WeightMatrix> all;
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    for (bool per_row : {true, false})
      all.push_back(RandomFp8(f, rows, cols, per_row, seed + all.size(), false, misalign));
  }
  for (Int4Scheme scheme :
       {Int4Scheme::kSymmetric, Int4Scheme::kAsymmetric, Int4Scheme::kAsymmetricF16Zero}) {
    for (int g : {32, 64, 128})
      all.push_back(RandomInt4(Int4Params{scheme, g}, rows, cols, seed + all.size(), misalign));
  }
  return all;
}

std::vector<float> Definition(const WeightMatrix& W, const float* x) {
  std::vector<float> y(W.rows);
  kernels::scalar::PackedRowDots(W, 0, W.rows, x, y.data());
  return y;
}

// ---- the scalar definition ---------------------------------------------------------------------------

TEST(PackedRowDotsScalar, MatchesNaiveDoubleWithinTheDotProductBound) {
  const std::tuple<int, int> shapes[] = {{1, 1}, {1, 2}, {3, 7}, {17, 33}, {5, 129}, {3, 257}, {2, 4097}};
  for (const auto& [rows, cols] : shapes) {
    for (const WeightMatrix& W : AllKinds(rows, cols, 100u * rows + cols)) {
      const std::vector<float> x = RandomVector(cols, 7u * cols + 1);
      ExpectNearNaive(W, x.data(), Definition(W, x.data()).data(), Describe(W));
    }
  }
}

TEST(PackedRowDotsScalar, WritesOnlyTheRequestedRows) {
  for (const WeightMatrix& W : AllKinds(9, 40, 5)) {
    const std::vector<float> x = RandomVector(W.cols, 3);
    const std::vector<float> full = Definition(W, x.data());
    std::vector<float> y(W.rows, -1.0f);
    kernels::PackedRowDots(W, 2, 7, x.data(), y.data());
    for (int r = 0; r < W.rows; ++r) {
      if (r >= 2 && r < 7) {
        EXPECT_TRUE(SameBits(y[r], full[r])) << Describe(W) << " row " << r;
      } else {
        EXPECT_EQ(y[r], -1.0f) << Describe(W) << " row " << r << " is outside [2, 7)";
      }
    }
  }
}

TEST(PackedRowDotsScalar, Fp8ScaleMultipliesTheFinishedDot) {
  // Per-tensor and per-row scales of the same value must agree, and the scale is one rounded multiply of
  // the unscaled dot (scale 1).
  WeightMatrix W = RandomFp8(Fp8Format::kE4M3, 4, 37, true, 9);
  const std::vector<float> x = RandomVector(W.cols, 2);
  std::vector<float> ones(W.rows, 1.0f);
  WeightMatrix unscaled = W;
  unscaled.fp8_scales = ones.data();
  const std::vector<float> dot = Definition(unscaled, x.data());
  const std::vector<float> y = Definition(W, x.data());
  for (int r = 0; r < W.rows; ++r) {
    EXPECT_TRUE(SameBits(y[r], W.fp8_scales[r] * dot[r])) << r;
    WeightMatrix tensor = W;
    tensor.fp8_per_row = false;
    tensor.fp8_scales = W.fp8_scales + r;
    std::vector<float> one(W.rows);
    kernels::scalar::PackedRowDots(tensor, r, r + 1, x.data(), one.data());
    EXPECT_TRUE(SameBits(one[r], y[r])) << r;
  }
}

TEST(PackedRowDots, RejectsGgmlMatricesAndRowsOutsideTheMatrix) {
  const WeightMatrix f32 = WeightMatrix::FromF32(MatrixF32{2, 8, std::vector<float>(16, 1.0f)});
  const std::vector<float> x(8, 1.0f);
  std::vector<float> y(4);
  EXPECT_THROW(kernels::PackedRowDots(f32, 0, 2, x.data(), y.data()), Error);
  EXPECT_THROW(kernels::scalar::PackedRowDots(f32, 0, 2, x.data(), y.data()), Error);
  const WeightMatrix W = RandomFp8(Fp8Format::kE5M2, 2, 8, true, 1);
  EXPECT_THROW(kernels::PackedRowDots(W, 0, 3, x.data(), y.data()), Error);
  EXPECT_THROW(kernels::PackedRowDots(W, -1, 1, x.data(), y.data()), Error);
  EXPECT_THROW(kernels::PackedRowDots(W, 2, 1, x.data(), y.data()), Error);
  EXPECT_NO_THROW(kernels::PackedRowDots(W, 1, 1, x.data(), y.data()));  // an empty range is fine
}

// ---- vector variants against the definition ---------------------------------------------------------

class PackedRowDotsIsa : public testing::IsaTest<> {
 protected:
  // The variant under test on rows [begin, end), compared bit for bit with the definition.
  static void ExpectDefinition(const WeightMatrix& W, const float* x, int begin, int end,
                               const std::string& what) {
    const std::vector<float> expected = Definition(W, x);
    std::vector<float> y(W.rows, -7.0f);
    kernels::PackedRowDots(W, begin, end, x, y.data());
    for (int r = 0; r < W.rows; ++r) {
      if (r < begin || r >= end) {
        ASSERT_EQ(y[r], -7.0f) << what << " row " << r << " written outside [" << begin << ", " << end << ")";
      } else {
        ASSERT_TRUE(SameBits(y[r], expected[r])) << what << " row " << r;
      }
    }
  }
};

TEST_P(PackedRowDotsIsa, IsBitwiseTheDefinitionOnAwkwardShapes) {
  for (int cols : {1, 2, 7, 8, 9, 31, 33, 63, 65, 127, 129, 4097, 14336 + 7}) {
    for (int rows : {1, 3, 17}) {
      if (cols > 4097 && rows > 3) continue;  // the large row, on few rows: enough, and fast
      for (const WeightMatrix& W : AllKinds(rows, cols, 31u * cols + rows)) {
        const std::vector<float> x = RandomVector(cols, 3u * cols + rows);
        ExpectDefinition(W, x.data(), 0, rows, Describe(W));
        if (rows == 17) ExpectDefinition(W, x.data(), 3, 14, Describe(W) + " rows [3, 14)");
      }
    }
  }
}

TEST_P(PackedRowDotsIsa, IsBitwiseTheDefinitionOnMisalignedRows) {
  for (int misalign : {1, 3}) {
    for (int cols : {33, 130, 257}) {
      for (const WeightMatrix& W : AllKinds(6, cols, 77u * cols + misalign, misalign)) {
        // x misaligned too: a float vector starting one float into a buffer.
        const std::vector<float> buffer = RandomVector(cols + 1, 5u * cols);
        ExpectDefinition(W, buffer.data() + 1, 0, W.rows, Describe(W) + " misaligned");
      }
    }
  }
}

TEST_P(PackedRowDotsIsa, Fp8NanInfAndSubnormalCodesGiveTheDefinitionsResult) {
  for (Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    // Row 0: every one of the 256 codes (NaN and inf among them: the dot is NaN). Row 1: only zeros and
    // subnormals (exponent field 0), whose decoding is the easiest to get wrong. Row 2: every finite code.
    const int cols = 256 + 9;
    auto s = std::make_shared<Storage>();
    s->codes.resize(3 * cols);
    s->fp8_scales = {0.5f, 3.0f, 1.25f};
    std::mt19937 rng(format == Fp8Format::kE4M3 ? 1 : 2);
    const int m_bits = format == Fp8Format::kE4M3 ? 3 : 2;
    int finite = 0;
    for (int c = 0; c < cols; ++c) {
      s->codes[c] = static_cast<std::uint8_t>(c);
      s->codes[cols + c] = static_cast<std::uint8_t>((rng() & 0x80) | (rng() & ((1 << m_bits) - 1)));
      while (Fp8IsSpecial(static_cast<std::uint8_t>(finite), format)) ++finite;
      s->codes[2 * cols + c] = static_cast<std::uint8_t>(finite);
      finite = (finite + 1) % 256;
    }
    const WeightMatrix W =
        WeightMatrix::Fp8View(format, 3, cols, s->codes.data(), s->fp8_scales.data(), true, s);
    const std::vector<float> x = RandomVector(cols, 11);
    const std::vector<float> expected = Definition(W, x.data());
    EXPECT_TRUE(std::isnan(expected[0])) << "a row with NaN codes should give NaN";
    EXPECT_TRUE(std::isfinite(expected[1]) && std::isfinite(expected[2]));
    ExpectDefinition(W, x.data(), 0, 3, std::string(Fp8FormatName(format)) + " special codes");
    // An inf code (E5M2) against a zero x is NaN, against a nonzero x ±inf; and the DecodePackedRow of the
    // vector variant is the exact decoding.
    std::vector<float> decoded(cols);
    kernels::DecodePackedRow(W, 0, decoded.data());
    for (int c = 0; c < cols; ++c) {
      ASSERT_TRUE(SameBits(decoded[c], Fp8ToF32(s->codes[c], format))) << "code " << c;
    }
  }
}

TEST_P(PackedRowDotsIsa, IsBitwiseTheDefinitionForExtremeX) {
  // A vector kernel may rescale x by a power of two (exact unless it overflows): x elements near FLT_MAX,
  // at 2^120 where 2^8·x overflows, inf and NaN, subnormal, must all still give the definition's bits.
  const float specials[] = {
      0x1p120f,   -0x1p121f, 3.0e38f, __builtin_inff(), -__builtin_inff(), __builtin_nanf(""), 1e-40f,
      -0x1p-149f, 0.0f,      -0.0f};
  for (float special : specials) {
    for (int cols : {19, 40, 129}) {
      std::vector<float> x = RandomVector(cols, 3u * cols);
      x[cols / 2] = special;
      for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
        const WeightMatrix W = RandomFp8(f, 5, cols, true, 41u * cols);
        ExpectDefinition(W, x.data(), 0, W.rows, Describe(W) + " x special " + std::to_string(special));
      }
      for (const WeightMatrix& W : AllKinds(5, cols, 43u * cols)) {
        ExpectDefinition(W, x.data(), 0, W.rows, Describe(W) + " x special " + std::to_string(special));
      }
    }
  }
}

TEST_P(PackedRowDotsIsa, DecodePackedRowIsTheDefinitionsRow) {
  for (int cols : {1, 9, 65, 300}) {
    for (const WeightMatrix& W : AllKinds(3, cols, 13u * cols, 1)) {
      std::vector<float> got(cols), expected(cols);
      for (int r = 0; r < W.rows; ++r) {
        kernels::DecodePackedRow(W, r, got.data());
        if (W.Is(kernels::kFp8Format)) {
          for (int c = 0; c < cols; ++c) expected[c] = Fp8ToF32(W.Row(r)[c], W.fp8_format);
        } else {
          const int groups = Int4Groups(cols, W.int4.group_size);
          DequantizeInt4Row(
              W.int4, W.Row(r), W.int4_scales + r * groups,
              W.int4_zeros == nullptr ? nullptr : W.int4_zeros + r * Int4ZeroRowBytes(W.int4, cols), cols,
              expected.data());
        }
        for (int c = 0; c < cols; ++c)
          ASSERT_TRUE(SameBits(got[c], expected[c])) << Describe(W) << " " << r << "," << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, PackedRowDotsIsa, ::testing::ValuesIn(plumb::testing::kIsasOfThisBuild),
                         [](const auto& p) { return std::string(kernels::IsaName(p.param)); });

// ---- kernels::Gemv / Gemm / DequantizeRowOf ------------------------------------------------------------

class PackedKernels : public ::testing::Test {
 protected:
  void TearDown() override { kernels::SetNumThreads(0); }
};

TEST_F(PackedKernels, GemvIsBitwiseTheDefinitionForAnyThreadCount) {
  for (const auto& [rows, cols] : {std::tuple{1, 9}, std::tuple{37, 129}, std::tuple{64, 256}}) {
    for (const WeightMatrix& W : AllKinds(rows, cols, 3u * rows + cols)) {
      const std::vector<float> x = RandomVector(cols, 1u + cols);
      const std::vector<float> expected = Definition(W, x.data());
      for (int threads : {1, 2, 3}) {
        kernels::SetNumThreads(threads);
        std::vector<float> y(rows, -3.0f);
        kernels::Gemv(W, x.data(), y.data());
        for (int r = 0; r < rows; ++r)
          ASSERT_TRUE(SameBits(y[r], expected[r])) << Describe(W) << " threads " << threads << " row " << r;
      }
    }
  }
}

TEST_F(PackedKernels, GemmMatchesNaiveDoubleWithinTheDotProductBound) {
  // m = 1 runs as a GEMV, 2..64 through small_gemm (kernels/small_gemm/small_gemm.h), more through the
  // decoded tiles and sgemm (prefill).
  for (int m : {1, 3, 4, 9, 70}) {
    for (const WeightMatrix& W : AllKinds(130, 67, 17u * m)) {
      for (int threads : {1, 2}) {
        kernels::SetNumThreads(threads);
        const std::vector<float> X = RandomVector(static_cast<std::size_t>(m) * W.cols, 3u + m);
        std::vector<float> Y(static_cast<std::size_t>(m) * W.rows, -1.0f);
        kernels::Gemm(X.data(), m, W, Y.data());
        for (int i = 0; i < m; ++i) {
          ExpectNearNaive(W, X.data() + i * W.cols, Y.data() + i * W.rows,
                          Describe(W) + " m " + std::to_string(m) + " token " + std::to_string(i));
        }
      }
    }
  }
}

TEST_F(PackedKernels, DequantizeRowOfIsTheDecodedRowTimesTheScale) {
  for (const WeightMatrix& W : AllKinds(4, 45, 8)) {
    std::vector<float> row(W.cols), decoded(W.cols);
    for (int r = 0; r < W.rows; ++r) {
      kernels::DequantizeRowOf(W, r, row.data());
      kernels::DecodePackedRow(W, r, decoded.data());
      const float scale = W.Is(kernels::kFp8Format) ? W.fp8_scales[W.fp8_per_row ? r : 0] : 1.0f;
      const std::vector<double> naive = NaiveRow(W, r);
      for (int c = 0; c < W.cols; ++c) {
        const float expected = W.Is(kernels::kFp8Format) ? decoded[c] * scale : decoded[c];
        ASSERT_TRUE(SameBits(row[c], expected)) << Describe(W) << " " << r << "," << c;
        // And within the ≤ 2 roundings of the naive value.
        ASSERT_NEAR(row[c], naive[c], Gamma(2) * std::fabs(naive[c])) << Describe(W) << " " << r << "," << c;
      }
    }
  }
}

}  // namespace
}  // namespace plumb
