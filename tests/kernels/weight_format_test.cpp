// The weight-format table (kernels/weight_format.h) as a contract, for every registered format alike, the
// way ggml's test-backend-ops holds every backend to one: each format's scalar kernels are its definition,
// and every ISA's kernels (what KernelsFor gives, fallbacks included) compute the same bits on awkward shapes
// (columns not a multiple of 8, 32 or the group size; row ranges that start mid-matrix). A format added to
// the table is tested here by adding its sample matrices to Samples(). The formats' own tests
// (packed_dot_test.cpp: FP8 and INT4 against double-precision decoders; row_dot_test.cpp: GGUF types) check
// that the definitions are the formats' documented values.
#include "plumb/kernels/weight_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../../src/kernels/ggml/ggml_kernel_table.h"
#include "plumb/core/error.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/scalar.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/isa_variants.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using kernels::FormatKernels;
using kernels::Isa;
using kernels::WeightFormat;
using testing::RandomVector;
using testing::SameBits;

// Sample matrices of `format`, each with a name for failure messages.
struct Sample {
  std::string name;
  WeightMatrix W;
};

std::vector<Sample> Samples(const WeightFormat& format) {
  std::vector<Sample> out;
  std::uint32_t seed = 1;
  auto add = [&](WeightMatrix W) {
    out.push_back(
        {W.format->describe(W) + " " + std::to_string(W.rows) + "x" + std::to_string(W.cols), std::move(W)});
  };
  if (&format == &kernels::kGgmlFormat) {
    for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
      for (int cols : {1, 13, 100}) add(testing::RandomGgml(type, 7, cols, seed++));
    }
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1}) {
      for (int cols : {32, 96, 288}) add(testing::RandomGgml(type, 7, cols, seed++));
    }
    for (GgmlType type : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
      add(testing::RandomGgml(type, 5, 512, seed++));
    }
  } else if (&format == &kernels::kFp8Format) {
    for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
      for (bool per_row : {true, false}) {
        for (int cols : {1, 45, 130}) add(testing::RandomFp8(f, 7, cols, per_row, seed++, /*specials=*/true));
      }
    }
  } else if (&format == &kernels::kInt4Format) {
    for (Int4Scheme scheme :
         {Int4Scheme::kSymmetric, Int4Scheme::kAsymmetric, Int4Scheme::kAsymmetricF16Zero}) {
      for (int g : {32, 64, 128}) {
        for (int cols : {9, 45, 200}) add(testing::RandomInt4(Int4Params{scheme, g}, 7, cols, seed++));
      }
    }
  } else if (&format == &kernels::kMicroscaledFormat) {
    for (MicroscalingScheme scheme : kMicroscalingSchemes) {
      // Partial last blocks, an odd FP4 row, rows past one 256-element decode chunk, NaN scales and elements.
      for (int cols : {1, 45, 300})
        add(testing::RandomMicroscaled(scheme, 7, cols, seed++, /*specials=*/true));
      add(testing::RandomMicroscaled(scheme, 5, 64, seed++));
    }
  } else if (&format == &kernels::kBlockFp8Format) {
    // Tiny, odd and partial blocks both ways (rows and cols not multiples of 128 or 8), rows crossing a block
    // row, more than one block column; a NaN code, and a scale past the AVX2 kernels' range.
    for (const auto& [rows, cols] : {std::pair{3, 1}, {3, 7}, {7, 45}, {130, 300}, {9, 520}})
      add(testing::RandomBlockFp8(rows, cols, seed++, /*specials=*/true));
    add(testing::RandomBlockFp8(133, 257, seed++));
  }
  return out;
}

const FormatKernels& Definition(const WeightFormat& format) {
  return format.kernels[static_cast<int>(Isa::kScalar)];
}

TEST(WeightFormats, EveryFormatHasSamplesADefinitionAndAUniqueName) {
  std::set<std::string> names;
  for (const WeightFormat* format : kernels::WeightFormats()) {
    EXPECT_TRUE(names.insert(format->name).second) << "two formats named " << format->name;
    EXPECT_NE(Definition(*format).row_dots, nullptr) << format->name;
    EXPECT_NE(Definition(*format).decode_rows, nullptr) << format->name;
    EXPECT_NE(format->describe, nullptr) << format->name;
    EXPECT_NE(format->side_bytes, nullptr) << format->name;
    EXPECT_FALSE(Samples(*format).empty()) << format->name << " has no samples in this test";
  }
  EXPECT_EQ(WeightMatrix().format, &kernels::kGgmlFormat);  // a default matrix is plain FP32
}

// The definition's two kernels agree: row_dots is row_scale · scalar::Dot of decode_rows' row.
TEST(WeightFormats, DefinitionRowDotsAreTheDotOfTheDecodedRowTimesTheRowScale) {
  for (const WeightFormat* format : kernels::WeightFormats()) {
    for (const Sample& s : Samples(*format)) {
      const WeightMatrix& W = s.W;
      const std::vector<float> x = RandomVector(W.cols, 3u * W.cols);
      std::vector<float> y(W.rows), row(W.cols);
      Definition(*format).row_dots(W, 0, W.rows, x.data(), y.data());
      for (int r = 0; r < W.rows; ++r) {
        Definition(*format).decode_rows(W, r, 1, row.data());
        const float dot = kernels::scalar::Dot(row.data(), x.data(), W.cols);
        const float expected = format->row_scale ? format->row_scale(W, r) * dot : dot;
        ASSERT_TRUE(SameBits(y[r], expected)) << s.name << " row " << r;
      }
    }
  }
}

// The types whose exact row dots are vector code on every ISA, by type alone: the model keeps such an LM head
// exact in the fast family, and runs the others' (the K-quants', Q5_0's, Q5_1's) fast kernels.
TEST(WeightFormats, ExactRowDotsAreVectorizedForTheTypesWithVectorKernelsOnEveryIsa) {
  const auto zeros = [](GgmlType type) {
    return WeightMatrix::FromBytes(type, 1, 256, std::vector<std::uint8_t>(GgmlRowBytes(type, 256)));
  };
  for (GgmlType type :
       {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0}) {
    EXPECT_TRUE(kernels::ExactRowDotsAreVectorized(zeros(type))) << GgmlTypeName(type);
  }
  for (GgmlType type : {GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                        GgmlType::Q5_K, GgmlType::Q6_K}) {
    EXPECT_FALSE(kernels::ExactRowDotsAreVectorized(zeros(type))) << GgmlTypeName(type);
  }
}

// The GGUF kernel table (src/kernels/ggml/ggml_kernel_table.h): each vector kernel this build has is in its
// column, never a fallback to the definition where one was written. The bitwise tests cannot see that (the
// definition computes the same bits, only slower), so a forgotten Fill* entry would pass them. The table's
// columns do not depend on the CPU (but AVX-512's int8 dots on VNNI), so this runs on every host.
TEST(GgufKernelTable, EachIsaFileEntersItsKernelsAndTheRestFallOneIsaDown) {
  using kernels::ggml::GgmlKernels;
  using kernels::ggml::GgmlKernelsFor;
  const auto at = [](GgmlType type, Isa isa) -> const GgmlKernels& { return GgmlKernelsFor(type, isa); };
  const GgmlType int8_types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                 GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                                 GgmlType::Q5_K, GgmlType::Q6_K};
  const GgmlType vector_row_dot_types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,
                                           GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0};
  const GgmlType float_types[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16};
  // The definitions serve every type they cover; nothing for an id outside the table.
  for (GgmlType type : int8_types) EXPECT_NE(at(type, Isa::kScalar).int8_row_dots, nullptr);
  for (GgmlType type : vector_row_dot_types) EXPECT_NE(at(type, Isa::kScalar).row_dots, nullptr);
  EXPECT_EQ(GgmlKernelsFor(static_cast<GgmlType>(1000), Isa::kScalar).row_dots, nullptr);
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
  const Isa base = Isa::kAvx2;
#else
  const Isa base = Isa::kNeon;
#endif
  for (GgmlType type : vector_row_dot_types) {
    EXPECT_NE(at(type, base).row_dots, at(type, Isa::kScalar).row_dots) << GgmlTypeName(type);
  }
  for (GgmlType type : {GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K}) {  // the definition's alone
    EXPECT_EQ(at(type, base).row_dots, at(type, Isa::kScalar).row_dots) << GgmlTypeName(type);
  }
  for (GgmlType type : int8_types) {
    EXPECT_NE(at(type, base).int8_row_dots, at(type, Isa::kScalar).int8_row_dots) << GgmlTypeName(type);
    EXPECT_NE(at(type, base).int8_gemm, at(type, Isa::kScalar).int8_gemm) << GgmlTypeName(type);
  }
  for (GgmlType type : float_types) {
    EXPECT_NE(at(type, base).fma_row_dots, at(type, Isa::kScalar).fma_row_dots) << GgmlTypeName(type);
  }
#endif
#if defined(__x86_64__)
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::F16}) {
    EXPECT_NE(at(type, Isa::kAvx2).decode_rows, at(type, Isa::kScalar).decode_rows) << GgmlTypeName(type);
  }
  // AVX-512's own row dots, and AVX2's for the rest; its int8 dots where the CPU has VNNI, else AVX2's.
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0}) {
    EXPECT_NE(at(type, Isa::kAvx512).row_dots, at(type, Isa::kAvx2).row_dots) << GgmlTypeName(type);
  }
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_K}) {
    EXPECT_EQ(at(type, Isa::kAvx512).row_dots, at(type, Isa::kAvx2).row_dots) << GgmlTypeName(type);
    EXPECT_EQ(at(type, Isa::kAvx512).decode_rows, at(type, Isa::kAvx2).decode_rows) << GgmlTypeName(type);
  }
  for (GgmlType type : int8_types) {
    EXPECT_EQ(at(type, Isa::kAvx512).int8_row_dots == at(type, Isa::kAvx2).int8_row_dots,
              !kernels::HasAvx512Vnni())
        << GgmlTypeName(type);
  }
#endif
}

TEST(WeightFormats, BytesAreTheRowsPlusTheSideArrays) {
  const WeightMatrix f32 = testing::RandomGgml(GgmlType::F32, 3, 10, 1);
  EXPECT_EQ(f32.Bytes(), 3u * 10 * 4);
  const WeightMatrix fp8_rows = testing::RandomFp8(Fp8Format::kE4M3, 3, 10, true, 1);
  EXPECT_EQ(fp8_rows.Bytes(), 3u * 10 + 3 * 4);
  const WeightMatrix fp8_tensor = testing::RandomFp8(Fp8Format::kE4M3, 3, 10, false, 1);
  EXPECT_EQ(fp8_tensor.Bytes(), 3u * 10 + 4);
  // 100 columns in groups of 32: 4 groups, 50 bytes of codes, 4 FP16 scales and 2 bytes of zero nibbles.
  const WeightMatrix int4 = testing::RandomInt4(Int4Params{Int4Scheme::kAsymmetric, 32}, 3, 100, 1);
  EXPECT_EQ(int4.Bytes(), 3u * (50 + 4 * 2 + 2));
  // 45 FP4 columns: 23 bytes of codes; 2 E8M0 scales (MXFP4, blocks of 32) or 3 E4M3 ones and the FP32
  // tensor scale (NVFP4, blocks of 16); MXFP8: 45 bytes and 2 scales.
  EXPECT_EQ(testing::RandomMicroscaled(MicroscalingScheme::kMxfp4, 3, 45, 1).Bytes(), 3u * (23 + 2));
  EXPECT_EQ(testing::RandomMicroscaled(MicroscalingScheme::kNvfp4, 3, 45, 1).Bytes(), 3u * (23 + 3) + 4);
  EXPECT_EQ(testing::RandomMicroscaled(MicroscalingScheme::kMxfp8E4M3, 3, 45, 1).Bytes(), 3u * (45 + 2));
  // 130 x 300 block-scaled FP8: 2 x 3 FP32 block scales beside the codes.
  EXPECT_EQ(testing::RandomBlockFp8(130, 300, 1).Bytes(), 130u * 300 + 2 * 3 * 4);
}

TEST(WeightFormats, DescribeSpellsTheDtypeAsPlumbPackDoes) {
  EXPECT_EQ(kernels::kGgmlFormat.describe(testing::RandomGgml(GgmlType::Q4_1, 1, 32, 1)), "Q4_1");
  EXPECT_EQ(kernels::kFp8Format.describe(testing::RandomFp8(Fp8Format::kE5M2, 1, 8, true, 1)), "fp8-e5m2");
  EXPECT_EQ(kernels::kInt4Format.describe(
                testing::RandomInt4(Int4Params{Int4Scheme::kAsymmetricF16Zero, 64}, 1, 64, 1)),
            "int4-asym-f16zero-g64");
  EXPECT_EQ(
      kernels::kMicroscaledFormat.describe(testing::RandomMicroscaled(MicroscalingScheme::kNvfp4, 1, 16, 1)),
      "nvfp4");
  EXPECT_EQ(kernels::kBlockFp8Format.describe(testing::RandomBlockFp8(1, 8, 1)), "fp8-block128");
}

TEST(WeightFormats, RowsOutsideTheMatrixAreAnErrorNamingTheFormat) {
  const WeightMatrix W = testing::RandomFp8(Fp8Format::kE4M3, 3, 8, true, 1);
  std::vector<float> x(8), y(4);
  EXPECT_THROW(kernels::RowDotsOf(W, 0, 4, x.data(), y.data()), Error);
  EXPECT_THROW(kernels::RowDotsOf(W, -1, 2, x.data(), y.data()), Error);
  EXPECT_THROW(kernels::DecodeRowsOf(W, 2, 2, y.data()), Error);
  try {
    kernels::RowDotsOf(W, 2, 1, x.data(), y.data());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp8-e4m3"), std::string::npos) << e.what();
  }
}

TEST(WeightFormats, AGgmlViewOfATypeWithoutKernelsIsAnErrorNamingItAndTheSupportedTypes) {
  const std::vector<std::uint8_t> bytes(64);
  try {
    (void)WeightMatrix::View(GgmlType::I8, 2, 32, bytes.data(), nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("I8"), std::string::npos) << message;
    EXPECT_NE(message.find("supported: F32"), std::string::npos) << message;
    EXPECT_NE(message.find("Q6_K"), std::string::npos) << message;
  }
}

class WeightFormatIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { PLUMB_REQUIRE_ISA(GetParam()); }
};

TEST_P(WeightFormatIsa, FallbackGoesDownOneIsaAtATime) {
  for (const WeightFormat* format : kernels::WeightFormats()) {
    const FormatKernels got = kernels::KernelsFor(*format, GetParam());
    const FormatKernels& own = format->kernels[static_cast<int>(GetParam())];
    const FormatKernels below =
        GetParam() == Isa::kAvx512 ? kernels::KernelsFor(*format, Isa::kAvx2) : Definition(*format);
    EXPECT_EQ(got.row_dots, own.row_dots ? own.row_dots : below.row_dots) << format->name;
    EXPECT_EQ(got.decode_rows, own.decode_rows ? own.decode_rows : below.decode_rows) << format->name;
    EXPECT_NE(got.row_dots, nullptr) << format->name;
    EXPECT_NE(got.decode_rows, nullptr) << format->name;
  }
}

TEST_P(WeightFormatIsa, RowDotsAreBitwiseTheDefinition) {
  for (const WeightFormat* format : kernels::WeightFormats()) {
    const FormatKernels kernels = kernels::KernelsFor(*format, GetParam());
    for (const Sample& s : Samples(*format)) {
      const WeightMatrix& W = s.W;
      const std::vector<float> x = RandomVector(W.cols, 7u * W.cols + 1);
      std::vector<float> expected(W.rows);
      Definition(*format).row_dots(W, 0, W.rows, x.data(), expected.data());
      for (int begin : {0, 1, 3}) {  // ranges that do not start at a multiple of the kernels' row blocks
        std::vector<float> y(W.rows, -7.0f);
        kernels.row_dots(W, begin, W.rows, x.data(), y.data());
        for (int r = 0; r < W.rows; ++r) {
          if (r < begin) {
            ASSERT_EQ(y[r], -7.0f) << s.name << ": row " << r << " is outside [" << begin << ", rows)";
          } else {
            ASSERT_TRUE(SameBits(y[r], expected[r])) << s.name << " row " << r << " from " << begin;
          }
        }
      }
    }
  }
}

TEST_P(WeightFormatIsa, DecodedRowsAreBitwiseTheDefinition) {
  for (const WeightFormat* format : kernels::WeightFormats()) {
    const FormatKernels kernels = kernels::KernelsFor(*format, GetParam());
    for (const Sample& s : Samples(*format)) {
      const WeightMatrix& W = s.W;
      const std::size_t n = static_cast<std::size_t>(W.rows - 2) * W.cols;
      std::vector<float> got(n), expected(n);
      kernels.decode_rows(W, 2, W.rows - 2, got.data());
      Definition(*format).decode_rows(W, 2, W.rows - 2, expected.data());
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(SameBits(got[i], expected[i])) << s.name << " element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, WeightFormatIsa, ::testing::ValuesIn(plumb::testing::kIsasOfThisBuild),
                         [](const auto& p) { return std::string(kernels::IsaName(p.param)); });

}  // namespace
}  // namespace plumb
