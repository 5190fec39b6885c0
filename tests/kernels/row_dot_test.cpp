// RowDot / RowDots against their definition (include/plumb/kernels/row_dot.h):
//   RowDot(type, row, x, n) == scalar::Dot(DequantizeRow(type, row, n), x, n), bit for bit,
// for every type, on each variant this CPU can run (scalar, AVX2, AVX-512 / NEON in one process), on many
// lengths (odd ones for F32 / F16 / BF16, whose rows need not fill a group of 8), unaligned rows and x, and
// two kinds of x: unit normals, and a mix of signs and magnitudes from 2^-125 (products go subnormal) to
// 2^40. DequantizeRow itself is checked against gguf-py in tests/formats/gguf_blocks_test.cpp.
#include "plumb/kernels/row_dot.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/dtype.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/scalar.h"
#include "support/isa_variants.h"

namespace plumb {
namespace {

using kernels::Isa;

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                           GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

std::string Name(GgmlType type) {
  return std::string(GgmlTypeName(type));
}

bool IsPlain(GgmlType type) {
  return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
}

// A finite f16 scale: usually ±2^u for u in [-10, 6], sometimes 0 or a subnormal.
std::uint16_t RandomScale(std::mt19937& rng) {
  const unsigned kind = rng() % 16;
  if (kind == 0) return 0;
  if (kind == 1) return static_cast<std::uint16_t>(1 + rng() % 0x3FF);
  std::uniform_real_distribution<float> exponent(-10.0f, 6.0f);
  const float magnitude = std::exp2(exponent(rng));
  return F32ToF16(rng() % 2 ? -magnitude : magnitude);
}

// A finite plain weight: ±2^u for u in [-30, 15] (F16 rounds the smallest to subnormals or zero; 2^15 is
// within its range).
float RandomPlainWeight(std::mt19937& rng) {
  std::uniform_real_distribution<float> exponent(-30.0f, 15.0f);
  const float magnitude = std::exp2(exponent(rng));
  return rng() % 2 ? -magnitude : magnitude;
}

// n elements of `type`: random bytes with finite scales, or random finite plain values.
std::vector<std::uint8_t> RandomRow(GgmlType type, std::int64_t n, std::mt19937& rng) {
  std::vector<std::uint8_t> row(GgmlRowBytes(type, n));
  if (IsPlain(type)) {
    for (std::int64_t i = 0; i < n; ++i) {
      const float w = RandomPlainWeight(rng);
      if (type == GgmlType::F32) {
        std::memcpy(row.data() + 4 * i, &w, 4);
      } else {
        const std::uint16_t code = type == GgmlType::F16 ? F32ToF16(w) : F32ToBF16(w);
        row[2 * i] = static_cast<std::uint8_t>(code);
        row[2 * i + 1] = static_cast<std::uint8_t>(code >> 8);
      }
    }
    return row;
  }
  for (std::uint8_t& byte : row) byte = static_cast<std::uint8_t>(rng());
  const GgmlTypeTraits traits = GgmlTraits(type);
  for (std::size_t block = 0; block < row.size(); block += traits.block_bytes) {
    for (int offset : BlockScaleOffsets(type)) {  // finite scales: the tests want finite rows
      const std::uint16_t code = RandomScale(rng);
      row[block + offset] = static_cast<std::uint8_t>(code);
      row[block + offset + 1] = static_cast<std::uint8_t>(code >> 8);
    }
  }
  return row;
}

enum class XKind { kNormal, kWide };

std::vector<float> RandomX(std::int64_t n, XKind kind, std::mt19937& rng) {
  std::vector<float> x(n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-125.0f, 40.0f);
  for (float& v : x) {
    if (kind == XKind::kNormal) {
      v = normal(rng);
    } else {
      const unsigned pick = rng() % 8;
      v = pick == 0 ? 0.0f : std::exp2(exponent(rng));
      if (rng() % 2) v = -v;
    }
  }
  return x;
}

// The definition, computed by the two functions it is defined by.
float Definition(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n) {
  std::vector<float> w(n);
  DequantizeRow(type, row, w.data(), n);
  return kernels::scalar::Dot(w.data(), x, static_cast<int>(n));
}

std::uint32_t Bits(float v) {
  return std::bit_cast<std::uint32_t>(v);
}

std::vector<std::int64_t> Lengths(GgmlType type) {
  const int block = GgmlTraits(type).block_elements;
  std::vector<std::int64_t> lengths;
  if (block == 1) {
    for (std::int64_t n = 1; n <= 67; ++n) lengths.push_back(n);
  }
  for (std::int64_t n : {32, 64, 96, 160, 576, 1536, 4096 + 32}) {
    if (n % block == 0 && (block != 1 || n > 67)) lengths.push_back(n);
  }
  if (block == 256) {
    for (std::int64_t n : {256, 768, 4096 + 256}) lengths.push_back(n);
  }
  return lengths;
}

// ---------------------------------------------------------------------------------------------------------

class RowDotTest : public testing::IsaTest<std::tuple<Isa, GgmlType>> {
 protected:
  GgmlType type() const { return std::get<1>(GetParam()); }
};

TEST_P(RowDotTest, IsBitwiseTheDefinitionForEveryLength) {
  std::mt19937 rng(1234u + static_cast<std::uint32_t>(type()));
  for (std::int64_t n : Lengths(type())) {
    for (XKind kind : {XKind::kNormal, XKind::kWide}) {
      for (int trial = 0; trial < 3; ++trial) {
        const std::vector<std::uint8_t> row = RandomRow(type(), n, rng);
        const std::vector<float> x = RandomX(n, kind, rng);
        const float expected = Definition(type(), row.data(), x.data(), n);
        ASSERT_TRUE(std::isfinite(expected)) << "test data should stay finite, n = " << n;
        const float got = kernels::RowDot(type(), row.data(), x.data(), n);
        ASSERT_EQ(Bits(got), Bits(expected))
            << Name(type()) << " n = " << n << " x kind " << static_cast<int>(kind) << ": got " << got
            << ", definition " << expected;
        ASSERT_EQ(Bits(kernels::scalar::RowDot(type(), row.data(), x.data(), n)), Bits(expected)) << n;
      }
    }
  }
}

TEST_P(RowDotTest, RowDotsIsRowDotOfEachRowWithAnyStrideAndAlignment) {
  std::mt19937 rng(99u + static_cast<std::uint32_t>(type()));
  const int n_rows = 15;  // groups of eight and of four (AVX-512 Q8_0 takes both) and a remainder of three
  for (std::int64_t n : {Lengths(type()).front(), Lengths(type()).back()}) {
    const std::size_t row_bytes = GgmlRowBytes(type(), n);
    for (std::size_t padding : {std::size_t{0}, std::size_t{5}}) {
      const std::size_t stride = row_bytes + padding;
      // One byte in, so rows and every block sit at odd addresses; x one float in, off any 32-byte line.
      std::vector<std::uint8_t> storage(1 + stride * n_rows);
      std::vector<float> expected(n_rows);
      std::vector<float> x_storage(n + 1);
      const std::vector<float> x = RandomX(n, XKind::kNormal, rng);
      std::memcpy(x_storage.data() + 1, x.data(), n * sizeof(float));
      for (int r = 0; r < n_rows; ++r) {
        const std::vector<std::uint8_t> row = RandomRow(type(), n, rng);
        std::memcpy(storage.data() + 1 + r * stride, row.data(), row_bytes);
        expected[r] = Definition(type(), row.data(), x.data(), n);
      }
      std::vector<float> y(n_rows, -1.0f);
      kernels::RowDots(type(), storage.data() + 1, stride, n_rows, x_storage.data() + 1, n, y.data());
      for (int r = 0; r < n_rows; ++r) {
        EXPECT_EQ(Bits(y[r]), Bits(expected[r])) << Name(type()) << " n = " << n << " row " << r;
        EXPECT_EQ(Bits(kernels::RowDot(type(), storage.data() + 1 + r * stride, x_storage.data() + 1, n)),
                  Bits(expected[r]))
            << "row " << r;
      }
    }
  }
}

TEST_P(RowDotTest, InfinitiesAndNaNsPropagateAsInTheDefinition) {
  // Not bitwise: which NaN payload survives an add of two NaNs is the compiler's choice of operand order.
  std::mt19937 rng(7u);
  const std::int64_t n = GgmlTraits(type()).block_elements == 256 ? 256 : 64;
  std::vector<std::uint8_t> row = RandomRow(type(), n, rng);
  const std::vector<float> x = RandomX(n, XKind::kNormal, rng);
  std::vector<float> inf_x = x;
  inf_x[5] = std::numeric_limits<float>::infinity();
  const float expected = Definition(type(), row.data(), inf_x.data(), n);
  const float got = kernels::RowDot(type(), row.data(), inf_x.data(), n);
  EXPECT_EQ(std::isnan(got), std::isnan(expected));
  if (!std::isnan(expected)) {
    EXPECT_EQ(Bits(got), Bits(expected));
  }
  std::vector<float> nan_x = x;
  nan_x[n - 1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(kernels::RowDot(type(), row.data(), nan_x.data(), n)));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RowDotTest,
                         ::testing::Combine(::testing::ValuesIn(plumb::testing::kIsasOfThisBuild),
                                            ::testing::ValuesIn(kTypes)),
                         [](const ::testing::TestParamInfo<std::tuple<Isa, GgmlType>>& param_info) {
                           return std::string(kernels::IsaName(std::get<0>(param_info.param))) + "_" +
                                  Name(std::get<1>(param_info.param));
                         });

// ---------------------------------------------------------------------------------------------------------

TEST(RowDot, HasRowDotIsExactlyCanDequantize) {
  for (std::uint32_t id = 0; id < 64; ++id) {
    const auto type = static_cast<GgmlType>(id);
    EXPECT_EQ(kernels::HasRowDot(type), CanDequantize(type)) << "id " << id;
  }
  EXPECT_FALSE(kernels::HasRowDot(static_cast<GgmlType>(999)));
}

TEST(RowDot, ActiveIsaIsASupportedOne) {
  EXPECT_TRUE(kernels::IsaSupported(Isa::kScalar));
  EXPECT_TRUE(kernels::IsaSupported(kernels::ActiveIsa()));
  // Run with PLUMB_ISA=scalar, the whole suite exercises the definition only (and this checks it took).
  if (const char* env = std::getenv("PLUMB_ISA"); env != nullptr && std::string(env) == "scalar") {
    EXPECT_EQ(kernels::ActiveIsa(), Isa::kScalar);
  }
#if !defined(__x86_64__)
  EXPECT_FALSE(kernels::IsaSupported(Isa::kAvx2));
  EXPECT_THROW(kernels::SetIsa(Isa::kAvx2), Error);
  EXPECT_FALSE(kernels::IsaSupported(Isa::kAvx512));
  EXPECT_THROW(kernels::SetIsa(Isa::kAvx512), Error);
#endif
  // AVX-512 kernels call AVX2 ones for the types they leave to them.
  if (kernels::IsaSupported(Isa::kAvx512)) {
    EXPECT_TRUE(kernels::IsaSupported(Isa::kAvx2));
  }
  EXPECT_STREQ(kernels::IsaName(Isa::kAvx512), "avx512");
#if !defined(__aarch64__)
  EXPECT_FALSE(kernels::IsaSupported(Isa::kNeon));
  EXPECT_THROW(kernels::SetIsa(Isa::kNeon), Error);
#endif
}

TEST(RowDot, AnUnsupportedVariantSaysWhatTheMachineLacks) {
  // The reason a skipped test and a refused PLUMB_ISA give: CPU features by name, or the build's target.
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    const std::string missing = kernels::IsaMissing(isa);
    EXPECT_EQ(missing.empty(), kernels::IsaSupported(isa)) << kernels::IsaName(isa);
    if (missing.empty()) continue;
#if defined(__x86_64__)
    const std::string expected_start = isa == Isa::kNeon ? "not an aarch64 build" : "CPU lacks ";
#else
    const std::string expected_start = isa == Isa::kNeon ? "CPU lacks " : "not an x86-64 build";
#endif
    EXPECT_EQ(missing.rfind(expected_start, 0), 0u) << kernels::IsaName(isa) << ": " << missing;
    try {
      kernels::SetIsa(isa);
      ADD_FAILURE() << "SetIsa(" << kernels::IsaName(isa) << ") did not throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    }
  }
#if defined(__x86_64__)
  // Each named feature is one this CPU really lacks (AVX-512 needs AVX2's features too).
  const std::string avx512_missing = kernels::IsaMissing(Isa::kAvx512);
  // (__builtin_cpu_supports takes only a string literal.)
  const bool has[] = {__builtin_cpu_supports("avx512f") != 0, __builtin_cpu_supports("avx512bw") != 0,
                      __builtin_cpu_supports("avx512vl") != 0};
  const char* names[] = {"avx512f", "avx512bw", "avx512vl"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(avx512_missing.find(names[i]) == std::string::npos, has[i])
        << names[i] << " in '" << avx512_missing << "'";
  }
#endif
}

TEST(RowDot, WithoutPlumbIsaTheWidestSupportedVariantRuns) {
  if (std::getenv("PLUMB_ISA") != nullptr) GTEST_SKIP() << "PLUMB_ISA is set, so it chose the variant";
  Isa widest = Isa::kScalar;
  for (Isa isa : {Isa::kNeon, Isa::kAvx2, Isa::kAvx512}) {
    if (kernels::IsaSupported(isa)) widest = isa;
  }
  EXPECT_EQ(kernels::ActiveIsa(), widest) << kernels::IsaName(kernels::ActiveIsa());
}

std::string ErrorOf(GgmlType type, std::int64_t n) {
  std::vector<std::uint8_t> row(4096);
  std::vector<float> x(1024);
  try {
    kernels::RowDot(type, row.data(), x.data(), n);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RowDot, PartialBlockIsAnErrorNamingTypeBlockAndN) {
  const std::string message = ErrorOf(GgmlType::Q4_1, 100);
  EXPECT_NE(message.find("RowDot"), std::string::npos) << message;
  EXPECT_NE(message.find("Q4_1"), std::string::npos) << message;
  EXPECT_NE(message.find("32-element blocks"), std::string::npos) << message;
  EXPECT_NE(message.find("100"), std::string::npos) << message;
  EXPECT_NE(ErrorOf(GgmlType::Q4_K, 512 + 32).find("256"), std::string::npos);
  EXPECT_NE(ErrorOf(GgmlType::F16, -8).find("negative"), std::string::npos);
}

TEST(RowDot, UnsupportedTypeIsAnErrorNamingIt) {
  const std::string message = ErrorOf(GgmlType::IQ4_NL, 32);
  EXPECT_NE(message.find("IQ4_NL"), std::string::npos) << message;
  EXPECT_NE(message.find("supported"), std::string::npos) << message;
  EXPECT_NE(ErrorOf(static_cast<GgmlType>(999), 32).find("999"), std::string::npos);
  std::vector<std::uint8_t> row(64);
  std::vector<float> x(32), y(1);
  EXPECT_THROW(kernels::RowDots(GgmlType::Q8_1, row.data(), 40, 1, x.data(), 32, y.data()), Error);
  EXPECT_THROW(kernels::RowDots(GgmlType::Q8_0, row.data(), 34, -1, x.data(), 32, y.data()), Error);
  EXPECT_THROW(kernels::scalar::RowDot(GgmlType::Q8_0, row.data(), x.data(), 31), Error);
}

TEST(RowDot, EmptyRowIsZero) {
  for (GgmlType type : kTypes) EXPECT_EQ(Bits(kernels::RowDot(type, nullptr, nullptr, 0)), Bits(0.0f));
}

}  // namespace

// Readable parameter names in gtest's output.
void PrintTo(GgmlType type, std::ostream* out) {
  *out << GgmlTypeName(type);
}
namespace kernels {
void PrintTo(Isa isa, std::ostream* out) {
  *out << IsaName(isa);
}
}  // namespace kernels
}  // namespace plumb
