// kernels::GemvBatch against kernels::Gemv, bit for bit: every row of a batch must be exactly what the GEMV
// gives that row alone, for every weight type, awkward shapes (weight rows not a multiple of the tile or of
// the thread count, one x row, many), 1 to 3 threads and every RowDot variant of this build. This is what
// makes Model::Step with batch_invariant equal to one-at-a-time Decode.
//
// In the fast family (int8 activations), GemvBatch and Gemm run the int8 kernels (Gemm's many rows on the
// int8 panels): again every row bitwise its Gemv.
//
// Also kernels::Gemm for decode batches (2..64 rows, src/kernels/small_gemm/small_gemm.h): within the
// dot-product error bound of the exact product of the decoded weights, and the same bits for every variant
// and thread count; and for prefill (more rows, through BLAS): the same bits for every thread count.
#include <gtest/gtest.h>

#include <cmath>
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
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/packed_dot.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/kernels/scalar.h"
#include "support/isa_variants.h"
#include "support/naive.h"

namespace plumb {
namespace {

using kernels::KernelFamily;
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

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t e = 0; e < got.size(); ++e) {
    std::uint32_t g, w;
    std::memcpy(&g, &got[e], 4);
    std::memcpy(&w, &want[e], 4);
    ASSERT_EQ(g, w) << what << " element " << e << ": " << got[e] << " != " << want[e];
  }
}

class GemvBatchTypes : public ::testing::TestWithParam<std::tuple<int, kernels::Isa>> {
 protected:
  void SetUp() override {
    PLUMB_REQUIRE_ISA(std::get<1>(GetParam()));
    saved_ = kernels::ActiveIsa();
    kernels::SetIsa(std::get<1>(GetParam()));
  }
  void TearDown() override {
    kernels::SetFamily(KernelFamily::kExact);
    kernels::SetIsa(saved_);
    kernels::SetNumThreads(0);
  }
  kernels::Isa saved_ = kernels::Isa::kScalar;
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
      for (int rows : {1, 2, 3, 17}) {
        const std::vector<float> X = RandomVector(static_cast<std::size_t>(rows) * cols, rows + cols);
        // Both families: in the fast one, a type with int8 kernels runs them for every row, as its Gemv does,
        // and so does Gemm for any number of rows.
        for (KernelFamily family : {KernelFamily::kExact, KernelFamily::kFast}) {
          kernels::SetFamily(family);
          std::vector<float> expected(static_cast<std::size_t>(rows) * w_rows);
          kernels::SetNumThreads(1);
          for (int i = 0; i < rows; ++i) kernels::Gemv(W, X.data() + i * cols, expected.data() + i * w_rows);
          const bool int8 = kernels::UsesInt8RowDots(W);
          for (int threads : {1, 2, 3}) {
            kernels::SetNumThreads(threads);
            std::vector<float> Y(expected.size(), -1.0f);
            kernels::GemvBatch(W, X.data(), rows, Y.data());
            const std::string what = type.name + " " + kernels::FamilyName(family) + " cols " +
                                     std::to_string(cols) + " W rows " + std::to_string(w_rows) + " x rows " +
                                     std::to_string(rows) + " threads " + std::to_string(threads);
            ExpectSameBits(Y, expected, what);
            if (int8) {
              std::fill(Y.begin(), Y.end(), -1.0f);
              kernels::Gemm(X.data(), rows, W, Y.data());
              ExpectSameBits(Y, expected, what + " (Gemm)");
            }
          }
        }
        kernels::SetFamily(KernelFamily::kExact);
      }
    }
  }
}

// Row r of W as the GEMM multiplies it (DequantizeRow / DecodePackedRow: for FP8 the codes), and the factor
// applied to the finished dot (the FP8 scale; 1 otherwise).
std::vector<float> DecodedRow(const WeightMatrix& W, int r, float& scale) {
  std::vector<float> row(static_cast<std::size_t>(W.cols));
  scale = 1.0f;
  if (W.Is(kernels::kGgmlFormat)) {
    DequantizeRow(W.type, W.Row(r), row.data(), W.cols);
  } else {
    kernels::DecodePackedRow(W, r, row.data());
    if (W.Is(kernels::kFp8Format)) scale = W.fp8_scales[W.fp8_per_row ? r : 0];
  }
  return row;
}

TEST_P(GemvBatchTypes, SmallRowGemmIsWithinTheDotProductBoundAndTheSameBitsForEveryVariant) {
  const Named& type = kWeightTypes[std::get<0>(GetParam())];
  const kernels::Isa isa = std::get<1>(GetParam());
  // k: not a multiple of 8 where the type allows (the masked tail), else an odd number of blocks; n: odd and
  // not a multiple of either register block (3 and 4 rows) or of a thread slice; m: 2 and every kind of edge
  // of the 3- and 4-row X blocks, up to small_gemm's limit of 64.
  const int unit = type.col_unit;
  for (int cols : {unit == 1 ? 37 : unit, unit == 1 ? 1003 : 9 * unit}) {
    for (int w_rows : {1, 7, 131}) {
      const WeightMatrix W = type.make(w_rows, cols, static_cast<std::uint32_t>(cols * 7 + w_rows));
      // The bound: each output is 8 lanes of at most ceil(k/8) fused multiply-adds (one rounding each), three
      // levels of lane sums and, for FP8, one scale product, so every term passes at most
      // q = ceil(k/8) + 4 roundings and |y − exact| ≤ γ_q · Σ|scale·w_c·x_c|, γ_q = q·u / (1 − q·u), u = 2⁻²⁴
      // (Higham, Accuracy and Stability of Numerical Algorithms, §3.1). scalar::Gemm of the dequantized
      // matrix (8 lanes of rounded products) obeys the same bound with q + 1.
      const int q = (cols + 7) / 8 + 4;
      const double u = std::ldexp(1.0, -24);
      const double gamma = (q + 1) * u / (1 - (q + 1) * u);
      std::vector<float> dequantized(static_cast<std::size_t>(w_rows) * cols);
      std::vector<float> scales(static_cast<std::size_t>(w_rows));
      for (int r = 0; r < w_rows; ++r) {
        const std::vector<float> row = DecodedRow(W, r, scales[r]);
        for (int c = 0; c < cols; ++c)
          dequantized[static_cast<std::size_t>(r) * cols + c] = row[c] * scales[r];
      }
      // 65 rows: past small_gemm's limit, the prefill path (tiles decoded by the same decoders, cblas_sgemm):
      // the same bound (BLAS's summation order is its own, so only that), no bitwise promise.
      for (int rows : {2, 5, 11, 64, 65}) {
        const std::vector<float> X = RandomVector(static_cast<std::size_t>(rows) * cols, rows * 3 + cols);
        std::vector<float> reference(static_cast<std::size_t>(rows) * w_rows);
        kernels::scalar::Gemm(X.data(), dequantized.data(), reference.data(), rows, w_rows, cols);
        // The scalar variant's bits: every other variant must give them.
        kernels::SetIsa(kernels::Isa::kScalar);
        kernels::SetNumThreads(1);
        std::vector<float> scalar_bits(reference.size(), -1.0f);
        kernels::Gemm(X.data(), rows, W, scalar_bits.data());
        kernels::SetIsa(isa);
        for (int threads : {1, 2, 3}) {
          kernels::SetNumThreads(threads);
          std::vector<float> Y(reference.size(), -1.0f);
          kernels::Gemm(X.data(), rows, W, Y.data());
          const std::string what = type.name + " k " + std::to_string(cols) + " n " + std::to_string(w_rows) +
                                   " m " + std::to_string(rows) + " threads " + std::to_string(threads);
          if (rows <= 64) ExpectSameBits(Y, scalar_bits, what + " (against the scalar variant)");
          for (int i = 0; i < rows; ++i) {
            for (int r = 0; r < w_rows; ++r) {
              double exact = 0, magnitude = 0;
              const float* x = X.data() + static_cast<std::size_t>(i) * cols;
              std::vector<float> codes = DecodedRow(W, r, scales[r]);
              for (int c = 0; c < cols; ++c) {
                exact += static_cast<double>(codes[c]) * x[c];
                magnitude += std::fabs(static_cast<double>(codes[c]) * x[c]);
              }
              exact *= scales[r];
              magnitude *= std::fabs(scales[r]);
              const std::size_t e = static_cast<std::size_t>(i) * w_rows + r;
              ASSERT_LE(std::fabs(Y[e] - exact), gamma * magnitude) << what << " Y[" << i << "][" << r << "]";
              ASSERT_LE(std::fabs(reference[e] - exact), 2 * gamma * magnitude)
                  << what << " scalar::Gemm Y[" << i << "][" << r << "]";
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GemvBatchTypes,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kWeightTypes))),
                                            ::testing::ValuesIn(testing::kIsasOfThisBuild)),
                         [](const ::testing::TestParamInfo<std::tuple<int, kernels::Isa>>& p) {
                           return kWeightTypes[std::get<0>(p.param)].name + "_" +
                                  kernels::IsaName(std::get<1>(p.param));
                         });

// Prefill's Gemm (more rows than small_gemm takes: decoded tiles through OpenBLAS) gives the same bits at
// any thread count, in both families. OpenBLAS rounds a column differently depending on where it falls in a
// call, so this fails where the calls' bounds follow the thread count (they did: a greedy answer changed
// between --threads 1 and 2, and under load at 2).
TEST(Gemm, PrefillBitsDoNotDependOnTheThreadCount) {
  const int rows = 125, w_rows = 1536;
  for (const Named& type : kWeightTypes) {
    const int cols = type.col_unit == 256 ? 768 : 576;
    const WeightMatrix W = type.make(w_rows, cols, static_cast<std::uint32_t>(cols + w_rows));
    const std::vector<float> X = RandomVector(static_cast<std::size_t>(rows) * cols, 5);
    for (KernelFamily family : {KernelFamily::kExact, KernelFamily::kFast}) {
      kernels::SetFamily(family);
      std::vector<float> expected(static_cast<std::size_t>(rows) * w_rows);
      kernels::SetNumThreads(1);
      kernels::Gemm(X.data(), rows, W, expected.data());
      for (int threads : {2, 3}) {
        kernels::SetNumThreads(threads);
        std::vector<float> Y(expected.size(), -1.0f);
        kernels::Gemm(X.data(), rows, W, Y.data());
        ExpectSameBits(Y, expected,
                       type.name + " " + kernels::FamilyName(family) + " threads " + std::to_string(threads));
      }
    }
  }
  kernels::SetFamily(KernelFamily::kExact);
  kernels::SetNumThreads(0);
}

// The fast family's prefill: Gemm of a GGUF block matrix runs the int8 panels from kInt8PanelMinRows rows
// (and the row dots below), and every row is bitwise its Gemv at 1, 2 and 3 threads, on either side of the
// threshold and past several 32-row tiles, so a prompt's logits do not depend on how it was split into calls.
TEST(Gemm, FastPrefillIsEachRowsGemv) {
  kernels::SetFamily(KernelFamily::kFast);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q2_K,
                        GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const int cols = GgmlTraits(type).block_elements == 256 ? 512 : 160;
    const WeightMatrix W = RandomGgml(type, 70, cols, 21u + static_cast<unsigned>(type));
    for (int m : {kernels::kInt8PanelMinRows - 1, kernels::kInt8PanelMinRows, 67}) {
      const std::vector<float> X = RandomVector(static_cast<std::size_t>(m) * cols, 5u * m);
      std::vector<float> want(static_cast<std::size_t>(m) * W.rows);
      kernels::SetNumThreads(1);
      for (int i = 0; i < m; ++i) kernels::Gemv(W, X.data() + i * cols, want.data() + i * W.rows);
      for (int threads : {1, 2, 3}) {
        kernels::SetNumThreads(threads);
        std::vector<float> Y(want.size(), -1.0f);
        kernels::Gemm(X.data(), m, W, Y.data());
        ExpectSameBits(Y, want,
                       std::string(GgmlTypeName(type)) + " m " + std::to_string(m) + " threads " +
                           std::to_string(threads));
      }
    }
  }
  kernels::SetFamily(KernelFamily::kExact);
}

TEST(GemvBatch, ZeroRowsWritesNothing) {
  const WeightMatrix W = RandomGgml(GgmlType::F32, 4, 8, 1);
  float y = 7.0f;
  kernels::GemvBatch(W, nullptr, 0, &y);
  EXPECT_EQ(y, 7.0f);
}

}  // namespace
}  // namespace plumb
