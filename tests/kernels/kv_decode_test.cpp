// DecodeKvRow against its definition, DecodeKv (include/plumb/kernels/kv_decode.h): the same bits, NaN
// payloads included, for every code of every KV dtype (all 65,536 FP16 and BF16 codes, all 256 of each FP8
// format), on each variant this build has, at lengths that are not multiples of the 8-element step and at
// odd byte offsets, with FP8 scales that round (so the scale's multiply is checked, not just the decode).
#include "plumb/kernels/kv_decode.h"

#include <gtest/gtest.h>

#include <cstdint>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "support/isa_variants.h"

namespace plumb {
namespace {

using kernels::Isa;

using KvDecodeTest = testing::IsaTest<std::tuple<Isa, KvDtype>>;

// Every code of the dtype once, little-endian, then again shifted by one byte (so a 16-bit dtype sees each
// code at an odd address too).
std::vector<std::uint8_t> EveryCode(KvDtype dtype, int& count) {
  const std::size_t bytes = KvDtypeBytes(dtype);
  count = bytes == 1 ? 256 : 65536;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(count) * bytes + 1);
  for (int c = 0; c < count; ++c) {
    for (std::size_t b = 0; b < bytes; ++b)
      codes[1 + c * bytes + b] = static_cast<std::uint8_t>(c >> (8 * b));
  }
  return codes;
}

// Decodes n elements from `at` through both paths and compares the bits; returns the first difference.
std::string Compare(KvDtype dtype, const std::uint8_t* at, int n, float scale) {
  std::vector<float> expected(static_cast<std::size_t>(n) + 1, -1.0f), actual(expected);
  DecodeKv(dtype, at, n, scale, expected.data());
  kernels::DecodeKvRow(dtype, at, n, scale, actual.data());
  for (int i = 0; i <= n; ++i) {
    std::uint32_t e = 0, a = 0;
    std::memcpy(&e, &expected[i], 4);
    std::memcpy(&a, &actual[i], 4);
    if (e != a) {
      return "element " + std::to_string(i) + " of " + std::to_string(n) + " (scale " +
             std::to_string(scale) + "): definition bits " + std::to_string(e) + ", variant " +
             std::to_string(a);
    }
  }
  return "";
}

TEST_P(KvDecodeTest, EveryCodeDecodesToTheDefinitionsBits) {
  const KvDtype dtype = std::get<1>(GetParam());
  int count = 0;
  const std::vector<std::uint8_t> codes = EveryCode(dtype, count);
  // Scales that round the product, large and tiny ones (a product can overflow or go subnormal), a negative.
  for (const float scale : {1.0f, 0.0372f, 3.1e-3f, 17.25f, -0.75f, 300.0f, 1e-35f, 0x1p119f, 0x1p121f}) {
    EXPECT_EQ(Compare(dtype, codes.data() + 1, count, scale), "") << KvDtypeName(dtype);
  }
}

TEST_P(KvDecodeTest, LengthsAndOffsetsThatAreNotWholeSteps) {
  const KvDtype dtype = std::get<1>(GetParam());
  int count = 0;
  const std::vector<std::uint8_t> codes = EveryCode(dtype, count);
  const std::size_t bytes = KvDtypeBytes(dtype);
  // Offsets: the start, odd bytes (a 16-bit dtype misaligned), and near the top codes (NaN, inf, the
  // largest), every stretch inside the buffer.
  const std::size_t top = (static_cast<std::size_t>(count) - 40) * bytes;
  for (int n = 0; n <= 37; ++n) {
    for (const std::size_t offset : {std::size_t{0}, std::size_t{1}, 3 * bytes + 1, top, top + 1}) {
      ASSERT_EQ(Compare(dtype, codes.data() + offset, n, 0.37f), "")
          << KvDtypeName(dtype) << ", n " << n << ", byte offset " << offset;
    }
  }
}

// DecodeKvRows (one call for a tile of rows, the attention kernels' way) against DecodeKv row by row: every
// code, rows a stride apart with bytes between them that must not be read into the output, row lengths that
// take the whole-register paths (64, 128) and ones that do not (37), and scales with and without the E4M3
// shortcut.
TEST_P(KvDecodeTest, RowsAStrideApartAreEachRowsDefinition) {
  const KvDtype dtype = std::get<1>(GetParam());
  int count = 0;
  const std::vector<std::uint8_t> codes = EveryCode(dtype, count);
  const std::size_t bytes = KvDtypeBytes(dtype);
  const kernels::DecodeKvRowsFn rows_of = kernels::ActiveDecodeKvRows();
  constexpr int rows = 16;
  for (const int n : {37, 64, 128}) {
    const std::size_t stride = n * bytes + 3 * bytes + 1;  // a gap, and rows at odd addresses
    // The codes over and over (so every row holds NaNs, infinities and subnormals wherever they fall).
    std::vector<std::uint8_t> buffer(rows * stride);
    for (std::size_t j = 0; j < buffer.size(); ++j) buffer[j] = codes[1 + j % (codes.size() - 1)];
    for (const float scale : {0.0372f, -0.75f, 0x1p121f}) {
      std::vector<float> expected(static_cast<std::size_t>(rows) * n), actual(expected.size(), -1.0f);
      for (int r = 0; r < rows; ++r) {
        DecodeKv(dtype, buffer.data() + r * stride, n, scale,
                 expected.data() + static_cast<std::size_t>(r) * n);
      }
      rows_of(dtype, buffer.data(), stride, rows, n, scale, actual.data());
      ASSERT_EQ(std::memcmp(expected.data(), actual.data(), expected.size() * sizeof(float)), 0)
          << KvDtypeName(dtype) << ", n " << n << ", scale " << scale;
    }
  }
}

#if defined(__x86_64__)
// With the denormals-are-zero bit of MXCSR set (a caller's choice plumb cannot rule out), a variant that
// built E4M3's subnormal codes from FP32 subnormals (the bits in place, times 2^120: fewer instructions, but
// measured slower on Zen 4, whose multiplier takes an assist on subnormal inputs) would read them as zeros;
// the definition (a table of normal FP32 values times the scale) does not.
TEST_P(KvDecodeTest, DenormalsAreZeroModeDoesNotChangeTheBits) {
  const KvDtype dtype = std::get<1>(GetParam());
  int count = 0;
  const std::vector<std::uint8_t> codes = EveryCode(dtype, count);
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x40u);  // DAZ
  const std::string difference = Compare(dtype, codes.data() + 1, count, 0.5f);
  _mm_setcsr(saved);
  EXPECT_EQ(difference, "") << KvDtypeName(dtype);
}
#endif

INSTANTIATE_TEST_SUITE_P(AllDtypes, KvDecodeTest,
                         ::testing::Combine(::testing::ValuesIn(testing::kIsasOfThisBuild),
                                            ::testing::Values(KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16,
                                                              KvDtype::kFp8E4M3, KvDtype::kFp8E5M2)),
                         [](const auto& param_info) {
                           std::string name = std::string(kernels::IsaName(std::get<0>(param_info.param))) +
                                              "_" + std::string(KvDtypeName(std::get<1>(param_info.param)));
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace plumb
