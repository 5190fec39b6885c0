// The NEON variant of the fast family's GGUF row dots (src/kernels/ggml/ggml_int8_neon.cpp) bitwise against
// its scalar definition (kGgmlFormat's kScalar int8_row_dots), on both of its paths: sdot where the CPU has
// dotprod (skipped, and said so, where it has not) and plain NEON, which runs on every CPU. Awkward shapes:
// 1, 5 and 11 rows (the four-row path, the single-row path and both), 1, 3 and 19 blocks (the K-quants: 1
// and 3 super-blocks), ranges starting at row 0 and 1; x with exact ±127 codes, a block of all −127 and a
// zero block; a row whose first block holds the type's largest codes (so the integer sums reach their
// extremes); and a block of x that is not finite. Its int8_gemm on both paths, bitwise the definition per x
// row. The x86 variants are int8_dot_test.cpp's and int8_gemm_test.cpp's. Built only for aarch64
// (cmake/kernels-only.cmake) and run under qemu-user in CI.
#if !defined(__aarch64__)
#error "int8_neon_test.cpp tests the aarch64 NEON kernels; the build must not compile it for another target"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../../src/kernels/ggml/ggml_kernel_table.h"
#include "../../src/kernels/ggml/ggml_kernels.h"
#include "../../src/kernels/int8_activations/int8_sums_neon.h"
#include "plumb/formats/ggml_types.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/int8_rows.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using kernels::Int8Activations;
using kernels::Isa;

constexpr GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                               GgmlType::Q5_K, GgmlType::Q6_K};

bool IsKQuant(GgmlType type) {
  return kernels::ggml::KLayoutOf(type).block_bytes != 0;
}

// A random matrix whose last row's first block has every code at the type's largest magnitude (Q4_0 −8,
// Q4_1 15, Q5_0 −16, Q5_1 31, Q8_0 −128), its scales left as drawn. A K-quant matrix stays random (its
// codes' bits are spread over the super-block).
WeightMatrix WithExtremeBlock(GgmlType type, int rows, int cols, std::uint32_t seed) {
  const WeightMatrix random = testing::RandomGgml(type, rows, cols, seed);
  if (IsKQuant(type)) return random;
  std::vector<std::uint8_t> bytes(random.data,
                                  random.data + random.row_bytes * static_cast<std::size_t>(rows));
  std::uint8_t* block = bytes.data() + random.row_bytes * static_cast<std::size_t>(rows - 1);
  const kernels::ggml::Int8Layout layout = kernels::ggml::Int8LayoutOf(type);
  if (type == GgmlType::Q8_0) {
    std::memset(block + 2, 0x80, 32);
  } else {
    const std::uint8_t code_bits = layout.is_unsigned ? 0xFF : 0x00;
    std::memset(block + layout.qs, code_bits, 16);
    if (layout.five_bits) std::memset(block + layout.qs - 4, code_bits, 4);
  }
  return WeightMatrix::FromBytes(type, rows, cols, std::move(bytes));
}

// x of `cols` elements whose codes include exact ±127, then (with 3 or more blocks) a zero block and a last
// block of all −127; with `non_finite`, an inf in the last block too (d and s NaN, so the dots are NaN).
std::vector<float> AwkwardX(int cols, std::uint32_t seed, bool non_finite) {
  std::vector<float> x = testing::RandomVector(cols, seed, 4.0f);
  x[0] = 8.0f;
  x[1] = -8.0f;
  if (cols >= 96) {
    std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
    std::fill(x.end() - 32, x.end(), -3.0f);
  }
  if (non_finite) x[cols - 5] = std::numeric_limits<float>::infinity();
  return x;
}

using PathFn = void (*)(const WeightMatrix&, int, int, const Int8Activations&, float*);

// The path against the definition on every type and shape; returns the number of cases compared.
int ExpectBitwiseTheDefinition(PathFn path, const char* name) {
  const kernels::Int8RowDotsFn definition =
      kernels::kGgmlFormat.kernels[static_cast<int>(Isa::kScalar)].int8_row_dots;
  int cases = 0;
  for (GgmlType type : kTypes) {
    for (int rows : {1, 5, 11}) {
      for (int cols : IsKQuant(type) ? std::vector<int>{256, 768} : std::vector<int>{32, 96, 608}) {
        for (bool non_finite : {false, true}) {
          const WeightMatrix W = WithExtremeBlock(type, rows, cols, 7u * cols + rows);
          Int8Activations q;
          const std::vector<float> x = AwkwardX(cols, 5u * cols + rows, non_finite);
          kernels::QuantizeActivations(x.data(), cols, q);
          ++cases;
          EXPECT_TRUE(testing::RowsAreTheDefinitions(
              path, definition, W, q,
              std::string(name) + " " + std::string(GgmlTypeName(type)) + " " + std::to_string(rows) + "x" +
                  std::to_string(cols) + (non_finite ? " (non-finite x)" : "")));
        }
      }
    }
  }
  return cases;
}

TEST(Int8RowDotsNeon, SdotIsBitwiseTheDefinition) {
  if (!kernels::int8_sums::HasDotprod()) GTEST_SKIP() << "this CPU has no dotprod: the sdot path cannot run";
  const int cases = ExpectBitwiseTheDefinition(
      [](const WeightMatrix& W, int begin, int end, const Int8Activations& x, float* y) {
        kernels::ggml::neon::Int8RowDotsPath(true, W, begin, end, x, y);
      },
      "sdot");
  RecordProperty("cases", cases);
}

TEST(Int8RowDotsNeon, PlainNeonIsBitwiseTheDefinition) {
  const int cases = ExpectBitwiseTheDefinition(
      [](const WeightMatrix& W, int begin, int end, const Int8Activations& x, float* y) {
        kernels::ggml::neon::Int8RowDotsPath(false, W, begin, end, x, y);
      },
      "plain");
  RecordProperty("cases", cases);
}

// What the format registers for NEON (and KernelsFor hands out) is the variant that picks its path itself.
TEST(Int8RowDotsNeon, IsRegisteredAndPicksItsPath) {
  EXPECT_EQ(kernels::kGgmlFormat.kernels[static_cast<int>(Isa::kNeon)].int8_row_dots,
            &kernels::ggml::neon::Int8RowDots);
  EXPECT_EQ(kernels::KernelsFor(kernels::kGgmlFormat, Isa::kNeon).int8_row_dots,
            &kernels::ggml::neon::Int8RowDots);
  RecordProperty("dotprod", kernels::int8_sums::HasDotprod() ? "yes" : "no");
  ExpectBitwiseTheDefinition(kernels::ggml::neon::Int8RowDots, "dispatched");
}

using GemmPathFn = void (*)(const WeightMatrix&, int, int, const Int8Activations*, int, float*, std::size_t);

// The int8_gemm path against the definition (the scalar int8_row_dots of each x row) on every type, for
// 1, 3, 5 and 17 x rows (the four-row blocks and every remainder) over rows [1, 10) of 11 (both weight-row
// paths, an odd start), with the awkward x of AwkwardX and the extreme block; rows outside untouched.
int ExpectGemmBitwiseTheDefinition(GemmPathFn path, const char* name) {
  const kernels::Int8RowDotsFn definition =
      kernels::kGgmlFormat.kernels[static_cast<int>(Isa::kScalar)].int8_row_dots;
  constexpr int kRows = 11, kBegin = 1, kEnd = 10;
  constexpr float kUntouched = -7.0f;
  int cases = 0;
  for (GgmlType type : kTypes) {
    for (int cols : IsKQuant(type) ? std::vector<int>{256, 768} : std::vector<int>{32, 608}) {
      const WeightMatrix W = WithExtremeBlock(type, kRows, cols, 3u * cols);
      for (int m : {1, 3, 5, 17}) {
        std::vector<Int8Activations> xs(m);
        for (int i = 0; i < m; ++i) {
          const std::vector<float> x = AwkwardX(cols, 5u * cols + i, i == 2);
          kernels::QuantizeActivations(x.data(), cols, xs[i]);
          kernels::AddGroupSums(xs[i]);  // for the panels' 16- and 4-element terms
        }
        std::vector<float> Y(static_cast<std::size_t>(m) * kRows, kUntouched), y(kRows);
        path(W, kBegin, kEnd, xs.data(), m, Y.data(), kRows);
        ++cases;
        for (int i = 0; i < m; ++i) {
          definition(W, 0, kRows, xs[i], y.data());
          for (int r = 0; r < kRows; ++r) {
            const float want = r >= kBegin && r < kEnd ? y[r] : kUntouched;
            const ::testing::AssertionResult same =
                testing::SameBits(Y[static_cast<std::size_t>(i) * kRows + r], want);
            if (!same) {
              ADD_FAILURE() << name << " " << GgmlTypeName(type) << " cols " << cols << " m " << m
                            << ": x row " << i << " row " << r << ": " << same.message();
              return cases;
            }
          }
        }
      }
    }
  }
  return cases;
}

TEST(Int8GemmNeon, SdotIsBitwiseTheDefinitionPerXRow) {
  if (!kernels::int8_sums::HasDotprod()) GTEST_SKIP() << "this CPU has no dotprod: the sdot path cannot run";
  RecordProperty("cases", ExpectGemmBitwiseTheDefinition(
                              [](const WeightMatrix& W, int begin, int end, const Int8Activations* xs, int m,
                                 float* Y, std::size_t ldy) {
                                kernels::ggml::neon::Int8GemmPath(true, W, begin, end, xs, m, Y, ldy);
                              },
                              "sdot"));
}

TEST(Int8GemmNeon, PlainNeonIsBitwiseTheDefinitionPerXRow) {
  RecordProperty("cases", ExpectGemmBitwiseTheDefinition(
                              [](const WeightMatrix& W, int begin, int end, const Int8Activations* xs, int m,
                                 float* Y, std::size_t ldy) {
                                kernels::ggml::neon::Int8GemmPath(false, W, begin, end, xs, m, Y, ldy);
                              },
                              "plain"));
}

// The int8 panels (src/kernels/ggml/int8_panel_neon.cpp) on both paths, with the same contract.
TEST(Int8PanelsNeon, SdotIsBitwiseTheDefinitionPerXRow) {
  if (!kernels::int8_sums::HasDotprod()) GTEST_SKIP() << "this CPU has no dotprod: the sdot path cannot run";
  ExpectGemmBitwiseTheDefinition(
      [](const WeightMatrix& W, int begin, int end, const Int8Activations* xs, int m, float* Y,
         std::size_t ldy) {
        kernels::ggml::neon::Int8PanelGemmPath(true, W.type)(W, begin, end, xs, m, Y, ldy);
      },
      "sdot panels");
}

TEST(Int8PanelsNeon, PlainNeonIsBitwiseTheDefinitionPerXRow) {
  ExpectGemmBitwiseTheDefinition(
      [](const WeightMatrix& W, int begin, int end, const Int8Activations* xs, int m, float* Y,
         std::size_t ldy) {
        kernels::ggml::neon::Int8PanelGemmPath(false, W.type)(W, begin, end, xs, m, Y, ldy);
      },
      "plain panels");
}

TEST(Int8GemmNeon, IsRegisteredAndPicksItsPath) {
  EXPECT_EQ(kernels::KernelsFor(kernels::kGgmlFormat, Isa::kNeon).int8_gemm, &kernels::ggml::neon::Int8Gemm);
  ExpectGemmBitwiseTheDefinition(kernels::ggml::neon::Int8Gemm, "dispatched");
}

}  // namespace
}  // namespace plumb
