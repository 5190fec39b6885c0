// kernels::GemvBatch against kernels::Gemv, bit for bit: every row of a batch must be exactly what the GEMV
// gives that row alone, for every weight type, awkward shapes (weight rows not a multiple of the tile or of
// the thread count, one x row, many), 1 to 3 threads and every RowDot variant of this build. This is what
// makes Model::Step with batch_invariant equal to one-at-a-time Decode.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "plumb/formats/dtype.h"
#include "plumb/formats/fp8.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/formats/int4.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/row_dot.h"
#include "support/isa_variants.h"
#include "support/naive.h"

namespace plumb {
namespace {

using testing::RandomVector;

// A GGUF matrix of random blocks with finite FP16 scales (every code reachable), or random plain values.
WeightMatrix RandomGgml(GgmlType type, int rows, int cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::size_t row_bytes = GgmlRowBytes(type, cols);
  std::vector<std::uint8_t> bytes(row_bytes * rows);
  if (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = 0; i < static_cast<std::size_t>(rows) * cols; ++i) {
      const float w = normal(rng);
      if (type == GgmlType::F32) {
        std::memcpy(&bytes[4 * i], &w, 4);
      } else {
        const std::uint16_t h = type == GgmlType::F16 ? F32ToF16(w) : F32ToBF16(w);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    }
  } else {
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    const std::size_t block_bytes = GgmlTraits(type).block_bytes;
    std::uniform_real_distribution<float> scale(0.001f, 0.5f);
    for (std::size_t block = 0; block < bytes.size(); block += block_bytes) {
      for (int offset : BlockScaleOffsets(type)) {
        const std::uint16_t h = F32ToF16(scale(rng));
        std::memcpy(&bytes[block + offset], &h, 2);
      }
    }
  }
  return WeightMatrix::FromBytes(type, rows, cols, std::move(bytes));
}

WeightMatrix RandomFp8(Fp8Format format, bool per_row, int rows, int cols, std::uint32_t seed) {
  const std::vector<float> w = RandomVector(static_cast<std::size_t>(rows) * cols, seed);
  auto m = std::make_shared<Fp8Matrix>(QuantizeFp8(w.data(), rows, cols, format, per_row));
  return WeightMatrix::Fp8View(format, rows, cols, m->codes.data(), m->scales.data(), per_row, m);
}

WeightMatrix RandomInt4(Int4Params params, int rows, int cols, std::uint32_t seed) {
  const std::vector<float> w = RandomVector(static_cast<std::size_t>(rows) * cols, seed);
  auto m = std::make_shared<Int4Matrix>(QuantizeInt4(w.data(), rows, cols, params));
  return WeightMatrix::Int4View(params, rows, cols, m->codes.data(), m->scales.data(),
                                m->zeros.empty() ? nullptr : m->zeros.data(), m);
}

struct Named {
  std::string name;
  WeightMatrix (*make)(int rows, int cols, std::uint32_t seed);
  int col_unit;  // columns come in multiples of this (the block size)
};

template <GgmlType kType>
WeightMatrix MakeGgml(int rows, int cols, std::uint32_t seed) {
  return RandomGgml(kType, rows, cols, seed);
}
template <Fp8Format kFormat, bool kPerRow>
WeightMatrix MakeFp8(int rows, int cols, std::uint32_t seed) {
  return RandomFp8(kFormat, kPerRow, rows, cols, seed);
}
template <Int4Scheme kScheme, int kGroup>
WeightMatrix MakeInt4(int rows, int cols, std::uint32_t seed) {
  return RandomInt4(Int4Params{kScheme, kGroup}, rows, cols, seed);
}

const Named kWeightTypes[] = {
    {"F32", MakeGgml<GgmlType::F32>, 1},
    {"F16", MakeGgml<GgmlType::F16>, 1},
    {"BF16", MakeGgml<GgmlType::BF16>, 1},
    {"Q8_0", MakeGgml<GgmlType::Q8_0>, 32},
    {"Q4_0", MakeGgml<GgmlType::Q4_0>, 32},
    {"Q4_1", MakeGgml<GgmlType::Q4_1>, 32},
    {"Q5_0", MakeGgml<GgmlType::Q5_0>, 32},
    {"Q5_1", MakeGgml<GgmlType::Q5_1>, 32},
    {"Q2_K", MakeGgml<GgmlType::Q2_K>, 256},
    {"Q3_K", MakeGgml<GgmlType::Q3_K>, 256},
    {"Q4_K", MakeGgml<GgmlType::Q4_K>, 256},
    {"Q5_K", MakeGgml<GgmlType::Q5_K>, 256},
    {"Q6_K", MakeGgml<GgmlType::Q6_K>, 256},
    {"FP8_E4M3_row", MakeFp8<Fp8Format::kE4M3, true>, 1},
    {"FP8_E5M2_tensor", MakeFp8<Fp8Format::kE5M2, false>, 1},
    {"INT4_sym_g32", MakeInt4<Int4Scheme::kSymmetric, 32>, 1},
    {"INT4_asym_g64", MakeInt4<Int4Scheme::kAsymmetric, 64>, 1},
    {"INT4_asym_f16zero_g128", MakeInt4<Int4Scheme::kAsymmetricF16Zero, 128>, 1},
};

class GemvBatchTypes : public ::testing::TestWithParam<std::tuple<int, kernels::RowDotIsa>> {
 protected:
  void SetUp() override {
    if (!kernels::RowDotIsaSupported(std::get<1>(GetParam()))) GTEST_SKIP() << "variant not available here";
    saved_ = kernels::ActiveRowDotIsa();
    kernels::SetRowDotIsa(std::get<1>(GetParam()));
  }
  void TearDown() override {
    kernels::SetRowDotIsa(saved_);
    kernels::SetNumThreads(0);
  }
  kernels::RowDotIsa saved_ = kernels::RowDotIsa::kScalar;
};

TEST_P(GemvBatchTypes, EveryRowIsBitwiseGemvOfThatRowAlone) {
  const Named& type = kWeightTypes[std::get<0>(GetParam())];
  // Columns: odd where the type allows (x rows then start misaligned for the vector loads), otherwise a few
  // blocks; weight rows: 1, and counts that leave partial tiles and uneven thread slices.
  const int unit = type.col_unit;
  const int col_counts[] = {unit == 1 ? 37 : unit, unit == 1 ? 1000 : 3 * unit, unit == 1 ? 4099 : 17 * unit};
  for (int cols : col_counts) {
    for (int w_rows : {1, 7, 130}) {
      const WeightMatrix W = type.make(w_rows, cols, static_cast<std::uint32_t>(cols * 31 + w_rows));
      for (int rows : {1, 3, 17}) {
        const std::vector<float> X = RandomVector(static_cast<std::size_t>(rows) * cols, rows + cols);
        std::vector<float> expected(static_cast<std::size_t>(rows) * w_rows);
        kernels::SetNumThreads(1);
        for (int i = 0; i < rows; ++i) kernels::Gemv(W, X.data() + i * cols, expected.data() + i * w_rows);
        for (int threads : {1, 2, 3}) {
          kernels::SetNumThreads(threads);
          std::vector<float> Y(expected.size(), -1.0f);
          kernels::GemvBatch(W, X.data(), rows, Y.data());
          for (std::size_t e = 0; e < Y.size(); ++e) {
            std::uint32_t got, want;
            std::memcpy(&got, &Y[e], 4);
            std::memcpy(&want, &expected[e], 4);
            ASSERT_EQ(got, want) << type.name << " cols " << cols << " W rows " << w_rows << " x rows "
                                 << rows << " threads " << threads << " element " << e << ": " << Y[e]
                                 << " != " << expected[e];
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GemvBatchTypes,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kWeightTypes))),
                                            ::testing::ValuesIn(testing::kIsasOfThisBuild)),
                         [](const ::testing::TestParamInfo<std::tuple<int, kernels::RowDotIsa>>& p) {
                           return kWeightTypes[std::get<0>(p.param)].name + "_" +
                                  kernels::RowDotIsaName(std::get<1>(p.param));
                         });

TEST(GemvBatch, ZeroRowsWritesNothing) {
  const WeightMatrix W = RandomGgml(GgmlType::F32, 4, 8, 1);
  float y = 7.0f;
  kernels::GemvBatch(W, nullptr, 0, &y);
  EXPECT_EQ(y, 7.0f);
}

}  // namespace
}  // namespace plumb
