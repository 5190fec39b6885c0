// The fast kernel family (kernels/int8_activations.h; its quantizer: quantize_activations_test.cpp): the GGUF
// int8 row dots' scalar definition against double-precision dots (of the quantized
// activations: only float rounding apart; of the original x: apart by the stated quantization error), every
// ISA variant bitwise the definition on awkward shapes, and Gemv's choice of family.
#include "plumb/kernels/int8_activations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/int8_rows.h"
#include "support/isa_variants.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using kernels::Int8Activations;
using kernels::Isa;
using kernels::KernelFamily;
using testing::FamilyGuard;
using testing::RandomVector;
using testing::SameBits;

constexpr GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                               GgmlType::Q5_K, GgmlType::Q6_K};

bool IsKQuant(GgmlType type) {
  return GgmlTraits(type).block_elements == 256;
}

// Row lengths for a type: whole blocks, several x blocks per weight block where there are sub-blocks.
std::vector<int> ColsFor(GgmlType type, std::vector<int> small) {
  if (IsKQuant(type)) return {256, 768, 1280};
  return small;
}

TEST(KernelFamily, ParsesExactlyTheTwoNames) {
  EXPECT_EQ(kernels::ParseFamily("exact"), KernelFamily::kExact);
  EXPECT_EQ(kernels::ParseFamily("fast"), KernelFamily::kFast);
  EXPECT_EQ(kernels::ParseFamily("Fast"), std::nullopt);
  EXPECT_EQ(kernels::ParseFamily(""), std::nullopt);
  EXPECT_STREQ(kernels::FamilyName(KernelFamily::kFast), "fast");
}

// Σ w_i·x_i in double, w the dequantized row and x the given values.
double NaiveRowDot(const WeightMatrix& W, int r, const std::vector<double>& x, double* abs_sum) {
  std::vector<float> w(W.cols);
  DequantizeRow(W.type, W.Row(r), w.data(), W.cols);
  double dot = 0, abs = 0;
  for (int c = 0; c < W.cols; ++c) {
    dot += static_cast<double>(w[c]) * x[c];
    abs += std::fabs(static_cast<double>(w[c]) * x[c]);
  }
  *abs_sum = abs;
  return dot;
}

// The bytes of a block that hold its codes, for the types with a minimum (value = scale part + m): a copy
// of the row with them zeroed dequantizes to m alone (exactly: 0·d + m, 0·d1 − dmin·min).
std::pair<int, int> CodeBytes(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_1:
      return {4, 20};
    case GgmlType::Q5_1:
      return {4, 24};
    case GgmlType::Q2_K:
      return {16, 80};
    case GgmlType::Q4_K:
      return {16, 144};
    case GgmlType::Q5_K:
      return {16, 176};
    default:
      return {0, 0};  // no minimum
  }
}

// Each element's minimum term m (0 for a type without one).
std::vector<float> MinPart(const WeightMatrix& W, int r) {
  std::vector<float> m(W.cols, 0.0f);
  const auto [first, end] = CodeBytes(W.type);
  if (first == end) return m;
  const int block_bytes = GgmlTraits(W.type).block_bytes;
  std::vector<std::uint8_t> row(W.Row(r), W.Row(r) + W.row_bytes);
  for (std::size_t b = 0; b < row.size(); b += block_bytes)
    std::fill(row.begin() + b + first, row.begin() + b + end, std::uint8_t{0});
  DequantizeRow(W.type, row.data(), m.data(), W.cols);
  return m;
}

TEST(Int8RowDotsScalar, IsTheDotWithTheQuantizedActivationsWithinFloatRounding) {
  for (GgmlType type : kTypes) {
    for (int cols : ColsFor(type, {32, 96, 576})) {
      const WeightMatrix W = testing::RandomGgml(type, 9, cols, 3u * cols + static_cast<unsigned>(type));
      const std::vector<float> x = RandomVector(cols, 11u * cols);
      Int8Activations q;
      kernels::QuantizeActivations(x.data(), cols, q);
      std::vector<double> xq(cols), xd(x.begin(), x.end());
      for (int c = 0; c < cols; ++c) xq[c] = static_cast<double>(q.q[c]) * q.d[c / 32];
      std::vector<float> y(W.rows);
      W.format->kernels[static_cast<int>(Isa::kScalar)].int8_row_dots(W, 0, W.rows, q, y.data());
      for (int r = 0; r < W.rows; ++r) {
        double abs_q = 0, abs_x = 0;
        const double with_q = NaiveRowDot(W, r, xq, &abs_q);
        // Float steps: f = d_w·d_x (K-quants: (d·c)·d_x, the first product exact), one FMA per block and
        // lane, the 8-lane tree, the minimum's chain (m·s per block; K-quants: one per super-block and
        // lane, s_x or (dmin·min)·d_x rounded once), its tree and the final add; and the weights' own
        // rounding (scale part + m) that the naive row has: γ_{blocks + 6} covers it. The definition
        // rounds the scale part and the minimum's separately, so the bound is relative to Σ(|w| + 2|m|)·|x|
        // (the scale part is within |w| + |m| of 0), not Σ|w·x|, which cancellation can make far smaller.
        const int steps = cols / 32 + 6;
        const std::vector<float> m = MinPart(W, r);
        for (int c = 0; c < cols; ++c) abs_q += 2.0 * std::fabs(static_cast<double>(m[c]) * xq[c]);
        EXPECT_NEAR(y[r], with_q, testing::Gamma(steps) * (abs_q + 1e-30) * 2)
            << GgmlTypeName(type) << " " << cols << " row " << r;
        // Against the original x: each q·d is within d/2 of x, so the dot is within Σ_b d_b/2 · Σ|w| of it.
        const double with_x = NaiveRowDot(W, r, xd, &abs_x);
        std::vector<float> w(cols);
        DequantizeRow(type, W.Row(r), w.data(), cols);
        double bound = testing::Gamma(steps) * abs_q * 2;
        for (int c = 0; c < cols; ++c) bound += 0.5 * q.d[c / 32] * std::fabs(w[c]) * 1.0001;
        EXPECT_NEAR(y[r], with_x, bound) << GgmlTypeName(type) << " " << cols << " row " << r;
      }
    }
  }
}

TEST(Int8RowDots, ErrorsNameTheMatrix) {
  const WeightMatrix fp8 = testing::RandomFp8(Fp8Format::kE4M3, 2, 32, true, 1);
  const WeightMatrix q4 = testing::RandomGgml(GgmlType::Q4_0, 2, 64, 1);
  std::vector<float> x(64, 1.0f), y(2);
  Int8Activations q;
  kernels::QuantizeActivations(x.data(), 32, q);
  EXPECT_THROW(kernels::Int8RowDotsOf(fp8, 0, 2, q, y.data()), Error);  // no fast kernels for FP8 yet
  EXPECT_THROW(kernels::Int8RowDotsOf(q4, 0, 2, q, y.data()), Error);   // x has 32 elements, W 64 columns
  kernels::QuantizeActivations(x.data(), 64, q);
  EXPECT_THROW(kernels::Int8RowDotsOf(q4, 0, 3, q, y.data()), Error);
  EXPECT_NO_THROW(kernels::Int8RowDotsOf(q4, 0, 2, q, y.data()));
  const WeightMatrix q4k = testing::RandomGgml(GgmlType::Q4_K, 2, 256, 1);
  std::vector<float> x256(256, 1.0f);
  kernels::QuantizeActivations(x256.data(), 256, q);
  EXPECT_NO_THROW(kernels::Int8RowDotsOf(q4k, 0, 2, q, y.data()));
}

using Int8RowDotsIsa = testing::IsaTest<>;

TEST_P(Int8RowDotsIsa, IsBitwiseTheDefinitionOnAwkwardShapes) {
  const kernels::Int8RowDotsFn variant = kernels::KernelsFor(kernels::kGgmlFormat, GetParam()).int8_row_dots;
  const kernels::Int8RowDotsFn definition =
      kernels::kGgmlFormat.kernels[static_cast<int>(Isa::kScalar)].int8_row_dots;
  ASSERT_NE(variant, nullptr);
  for (GgmlType type : kTypes) {
    for (int rows : {1, 5, 11}) {
      for (int cols : ColsFor(type, {32, 96, 608})) {
        for (bool extremes : {false, true}) {
          const WeightMatrix W = testing::RandomGgml(type, rows, cols, 7u * cols + rows);
          // x with exact extremes (±127 codes) and a zero block; or every code ±127 (the largest int16 pairs
          // of maddubs).
          std::vector<float> x = RandomVector(cols, 5u * cols + rows, 4.0f);
          x[0] = 8.0f;
          x[1] = -8.0f;
          if (extremes) {
            for (int c = 0; c < cols; ++c) x[c] = (c % 3 == 0) ? -0.5f : 0.5f;
          }
          if (cols >= 96) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
          Int8Activations q;
          kernels::QuantizeActivations(x.data(), cols, q);
          ASSERT_TRUE(testing::RowsAreTheDefinitions(variant, definition, W, q,
                                                     std::string(GgmlTypeName(type)) + " " +
                                                         std::to_string(rows) + "x" + std::to_string(cols) +
                                                         (extremes ? " (±127 codes)" : "")));
        }
      }
    }
  }
}

TEST_P(Int8RowDotsIsa, GemvRunsTheFastFamilyOnlyWhenAskedAndAtAnyThreadCount) {
  testing::ExpectGemvFollowsTheFamily(testing::RandomGgml(GgmlType::Q4_1, 37, 96, 3), RandomVector(96, 9));
  // A float format runs the FMA kernels in the fast family, not the int8 ones (fma_family_test.cpp has the
  // rest of their choice).
  const WeightMatrix fp8 = testing::RandomFp8(Fp8Format::kE4M3, 5, 40, true, 2);
  const std::vector<float> x40 = RandomVector(40, 4);
  std::vector<float> a(5), b(5);
  kernels::FmaRowDotsOf(fp8, 0, 5, x40.data(), a.data());
  FamilyGuard guard(KernelFamily::kFast);
  EXPECT_FALSE(kernels::UsesInt8RowDots(fp8));
  kernels::Gemv(fp8, x40.data(), b.data());
  for (int r = 0; r < 5; ++r) EXPECT_TRUE(SameBits(a[r], b[r])) << r;
}

// GemvShared (Q, K, V in one region) gives each matrix bitwise its own Gemv, in both families and at any
// thread count, for a mix of formats: rows with int8 kernels (GGUF, INT4), plain F32 rows and FP8 (which
// the fast family runs with FMA), of sizes that split unevenly across threads.
TEST_P(Int8RowDotsIsa, GemvSharedIsEachMatrixsOwnGemv) {
  constexpr int k = 96;
  const std::vector<WeightMatrix> ws = {
      testing::RandomGgml(GgmlType::Q4_1, 37, k, 1), testing::RandomGgml(GgmlType::Q8_0, 5, k, 2),
      testing::RandomGgml(GgmlType::F32, 3, k, 3), testing::RandomFp8(Fp8Format::kE4M3, 11, k, true, 4),
      testing::RandomInt4({Int4Scheme::kAsymmetric, 32}, 7, k, 5)};
  const std::vector<float> x = RandomVector(k, 6);
  const int threads = kernels::NumThreads();
  for (KernelFamily family : {KernelFamily::kExact, KernelFamily::kFast}) {
    FamilyGuard guard(family);
    for (int t : {1, 2, 3}) {
      kernels::SetNumThreads(t);
      std::vector<std::vector<float>> alone(ws.size()), shared(ws.size());
      std::vector<kernels::GemvOutput> outputs;
      for (std::size_t i = 0; i < ws.size(); ++i) {
        alone[i].resize(ws[i].rows);
        shared[i].assign(ws[i].rows, -1.0f);
        kernels::Gemv(ws[i], x.data(), alone[i].data());
        outputs.push_back({&ws[i], shared[i].data()});
      }
      kernels::GemvShared(outputs, x.data());
      for (std::size_t i = 0; i < ws.size(); ++i)
        for (int r = 0; r < ws[i].rows; ++r)
          ASSERT_TRUE(SameBits(shared[i][r], alone[i][r]))
              << kernels::FamilyName(family) << ", threads " << t << ", matrix " << i << " row " << r;
    }
  }
  kernels::SetNumThreads(threads);
  const WeightMatrix narrow = testing::RandomGgml(GgmlType::Q8_0, 2, 64, 7);
  std::vector<float> y(64);
  const std::vector<kernels::GemvOutput> mismatched = {{&ws[0], y.data()}, {&narrow, y.data()}};
  try {
    kernels::GemvShared(mismatched, x.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a matrix of 64 columns beside one of 96"), std::string::npos)
        << e.what();
  }
  // x quantized by the caller for another length than the matrices' columns (the fast family only reads it).
  FamilyGuard guard(KernelFamily::kFast);
  Int8Activations short_x;
  kernels::QuantizeActivations(x.data(), 64, short_x);
  const std::vector<kernels::GemvOutput> one = {{&ws[0], y.data()}};
  try {
    kernels::GemvShared(one, x.data(), short_x);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x quantized with 64 elements for a matrix of 96 columns"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, Int8RowDotsIsa, ::testing::ValuesIn(plumb::testing::kIsasOfThisBuild),
                         [](const auto& p) { return std::string(kernels::IsaName(p.param)); });

}  // namespace
}  // namespace plumb
