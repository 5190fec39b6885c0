// The fast family's int8_gemm (kernels/weight_format.h): for every format, ISA variant, weight-row range and
// number of x rows, Y[i] bitwise the scalar int8_row_dots of x row i over the same rows, which is its whole
// definition; KernelsFor's choice of it; Int8GemmOf's fallback and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../../src/kernels/ggml/int8_panel.h"
#include "../../src/kernels/ggml/int8_panel_avx512.h"
#include "plumb/core/error.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/isa.h"
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
using testing::RandomVector;
using testing::SameBits;

struct Sample {
  std::string name;
  WeightMatrix W;
};

// Every matrix kind with int8 kernels, 13 rows (a partial register block and tile), columns of 1, 3 and 19
// blocks where the format allows any whole number of 32-element blocks, 1 and 3 super-blocks for the
// K-quants.
std::vector<Sample> Samples() {
  std::vector<Sample> samples;
  constexpr int kRows = 13;
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                        GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const bool k_quant = GgmlTraits(type).block_elements == 256;
    for (int cols : k_quant ? std::vector<int>{256, 768} : std::vector<int>{32, 96, 608}) {
      samples.push_back({std::string(GgmlTypeName(type)) + " " + std::to_string(cols),
                         testing::RandomGgml(type, kRows, cols, 5u * cols + static_cast<unsigned>(type))});
    }
  }
  for (Int4Scheme scheme :
       {Int4Scheme::kSymmetric, Int4Scheme::kAsymmetric, Int4Scheme::kAsymmetricF16Zero}) {
    for (int G : {32, 128}) {
      for (int cols : {96, 416}) {
        const WeightMatrix W = testing::RandomInt4({scheme, G}, kRows, cols, 7u * cols + G, 1);
        samples.push_back({W.format->describe(W) + " " + std::to_string(cols), W});
      }
    }
  }
  return samples;
}

// m quantized x rows of W.cols: random, with ±8 extremes (±127 codes) and a zero block; row 1 every code
// ±127 (maddubs's largest int16 pairs); row 2 an infinity in its last block (NaN factors, NaN dots).
std::vector<Int8Activations> XRows(int cols, int m, unsigned seed) {
  std::vector<Int8Activations> xs(m);
  for (int i = 0; i < m; ++i) {
    std::vector<float> x = RandomVector(cols, seed + 17u * i, 4.0f);
    x[0] = 8.0f;
    x[cols - 1] = -8.0f;
    if (i == 1) {
      for (int c = 0; c < cols; ++c) x[c] = (c % 3 == 0) ? -0.5f : 0.5f;
    }
    if (i == 2) x[cols - 2] = std::numeric_limits<float>::infinity();
    if (cols >= 96 && i % 2 == 0) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
    kernels::QuantizeActivations(x.data(), cols, xs[i]);
    kernels::AddGroupSums(xs[i]);
  }
  return xs;
}

// `gemm` over rows [begin, end) and xs, into Y with a row stride wider than W: every element in the range
// bitwise the scalar int8_row_dots of its x row, every other one untouched.
::testing::AssertionResult IsTheDefinition(kernels::Int8GemmFn gemm, const WeightMatrix& W, int begin,
                                           int end, const std::vector<Int8Activations>& xs,
                                           const std::string& what) {
  constexpr float kUntouched = -7.0f;
  const int m = static_cast<int>(xs.size());
  const std::size_t ldy = static_cast<std::size_t>(W.rows) + 3;
  const kernels::Int8RowDotsFn definition = W.format->kernels[static_cast<int>(Isa::kScalar)].int8_row_dots;
  std::vector<float> Y(m * ldy, kUntouched);
  if (gemm != nullptr) {
    gemm(W, begin, end, xs.data(), m, Y.data(), ldy);
  } else {
    kernels::Int8GemmOf(W, begin, end, xs.data(), m, Y.data(), ldy);
  }
  std::vector<float> y(W.rows);
  for (int i = 0; i < m; ++i) {
    definition(W, 0, W.rows, xs[i], y.data());
    for (std::size_t r = 0; r < ldy; ++r) {
      const float got = Y[i * ldy + r];
      const std::string where = what + ", rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                                "), m " + std::to_string(m) + ": x row " + std::to_string(i) + " row " +
                                std::to_string(r);
      const bool inside = static_cast<int>(r) >= begin && static_cast<int>(r) < end;
      if (!inside && !SameBits(got, kUntouched)) {
        return ::testing::AssertionFailure() << where << ": written, but outside the range";
      }
      if (inside && !SameBits(got, y[r])) {
        return ::testing::AssertionFailure() << where << ": " << got << ", the definition " << y[r];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

using Int8GemmIsa = testing::IsaTest<>;

// Each format's int8_gemm as KernelsFor picks it for the variant (where it has none, Int8GemmOf's loop over
// the variant's int8_row_dots), on awkward shapes: every range from an odd row to an odd end, the whole
// matrix, one row; m from 1 to past several 4-row blocks.
TEST_P(Int8GemmIsa, EveryXRowIsBitwiseTheRowDotsDefinition) {
  for (const Sample& s : Samples()) {
    const kernels::Int8GemmFn gemm = kernels::KernelsFor(*s.W.format, GetParam()).int8_gemm;
    for (int m : {1, 2, 3, 5, 16, 17}) {
      const std::vector<Int8Activations> xs = XRows(s.W.cols, m, 3u * m + s.W.cols);
      for (const auto& [begin, end] :
           {std::pair{0, 13}, std::pair{1, 12}, std::pair{3, 10}, std::pair{5, 6}, std::pair{4, 4}}) {
        ASSERT_TRUE(IsTheDefinition(gemm, s.W, begin, end, xs, s.name));
      }
    }
  }
}

// Where a variant has int8 row dots of its own, its int8_gemm is its own or null (run per row), never a lower
// ISA's; the definition always has one.
TEST_P(Int8GemmIsa, KernelsForNeverTakesALowerIsasGemm) {
  for (const kernels::WeightFormat* format : kernels::WeightFormats()) {
    const kernels::FormatKernels own = format->kernels[static_cast<int>(GetParam())];
    const kernels::FormatKernels picked = kernels::KernelsFor(*format, GetParam());
    if (own.int8_row_dots != nullptr) {
      EXPECT_EQ(picked.int8_gemm, own.int8_gemm) << format->name;
    }
    const kernels::FormatKernels scalar = format->kernels[static_cast<int>(Isa::kScalar)];
    EXPECT_EQ(scalar.int8_gemm == nullptr, scalar.int8_row_dots == nullptr) << format->name;
  }
}

TEST_P(Int8GemmIsa, Int8GemmOfIsBitwiseTheDefinition) {
  for (const Sample& s : Samples()) {
    const std::vector<Int8Activations> xs = XRows(s.W.cols, 6, 11);
    ASSERT_TRUE(IsTheDefinition(nullptr, s.W, 1, 12, xs, s.name + " (Int8GemmOf)"));
  }
}

// Int8BatchPays: only where the fast family runs an int8_gemm that prepares the blocks once (GGUF Q4_0 …
// Q8_0 and INT4 on x86; GGUF on NEON), and up to kInt8BatchMaxRows rows.
TEST_P(Int8GemmIsa, BatchPaysOnlyWithAMultiRowKernel) {
  const WeightMatrix q4_1 = testing::RandomGgml(GgmlType::Q4_1, 4, 64, 1);
  const WeightMatrix q4_k = testing::RandomGgml(GgmlType::Q4_K, 4, 256, 1);
  const WeightMatrix int4 = testing::RandomInt4({Int4Scheme::kSymmetric, 32}, 4, 64, 1);
  const WeightMatrix fp8 = testing::RandomFp8(Fp8Format::kE4M3, 4, 64, true, 1);
  const int most = kernels::kInt8BatchMaxRows;
  testing::FamilyGuard exact(kernels::KernelFamily::kExact);
  EXPECT_FALSE(kernels::Int8BatchPays(q4_1, 4));
  testing::FamilyGuard fast(kernels::KernelFamily::kFast);
  const bool vector = GetParam() != Isa::kScalar;
  EXPECT_EQ(kernels::Int8BatchPays(q4_1, most), vector);
  EXPECT_FALSE(kernels::Int8BatchPays(q4_1, most + 1));
  EXPECT_FALSE(kernels::Int8BatchPays(q4_k, 4));
  EXPECT_FALSE(kernels::Int8BatchPays(fp8, 4));
  EXPECT_EQ(kernels::Int8BatchPays(int4, 4), vector && GetParam() != Isa::kNeon);
}

// The GGUF types' int8 panels on awkward shapes: 37 rows (two 16-row groups and a partial one), ranges that
// start and end inside a group, K of 1, 3 and 19 blocks (1 and 3 super-blocks), m from 1 to past several
// 4-, 6- and 16-row blocks of x; each Y element bitwise the scalar row dots of its x row. `panels_for` gives
// the kernel of a type (null: the path has none for it, skipped).
template <class PanelsFor>
void ExpectPanelsAreTheDefinition(PanelsFor panels_for, const std::string& path) {
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                        GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const bool k_quant = GgmlTraits(type).block_elements == 256;
    for (int cols : k_quant ? std::vector<int>{256, 768} : std::vector<int>{32, 96, 608}) {
      const WeightMatrix W = testing::RandomGgml(type, 37, cols, 3u * cols + static_cast<unsigned>(type));
      const std::string name = path + " " + std::string(GgmlTypeName(type)) + " " + std::to_string(cols);
      const kernels::Int8GemmFn panels = panels_for(W);
      if (panels == nullptr) continue;
      for (int m : {1, 4, 5, 18, 33}) {
        const std::vector<Int8Activations> xs = XRows(cols, m, 5u * m + cols);
        for (const auto& [begin, end] :
             {std::pair{0, 37}, std::pair{1, 36}, std::pair{3, 19}, std::pair{16, 32}, std::pair{5, 6}}) {
          ASSERT_TRUE(IsTheDefinition(panels, W, begin, end, xs, name + " (panels)"));
        }
      }
    }
  }
}

// int8_panel_gemm as KernelsFor gives it on each ISA: every type has one.
TEST_P(Int8GemmIsa, PanelsAreBitwiseTheRowDotsDefinition) {
  ExpectPanelsAreTheDefinition(
      [&](const WeightMatrix& W) {
        const kernels::Int8GemmFn panels = kernels::KernelsFor(*W.format, GetParam()).int8_panel_gemm;
        EXPECT_NE(panels, nullptr) << GgmlTypeName(W.type);
        return panels;
      },
      kernels::IsaName(GetParam()));
}

#if defined(__x86_64__)
// AVX-512's two paths, each whatever the table picked on this host: VNNI's registers and AMX's tiles
// (int8_panel_amx.cpp; the G = 32 types: G = 16 and 4 stay on VNNI).
TEST(Int8PanelsAvx512, VnniIsBitwiseTheDefinition) {
  if (!kernels::IsaSupported(Isa::kAvx512)) GTEST_SKIP() << kernels::IsaMissing(Isa::kAvx512);
  if (!kernels::HasAvx512Vnni()) GTEST_SKIP() << "CPU lacks avx512_vnni";
  ExpectPanelsAreTheDefinition(
      [](const WeightMatrix& W) { return kernels::ggml::avx512::Int8PanelGemmPath(false, W.type); }, "vnni");
}

TEST(Int8PanelsAvx512, AmxIsBitwiseTheDefinition) {
  if (!kernels::HasAmxInt8()) GTEST_SKIP() << "AMX: " << kernels::AmxMissing();
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                        GgmlType::Q4_K, GgmlType::Q5_K}) {
    EXPECT_NE(kernels::ggml::avx512::AmxPanelGemmFor(type), nullptr)
        << GgmlTypeName(type) << " is not on tiles";
  }
  ExpectPanelsAreTheDefinition(
      [](const WeightMatrix& W) { return kernels::ggml::avx512::AmxPanelGemmFor(W.type); }, "amx");
}

// The AMX kernel keeps each thread's copy of the x rows from call to call (Int8Activations::serial): the
// same objects requantized, a row changed by hand (serial 0), and fewer rows than before (zero padding where
// rows were) must each be what the new rows give, never the copy's.
// Code e of x set by hand, its block's sum and s kept as QuantizeActivations defines them; serial 0, as the
// field asks of a writer other than QuantizeActivations.
void SetCode(Int8Activations& x, int e, int code) {
  const std::size_t b = static_cast<std::size_t>(e / 32);
  x.sum[b] += code - x.q[static_cast<std::size_t>(e)];
  x.q[static_cast<std::size_t>(e)] = static_cast<std::int8_t>(code);
  x.s[b] = x.d[b] * static_cast<float>(x.sum[b]);
  x.serial = 0;
  kernels::AddGroupSums(x);
}

TEST(Int8PanelsAvx512, AmxCopiesOfXFollowTheirRows) {
  if (!kernels::HasAmxInt8()) GTEST_SKIP() << "AMX: " << kernels::AmxMissing();
  const WeightMatrix W = testing::RandomGgml(GgmlType::Q8_0, 37, 96, 41);
  const kernels::Int8GemmFn amx = kernels::ggml::avx512::AmxPanelGemmFor(W.type);
  ASSERT_NE(amx, nullptr);
  std::vector<Int8Activations> xs = XRows(W.cols, 20, 1);
  ASSERT_TRUE(IsTheDefinition(amx, W, 0, 37, xs, "first rows"));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::vector<float> x = RandomVector(W.cols, 100u + static_cast<unsigned>(i), 2.0f);
    kernels::QuantizeActivations(x.data(), W.cols, xs[i]);
    kernels::AddGroupSums(xs[i]);
  }
  ASSERT_TRUE(IsTheDefinition(amx, W, 0, 37, xs, "requantized"));
  SetCode(xs[3], 5, -xs[3].q[5] + 1);
  SetCode(xs[17], 90, 127);
  ASSERT_TRUE(IsTheDefinition(amx, W, 0, 37, xs, "changed by hand"));
  xs.resize(3);
  ASSERT_TRUE(IsTheDefinition(amx, W, 0, 37, xs, "fewer rows"));
  SetCode(xs[1], 7, 9);
  ASSERT_TRUE(IsTheDefinition(amx, W, 0, 37, xs, "a serial-0 row changed again"));
  SetCode(xs[1], 7, -9);
  ASSERT_TRUE(IsTheDefinition(amx, W, 0, 37, xs, "and again"));
}
#endif

INSTANTIATE_TEST_SUITE_P(Variants, Int8GemmIsa, ::testing::ValuesIn(plumb::testing::kIsasOfThisBuild),
                         [](const auto& p) { return std::string(kernels::IsaName(p.param)); });

// A panel holds what the exact decoder decodes: for every element, ws · (u − o) (+ or − wm, the type's
// minimum) in DequantizeRow's operations gives DequantizeRow's bits. So the codes, factors and lane order
// that the kernels read are checked against the formats' definition (docs/formats.md), not only against
// the row dots that share their reading of the blocks.
TEST(Int8Panels, RepackedRowsDecodeToTheExactValues) {
  using kernels::ggml::Panel;
  using kernels::ggml::PanelMin;
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                        GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const int cols = GgmlTraits(type).block_elements == 256 ? 512 : 96;
    const WeightMatrix W = testing::RandomGgml(type, 21, cols, 9u + static_cast<unsigned>(type));
    Panel panel;
    kernels::ggml::RepackRows(W, 2, 21, panel);  // 19 rows: a full group and 3 rows of the next
    ASSERT_EQ(panel.groups, 2);
    const int G = panel.shape.term_elements;
    std::vector<float> row(cols);
    for (int r = 2; r < 21; ++r) {
      DequantizeRow(type, W.Row(r), row.data(), cols);
      const std::uint8_t* group = panel.Group((r - 2) / 16);
      const int j = (r - 2) % 16;
      for (int lane = 0; lane < 8; ++lane) {
        const std::uint8_t* term = group + panel.LaneOffset(lane);
        for (int tau = panel.shape.FirstTerm(lane); tau < panel.terms; tau += 8) {
          float ws = 0, wm = 0;
          std::memcpy(&ws, term + 16 * G + 4 * j, 4);
          if (panel.shape.min != PanelMin::kNone) std::memcpy(&wm, term + 16 * G + 64 + 4 * j, 4);
          for (int e = 0; e < G; ++e) {
            const int u = term[64 * (e / 4) + 4 * j + e % 4];
            const float w = static_cast<float>(u - panel.shape.offset);
            float value = type == GgmlType::Q4_1 || type == GgmlType::Q5_1 ? w * ws + wm : ws * w;
            if (panel.shape.min_subtracts) value = ws * w - wm;
            ASSERT_TRUE(SameBits(value, row[tau * G + e]))
                << GgmlTypeName(type) << " row " << r << " element " << tau * G + e << ": " << value
                << ", DequantizeRow " << row[tau * G + e];
          }
          term += panel.shape.TermBytes();
        }
      }
    }
    for (int j = 3; j < 16; ++j) {  // the second group's missing rows are zeros
      const std::uint8_t* term = panel.Group(1);
      for (int c = 0; c < G / 4; ++c) {
        std::uint32_t codes = 1;
        std::memcpy(&codes, term + 64 * c + 4 * j, 4);
        EXPECT_EQ(codes, 0u) << GgmlTypeName(type) << " missing row " << j;
      }
    }
  }
}

TEST(Int8GemmOf, ErrorsNameTheMatrixAndTheXRow) {
  const WeightMatrix fp8 = testing::RandomFp8(Fp8Format::kE4M3, 2, 32, true, 1);
  const WeightMatrix q4 = testing::RandomGgml(GgmlType::Q4_0, 2, 64, 1);
  std::vector<Int8Activations> xs = XRows(64, 3, 1);
  std::vector<float> Y(3 * 2);
  EXPECT_THROW(kernels::Int8GemmOf(fp8, 0, 2, xs.data(), 3, Y.data(), 2), Error);  // no fast kernels
  EXPECT_THROW(kernels::Int8GemmOf(q4, 0, 3, xs.data(), 3, Y.data(), 2), Error);   // rows outside
  EXPECT_NO_THROW(kernels::Int8GemmOf(q4, 0, 2, xs.data(), 3, Y.data(), 2));
  const std::vector<float> x32(32, 1.0f);
  kernels::QuantizeActivations(x32.data(), 32, xs[2]);  // the third x row for another length
  try {
    kernels::Int8GemmOf(q4, 0, 2, xs.data(), 3, Y.data(), 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x has 32 elements"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace plumb
