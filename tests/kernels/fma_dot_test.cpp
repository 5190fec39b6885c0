// The fast family's float kernels (kernels/weight_format.h's fma_row_dots; the order:
// src/kernels/simd/fma_dot.h): each format's scalar definition against this file's own reading of the stated
// order, and every ISA variant bitwise the definition on awkward shapes and special values (Gemv's choice of
// them: fma_family_test.cpp). Kernel layer only, so it also runs in the aarch64 kernels-only build.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/fp8.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/float_cases.h"
#include "support/isa_variants.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using kernels::Isa;
using testing::AwkwardX;
using testing::Cases;
using testing::RandomVector;
using testing::SameBits;

// Column counts around the 32 lanes and the 4-row blocks' edges: 1, a part of a step, exact steps, a step and
// a bit, and longer rows with tails.
constexpr int kCols[] = {1, 7, 31, 32, 33, 64, 95, 333, 1000};

// Row r of W decoded exactly, without FP8's scale: every weight's value as docs/formats.md defines it.
std::vector<float> DecodedRow(const WeightMatrix& W, int r) {
  std::vector<float> w(W.cols);
  if (W.Is(kernels::kFp8Format)) {
    for (int c = 0; c < W.cols; ++c) w[c] = Fp8ToF32(W.Row(r)[c], W.fp8_format);
  } else {
    DequantizeRow(W.type, W.Row(r), w.data(), W.cols);
  }
  return w;
}

// fma_dot.h's definition as read here, written apart from the kernels: pad to 32, one fused chain per lane,
// then halve the lanes five times.
float StatedFmaDot(const std::vector<float>& w, const float* x) {
  const std::size_t n = w.size();
  const std::size_t padded = (n + 31) / 32 * 32;
  std::vector<float> lane(32, 0.0f);
  for (std::size_t i = 0; i < padded; ++i) {
    const float wi = i < n ? w[i] : 0.0f;
    const float xi = i < n ? x[i] : 0.0f;
    lane[i % 32] = std::fma(wi, xi, lane[i % 32]);
  }
  for (std::size_t half = 16; half >= 1; half /= 2) {
    for (std::size_t j = 0; j < half; ++j) lane[j] += lane[j + half];
  }
  return lane[0];
}

float StatedRow(const WeightMatrix& W, int r, const float* x) {
  const float dot = StatedFmaDot(DecodedRow(W, r), x);
  if (!W.Is(kernels::kFp8Format)) return dot;
  return W.fp8_scales[W.fp8_per_row ? r : 0] * dot;
}

TEST(FmaDefinition, EachFormatsScalarKernelIsTheStatedOrder) {
  for (int cols : kCols) {
    for (const testing::FloatCase& c : Cases(5, cols, 100 + cols)) {
      for (const std::vector<float>& x :
           {RandomVector(cols, 7 + cols), AwkwardX(cols, 9 + cols), testing::HugeX(cols, 11 + cols)}) {
        std::vector<float> y(c.W.rows);
        c.W.format->kernels[static_cast<int>(Isa::kScalar)].fma_row_dots(c.W, 0, c.W.rows, x.data(),
                                                                         y.data());
        for (int r = 0; r < c.W.rows; ++r) {
          ASSERT_TRUE(SameBits(y[r], StatedRow(c.W, r, x.data())))
              << c.name << ", cols " << cols << ", row " << r;
        }
      }
    }
  }
}

// The order is not the exact family's: on rows where rounding differs, the two disagree in some bit, so a
// kernel that ran the exact family's code would fail the test above. (A check that this file's reading is not
// accidentally the exact one.)
TEST(FmaDefinition, DiffersFromTheExactFamilyOnLongRows) {
  const WeightMatrix W = testing::RandomGgml(GgmlType::F32, 64, 1000, 5);
  const std::vector<float> x = RandomVector(1000, 6);
  std::vector<float> fma(W.rows), exact(W.rows);
  kernels::FmaRowDotsOf(W, 0, W.rows, x.data(), fma.data());
  kernels::RowDotsOf(W, 0, W.rows, x.data(), exact.data());
  int differ = 0;
  for (int r = 0; r < W.rows; ++r) differ += !SameBits(fma[r], exact[r]);
  EXPECT_GT(differ, 0);
}

TEST(FmaDefinition, FormatsWithoutFmaKernelsAreRefusedByName) {
  const WeightMatrix W = testing::RandomGgml(GgmlType::Q4_1, 2, 64, 1);
  std::vector<float> x(64, 1.0f), y(2);
  EXPECT_FALSE(W.format->has_fma(W));
  try {
    kernels::FmaRowDotsOf(W, 0, 2, x.data(), y.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q4_1"), std::string::npos) << e.what();
  }
  const WeightMatrix F = testing::RandomGgml(GgmlType::F16, 2, 64, 1);
  EXPECT_THROW(kernels::FmaRowDotsOf(F, 1, 3, x.data(), y.data()), Error);  // rows past the matrix
}

TEST(FmaDefinition, CoverageNamesEveryFloatFormat) {
  const std::string covers = kernels::FmaCoverage();
  for (const char* name : {"F32", "F16", "BF16", "E4M3", "E5M2"}) {
    EXPECT_NE(covers.find(name), std::string::npos) << covers;
  }
}

// KernelsFor hands out each ISA's own FMA kernel, or the nearest one below it (AVX-512 → AVX2 → scalar),
// never the scalar definition where a vector variant is registered: a test of bits alone cannot tell (the
// definition computes the same bits), but a laptop would run 20 times slower.
TEST(FmaDefinition, KernelsForPicksTheNearestRegisteredVariant) {
  for (const kernels::WeightFormat* format : kernels::WeightFormats()) {
    if (format->has_fma == nullptr) continue;
    for (Isa isa : testing::kIsasOfThisBuild) {
      kernels::RowDotsFn want = nullptr;
      for (Isa at = isa; want == nullptr; at = at == Isa::kAvx512 ? Isa::kAvx2 : Isa::kScalar) {
        want = format->kernels[static_cast<int>(at)].fma_row_dots;
        if (at == Isa::kScalar) break;
      }
      EXPECT_EQ(kernels::KernelsFor(*format, isa).fma_row_dots, want)
          << format->name << " on " << kernels::IsaName(isa);
    }
  }
}

using FmaRowDotsIsa = testing::IsaTest<>;

// Rows [begin, rows) for begin = 0 and 1 (11 rows: two 4-row blocks and singles, or one block from row 1),
// rows before begin untouched, every other row bitwise the definition.
TEST_P(FmaRowDotsIsa, BitwiseTheDefinitionOnAwkwardShapes) {
  constexpr float kUntouched = -7.0f;
  for (int cols : kCols) {
    for (const testing::FloatCase& c : Cases(11, cols, 300 + cols)) {
      const kernels::RowDotsFn variant = kernels::KernelsFor(*c.W.format, isa()).fma_row_dots;
      const kernels::RowDotsFn definition = c.W.format->kernels[static_cast<int>(Isa::kScalar)].fma_row_dots;
      ASSERT_NE(variant, nullptr);
      for (const std::vector<float>& x :
           {RandomVector(cols, 17 + cols), AwkwardX(cols, 19 + cols), testing::HugeX(cols, 21 + cols)}) {
        std::vector<float> want(c.W.rows);
        definition(c.W, 0, c.W.rows, x.data(), want.data());
        for (int begin : {0, 1}) {
          std::vector<float> got(c.W.rows, kUntouched);
          variant(c.W, begin, c.W.rows, x.data(), got.data());
          for (int r = 0; r < c.W.rows; ++r) {
            const std::string where = c.name + ", cols " + std::to_string(cols) + ", row " +
                                      std::to_string(r) + " from " + std::to_string(begin);
            ASSERT_TRUE(SameBits(got[r], r < begin ? kUntouched : want[r])) << where;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, FmaRowDotsIsa, ::testing::ValuesIn(plumb::testing::kIsasOfThisBuild),
                         [](const auto& p) { return std::string(kernels::IsaName(p.param)); });

}  // namespace
}  // namespace plumb
