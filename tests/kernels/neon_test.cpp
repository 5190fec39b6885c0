// The NEON packed-row kernels against their definition (include/plumb/kernels/packed_dot.h), bit for bit:
//   FP8:  y[r] = scale_r · scalar::Dot(Fp8ToF32 of row r, x, cols)
//   INT4: y[r] = scalar::Dot(DequantizeInt4Row(row r), x, cols)
// computed here from those functions directly, on every format / scheme / group size, on awkward shapes
// (columns short of, just past and far from multiples of 8 and of the group; 1, 3 and 17 rows, i.e. the
// four-row path, the single-row path and both), on matrices and vectors at odd addresses, and with every FP8
// code (NaN, inf, subnormals) decoded; and neon::RowDot / RowDots against DequantizeRow + scalar::Dot the
// same way (row_dot_test.cpp also runs them, through the dispatcher, on its own lengths). This file is built
// only for aarch64 (CMakeLists.txt, cmake/kernels-only.cmake) and runs under qemu-user in CI (scripts/test).
#if !defined(__aarch64__)
#error "neon_test.cpp tests the aarch64 NEON kernels; the build must not compile it for another target"
#endif

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/dtype.h"
#include "plumb/formats/fp8.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/formats/int4.h"
#include "plumb/kernels/packed_dot.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/kernels/scalar.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb {
namespace {

const int kCols[] = {1, 2, 7, 8, 9, 31, 33, 63, 65, 127, 129, 4097};
const int kRows[] = {1, 3, 17};
constexpr float kUntouched = -12345.0f;  // y outside the asked rows must keep this

std::uint32_t Bits(float v) {
  return std::bit_cast<std::uint32_t>(v);
}

// Values the kernel reads from an odd address: the bytes one past the start of `storage`.
template <class T>
const T* Misaligned(std::vector<std::uint8_t>& storage, const std::vector<T>& values) {
  storage.assign(1 + values.size() * sizeof(T), 0);
  std::memcpy(storage.data() + 1, values.data(), values.size() * sizeof(T));
  return reinterpret_cast<const T*>(storage.data() + 1);
}

// x: unit normals, or (wide) a mix of signs, zeros and magnitudes from 2^-125 (products go subnormal) to
// 2^20.
std::vector<float> RandomX(int n, bool wide, std::mt19937& rng) {
  std::vector<float> x(n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-125.0f, 20.0f);
  for (float& v : x) {
    if (!wide) {
      v = normal(rng);
    } else {
      v = rng() % 8 == 0 ? 0.0f : std::exp2(exponent(rng));
      if (rng() % 2) v = -v;
    }
  }
  return x;
}

// The FP8 or INT4 format's own NEON row dots (kernels/weight_format.h), called directly.
void NeonRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  W.format->kernels[static_cast<int>(kernels::Isa::kNeon)].row_dots(W, row_begin, row_end, x, y);
}

// The kernel's y[row_begin, row_end) for the whole matrix, with x at an odd address, checked bit for bit
// against `expected` (NaN against NaN), and y outside the range left alone.
void ExpectRowsMatch(const WeightMatrix& W, const std::vector<float>& x, const std::vector<float>& expected,
                     int row_begin, const std::string& what) {
  std::vector<float> x_storage(x.size() + 1);
  std::memcpy(x_storage.data() + 1, x.data(), x.size() * sizeof(float));
  std::vector<float> y(W.rows, kUntouched);
  NeonRowDots(W, row_begin, W.rows, x_storage.data() + 1, y.data());
  for (int r = 0; r < W.rows; ++r) {
    if (r < row_begin) {
      EXPECT_EQ(Bits(y[r]), Bits(kUntouched)) << what << ": row " << r << " is outside the range";
    } else if (std::isnan(expected[r])) {
      // Which NaN payload survives an add of two NaNs is the compiler's choice of operand order.
      EXPECT_TRUE(std::isnan(y[r])) << what << " row " << r << ": got " << y[r];
    } else {
      EXPECT_EQ(Bits(y[r]), Bits(expected[r]))
          << what << " row " << r << ": got " << y[r] << ", definition " << expected[r];
    }
  }
}

// ---- GGUF rows: neon::RowDots, called directly -----------------------------------------------------

// Lengths a row of `type` can have: the awkward ones for plain types, whole blocks otherwise.
std::vector<int> GgmlCols(GgmlType type) {
  const int block = GgmlTraits(type).block_elements;
  if (block == 1) return {std::begin(kCols), std::end(kCols)};
  if (block == 32) return {32, 64, 96, 160, 4096 + 32};
  return {256, 768};
}

// A finite FP16 (for scales): ±2^u for u in [-14, 4]; one time in eight zero or a subnormal instead.
std::uint16_t RandomHalf(std::mt19937& rng) {
  std::uniform_real_distribution<float> exponent(-14.0f, 4.0f);
  const unsigned pick = rng() % 16;
  if (pick < 2) return static_cast<std::uint16_t>(pick == 0 ? 0 : 1 + rng() % 0x3FF);
  return F32ToF16((rng() % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng)));
}

// rows × GgmlRowBytes(type, cols) bytes: finite plain values ±2^u (u in [-30, 15]), or random block bytes
// whose FP16 scales are overwritten with RandomHalf ones.
std::vector<std::uint8_t> RandomGgmlRows(GgmlType type, int rows, int cols, std::mt19937& rng) {
  const std::size_t row_bytes = static_cast<std::size_t>(GgmlRowBytes(type, cols));
  std::vector<std::uint8_t> bytes(rows * row_bytes);
  for (std::uint8_t& b : bytes) b = static_cast<std::uint8_t>(rng());
  const bool plain = GgmlTraits(type).block_elements == 1;
  std::uniform_real_distribution<float> exponent(-30.0f, 15.0f);
  const auto random_value = [&] { return (rng() % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng)); };
  const auto put16 = [&](std::size_t at, std::uint16_t v) { std::memcpy(bytes.data() + at, &v, sizeof v); };
  for (std::size_t at = 0; at < bytes.size(); at += GgmlTraits(type).block_bytes) {
    if (type == GgmlType::F32) {
      const float value = random_value();
      std::memcpy(bytes.data() + at, &value, sizeof value);
    } else if (plain) {
      put16(at, type == GgmlType::F16 ? F32ToF16(random_value()) : F32ToBF16(random_value()));
    } else {
      for (int offset : BlockScaleOffsets(type)) put16(at + offset, RandomHalf(rng));
    }
  }
  return bytes;
}

TEST(NeonRowDots, IsBitwiseTheDefinitionForEveryTypeOnAwkwardShapes) {
  std::mt19937 rng(31u);
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                        GgmlType::Q8_0, GgmlType::Q5_1, GgmlType::Q4_K}) {  // the last two: scalar fallback
    for (int rows : kRows) {
      for (int cols : GgmlCols(type)) {
        const std::vector<std::uint8_t> matrix = RandomGgmlRows(type, rows, cols, rng);
        const std::size_t row_bytes = matrix.size() / rows;
        std::vector<std::uint8_t> storage;
        const std::uint8_t* data = Misaligned(storage, matrix);
        const std::vector<float> x = RandomX(cols, rng() % 2 == 0, rng);
        std::vector<float> x_storage(cols + 1);
        std::memcpy(x_storage.data() + 1, x.data(), x.size() * sizeof(float));
        std::vector<float> y(rows, kUntouched);
        kernels::neon::RowDots(type, data, row_bytes, rows, x_storage.data() + 1, cols, y.data());
        std::vector<float> w(cols);
        for (int r = 0; r < rows; ++r) {
          DequantizeRow(type, matrix.data() + r * row_bytes, w.data(), cols);
          const float expected = kernels::scalar::Dot(w.data(), x.data(), cols);
          ASSERT_TRUE(std::isfinite(expected)) << "test data stays finite";
          EXPECT_EQ(Bits(y[r]), Bits(expected))
              << GgmlTypeName(type) << " " << rows << " x " << cols << " row " << r << ": got " << y[r];
          EXPECT_EQ(Bits(kernels::neon::RowDot(type, data + r * row_bytes, x_storage.data() + 1, cols)),
                    Bits(expected))
              << GgmlTypeName(type) << " RowDot, " << cols << " columns";
        }
      }
    }
  }
}

// ---- FP8 ---------------------------------------------------------------------------------------------

struct Fp8Case {
  Fp8Format format;
  bool per_row;
};

std::string Describe(Fp8Case c, int rows, int cols) {
  return std::string(Fp8FormatName(c.format)) + (c.per_row ? " per-row" : " per-tensor") + " " +
         std::to_string(rows) + " x " + std::to_string(cols);
}

std::vector<float> Fp8Definition(const WeightMatrix& W, const std::vector<float>& x) {
  std::vector<float> expected(W.rows);
  std::vector<float> row(W.cols);
  for (int r = 0; r < W.rows; ++r) {
    for (int c = 0; c < W.cols; ++c) row[c] = Fp8ToF32(W.Row(r)[c], W.fp8_format);
    const float scale = W.fp8_per_row ? W.fp8_scales[r] : W.fp8_scales[0];
    expected[r] = scale * kernels::scalar::Dot(row.data(), x.data(), W.cols);
  }
  return expected;
}

std::uint8_t RandomFiniteFp8(Fp8Format format, std::mt19937& rng) {
  for (;;) {
    const auto code = static_cast<std::uint8_t>(rng());
    if (std::isfinite(Fp8ToF32(code, format))) return code;
  }
}

TEST(NeonPackedRowDots, Fp8IsBitwiseTheDefinitionOnAwkwardShapes) {
  std::mt19937 rng(2024u);
  std::uniform_real_distribution<float> exponent(-20.0f, 10.0f);
  for (Fp8Case c : {Fp8Case{Fp8Format::kE4M3, true}, Fp8Case{Fp8Format::kE4M3, false},
                    Fp8Case{Fp8Format::kE5M2, true}, Fp8Case{Fp8Format::kE5M2, false}}) {
    for (int rows : kRows) {
      for (int cols : kCols) {
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(rows) * cols);
        for (std::uint8_t& code : codes) code = RandomFiniteFp8(c.format, rng);
        std::vector<float> scales(c.per_row ? rows : 1);
        for (float& s : scales) s = (rng() % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng));
        std::vector<std::uint8_t> code_storage, scale_storage;
        // Scales are read as floats, so they stay aligned; the codes sit at an odd address.
        const WeightMatrix W = WeightMatrix::Fp8View(c.format, rows, cols, Misaligned(code_storage, codes),
                                                     scales.data(), c.per_row, nullptr);
        for (bool wide : {false, true}) {
          const std::vector<float> x = RandomX(cols, wide, rng);
          const std::vector<float> expected = Fp8Definition(W, x);
          for (int r = 0; r < rows; ++r) ASSERT_TRUE(std::isfinite(expected[r])) << "test data stays finite";
          ExpectRowsMatch(W, x, expected, 0, Describe(c, rows, cols));
          ExpectRowsMatch(W, x, expected, rows / 2,
                          Describe(c, rows, cols) + " from row " + std::to_string(rows / 2));
        }
      }
    }
  }
}

TEST(NeonPackedRowDots, Fp8DecodesEveryCodeIncludingNanInfAndSubnormals) {
  // Row c holds code c in each of 9 columns: eight through the vector path, one through the tail.
  for (Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const int rows = 256, cols = 9;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(rows) * cols);
    for (int r = 0; r < rows; ++r) std::memset(codes.data() + r * cols, r, cols);
    const float scale = 0.75f;
    const WeightMatrix W = WeightMatrix::Fp8View(format, rows, cols, codes.data(), &scale, false, nullptr);
    std::mt19937 rng(5u);
    for (bool ones : {true, false}) {
      std::vector<float> x = ones ? std::vector<float>(cols, 1.0f) : RandomX(cols, false, rng);
      const std::vector<float> expected = Fp8Definition(W, x);
      ExpectRowsMatch(W, x, expected, 0, std::string(Fp8FormatName(format)) + " all codes");
    }
    // What the special codes must give, so that the comparison above is not of two wrong decodings.
    std::vector<float> y(rows);
    const std::vector<float> x(cols, 1.0f);
    NeonRowDots(W, 0, rows, x.data(), y.data());
    if (format == Fp8Format::kE4M3) {
      EXPECT_TRUE(std::isnan(y[0x7F]) && std::isnan(y[0xFF]));
      EXPECT_EQ(y[0x7E], 0.75f * 448.0f * 9);            // exact: 3024 = 0x1.7Cp11
      EXPECT_EQ(y[0x01], 0.75f * std::ldexp(9.0f, -9));  // the smallest subnormal, 2^-9
    } else {
      EXPECT_EQ(y[0x7C], std::numeric_limits<float>::infinity());
      EXPECT_EQ(y[0xFC], -std::numeric_limits<float>::infinity());
      EXPECT_TRUE(std::isnan(y[0x7D]) && std::isnan(y[0x7E]) && std::isnan(y[0xFF]));
      EXPECT_EQ(y[0x01], 0.75f * std::ldexp(9.0f, -16));  // the smallest subnormal, 2^-16
    }
  }
}

// ---- INT4 --------------------------------------------------------------------------------------------

std::vector<float> Int4Definition(const WeightMatrix& W, const std::vector<float>& x) {
  const int groups = Int4Groups(W.cols, W.int4.group_size);
  const std::size_t zero_bytes = Int4ZeroRowBytes(W.int4, W.cols);
  std::vector<float> expected(W.rows);
  std::vector<float> row(W.cols);
  for (int r = 0; r < W.rows; ++r) {
    DequantizeInt4Row(W.int4, W.Row(r), W.int4_scales + static_cast<std::size_t>(r) * groups,
                      W.int4_zeros == nullptr ? nullptr : W.int4_zeros + r * zero_bytes, W.cols, row.data());
    expected[r] = kernels::scalar::Dot(row.data(), x.data(), W.cols);
  }
  return expected;
}

TEST(NeonPackedRowDots, Int4IsBitwiseTheDefinitionForEverySchemeGroupAndShape) {
  std::mt19937 rng(4u);
  std::uniform_real_distribution<float> zero_value(-2.0f, 17.0f);
  for (Int4Scheme scheme :
       {Int4Scheme::kSymmetric, Int4Scheme::kAsymmetric, Int4Scheme::kAsymmetricF16Zero}) {
    for (int group_size : {32, 64, 128}) {
      const Int4Params params{scheme, group_size};
      for (int rows : kRows) {
        for (int cols : kCols) {
          const int groups = Int4Groups(cols, group_size);
          const std::size_t zero_bytes = Int4ZeroRowBytes(params, cols);
          // Random bytes throughout, including an odd row's unused last high nibble, which must not matter.
          std::vector<std::uint8_t> codes(rows * Int4RowBytes(cols));
          for (std::uint8_t& b : codes) b = static_cast<std::uint8_t>(rng());
          std::vector<std::uint16_t> scales(static_cast<std::size_t>(rows) * groups);
          for (std::uint16_t& s : scales) s = RandomHalf(rng);
          std::vector<std::uint8_t> zeros(rows * zero_bytes);
          if (scheme == Int4Scheme::kAsymmetricF16Zero) {
            for (std::size_t i = 0; i + 1 < zeros.size(); i += 2) {
              const std::uint16_t z = F32ToF16(zero_value(rng));
              std::memcpy(zeros.data() + i, &z, sizeof z);
            }
          } else {
            for (std::uint8_t& b : zeros) b = static_cast<std::uint8_t>(rng());
          }
          std::vector<std::uint8_t> code_storage, zero_storage;
          // Codes and zeros at odd addresses (FP16 zeros are read bytewise); scales are uint16_t, so aligned.
          const WeightMatrix W = WeightMatrix::Int4View(
              params, rows, cols, Misaligned(code_storage, codes), scales.data(),
              scheme == Int4Scheme::kSymmetric ? nullptr : Misaligned(zero_storage, zeros), nullptr);
          const std::string what = std::string(Int4SchemeName(scheme)) + " g" + std::to_string(group_size) +
                                   " " + std::to_string(rows) + " x " + std::to_string(cols);
          for (bool wide : {false, true}) {
            const std::vector<float> x = RandomX(cols, wide, rng);
            const std::vector<float> expected = Int4Definition(W, x);
            for (int r = 0; r < rows; ++r) ASSERT_TRUE(std::isfinite(expected[r])) << what;
            ExpectRowsMatch(W, x, expected, 0, what);
            ExpectRowsMatch(W, x, expected, rows / 2, what + " from row " + std::to_string(rows / 2));
          }
        }
      }
    }
  }
}

TEST(NeonPackedRowDots, Int4NanAndInfinityInXPropagate) {
  std::mt19937 rng(8u);
  const int rows = 5, cols = 70;  // a partial last group and a tail
  const Int4Params params{Int4Scheme::kAsymmetric, 32};
  const int groups = Int4Groups(cols, 32);
  std::vector<std::uint8_t> codes(rows * Int4RowBytes(cols));
  for (std::uint8_t& b : codes) b = static_cast<std::uint8_t>(rng());
  std::vector<std::uint16_t> scales(static_cast<std::size_t>(rows) * groups, F32ToF16(0.5f));
  std::vector<std::uint8_t> zeros(rows * Int4ZeroRowBytes(params, cols), 0x88);
  const WeightMatrix W =
      WeightMatrix::Int4View(params, rows, cols, codes.data(), scales.data(), zeros.data(), nullptr);
  for (int position : {3, 35, 69}) {  // vector path, partial group, scalar tail
    for (float special : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> x = RandomX(cols, false, rng);
      x[position] = special;
      ExpectRowsMatch(W, x, Int4Definition(W, x), 0, "x[" + std::to_string(position) + "] special");
    }
  }
}

TEST(NeonPackedRowDots, FormatsRegisterTheirNeonKernels) {
  // The tests above reach the NEON kernels through the descriptors; a format that lost its entry would
  // silently fall back to the scalar definition and pass them.
  for (const kernels::WeightFormat* format : {&kernels::kFp8Format, &kernels::kInt4Format}) {
    EXPECT_NE(format->kernels[static_cast<int>(kernels::Isa::kNeon)].row_dots, nullptr) << format->name;
  }
}

// ---- the run-time choice -----------------------------------------------------------------------------

TEST(NeonIsa, IsSupportedAndTheDefaultOnAarch64) {
  EXPECT_TRUE(kernels::IsaSupported(kernels::Isa::kNeon));
  EXPECT_FALSE(kernels::IsaSupported(kernels::Isa::kAvx2));
  const char* env = std::getenv("PLUMB_ISA");
  const std::string requested = env == nullptr ? "" : env;
  EXPECT_EQ(kernels::ActiveIsa(), requested == "scalar" ? kernels::Isa::kScalar : kernels::Isa::kNeon)
      << "PLUMB_ISA=" << requested;
  EXPECT_STREQ(kernels::IsaName(kernels::Isa::kNeon), "neon");
}

}  // namespace
}  // namespace plumb
