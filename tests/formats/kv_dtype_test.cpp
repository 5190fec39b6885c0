// KvDtype: the one encode/decode every KV cache and attention kernel uses (docs/kv-cache.md, "Element
// types"). Every value exact in a dtype round-trips bit for bit; FP8 is F32ToFp8(x / scale, SATFINITE) on
// the way in (a division, as vLLM's scaled_vec_conversion) and code · scale on the way out.
#include "plumb/formats/kv_dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "plumb/formats/dtype.h"
#include "plumb/formats/fp8.h"
#include "support/errors.h"

namespace plumb {
namespace {

constexpr KvDtype kAll[] = {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kFp8E4M3,
                            KvDtype::kFp8E5M2};

Fp8Format FormatOf(KvDtype dtype) {
  return dtype == KvDtype::kFp8E4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2;
}

// Encodes then decodes n floats; returns the decoded values.
std::vector<float> RoundTrip(KvDtype dtype, const std::vector<float>& x, float scale) {
  std::vector<std::uint8_t> stored(x.size() * KvDtypeBytes(dtype));  // [n] elements of dtype
  EncodeKv(dtype, x.data(), static_cast<int>(x.size()), scale, stored.data());
  std::vector<float> back(x.size());
  DecodeKv(dtype, stored.data(), static_cast<int>(x.size()), scale, back.data());
  return back;
}

void ExpectBitwise(const std::vector<float>& want, const std::vector<float>& got, const char* what) {
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(want[i]), std::bit_cast<std::uint32_t>(got[i]))
        << what << " element " << i << ": " << want[i] << " came back as " << got[i];
  }
}

TEST(KvDtype, NamesSizesAndParsing) {
  const std::size_t bytes[] = {4, 2, 2, 1, 1};
  for (std::size_t i = 0; i < std::size(kAll); ++i) {
    EXPECT_EQ(KvDtypeBytes(kAll[i]), bytes[i]);
    EXPECT_EQ(ParseKvDtype(KvDtypeName(kAll[i])), kAll[i]);
    EXPECT_EQ(IsFp8(kAll[i]), i >= 3);
  }
  EXPECT_EQ(KvDtypeName(KvDtype::kFp8E4M3), "fp8-e4m3");
  for (const char* bad : {"", "F32", "fp8", "e4m3", "float16", "f32 "}) {
    std::string quoted = "'";  // built by appends: g++ 12 warns (-Wrestrict) on "'" + std::string(bad)
    quoted.append(bad).append("'");
    testing::ExpectMessageHas(testing::ErrorOf([&] { ParseKvDtype(bad); }),
                              {quoted, "f32, f16, bf16, fp8-e4m3 or fp8-e5m2"});
  }
}

TEST(KvDtype, F32KeepsEveryBitPattern) {
  std::mt19937 rng(1);
  std::vector<float> x;
  for (int i = 0; i < 4096; ++i) x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  ExpectBitwise(x, RoundTrip(KvDtype::kF32, x, 3.0f), "f32");  // the scale is ignored
}

// Every finite F16 / BF16 value (all 65536 codes but the NaNs) comes back as itself.
TEST(KvDtype, F16AndBF16RoundTripEveryValueTheyHold) {
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kBF16}) {
    std::vector<float> x;
    for (std::uint32_t code = 0; code < 65536; ++code) {
      const auto bits = static_cast<std::uint16_t>(code);
      const float v = dtype == KvDtype::kF16 ? F16ToF32(bits) : BF16ToF32(bits);
      if (!std::isnan(v)) x.push_back(v);
    }
    ExpectBitwise(x, RoundTrip(dtype, x, 0.5f), KvDtypeName(dtype).data());
  }
}

// Other values: exactly F32ToF16 / F32ToBF16 (round to nearest even).
TEST(KvDtype, F16AndBF16EncodeAsTheFormatConversions) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
  std::vector<float> x;
  for (int i = 0; i < 4096; ++i) x.push_back((rng() % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng)));
  x.push_back(1e6f);                                         // beyond F16's 65504: infinity
  std::vector<std::uint16_t> f16(x.size()), bf16(x.size());  // [n] codes
  EncodeKv(KvDtype::kF16, x.data(), static_cast<int>(x.size()), 1.0f, f16.data());
  EncodeKv(KvDtype::kBF16, x.data(), static_cast<int>(x.size()), 1.0f, bf16.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(f16[i], F32ToF16(x[i])) << x[i];
    ASSERT_EQ(bf16[i], F32ToBF16(x[i])) << x[i];
  }
}

// Every finite FP8 value times a power-of-two scale comes back as itself: x / scale is the FP8 value
// exactly. (E5M2's ±inf codes are left out: SATFINITE turns an infinite input into ±57344.)
TEST(KvDtype, Fp8RoundTripsEveryFiniteValueTimesAPowerOfTwoScale) {
  for (KvDtype dtype : {KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
    for (float scale : {1.0f, 0.125f, 4.0f, 1024.0f}) {
      std::vector<float> x;
      for (int code = 0; code < 256; ++code) {
        const float v = Fp8ToF32(static_cast<std::uint8_t>(code), FormatOf(dtype));
        if (std::isfinite(v)) x.push_back(v * scale);
      }
      ExpectBitwise(x, RoundTrip(dtype, x, scale), KvDtypeName(dtype).data());
    }
  }
}

// Any value and any scale: the stored code is F32ToFp8(x / scale, SATFINITE) and the read value code · scale.
TEST(KvDtype, Fp8IsTheSaturatingConversionOfXOverScale) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> exponent(-24.0f, 24.0f);
  for (KvDtype dtype : {KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
    const Fp8Format format = FormatOf(dtype);
    for (float scale : {1.0f, 0.37f, 3.1f, 1e-3f}) {
      std::vector<float> x;
      for (int i = 0; i < 2048; ++i) x.push_back((rng() % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng)));
      for (float big : {1e6f, -1e9f, 448.0f * scale * 1.5f, 57344.0f * scale * 2.0f}) x.push_back(big);
      x.push_back(0.0f);
      x.push_back(-0.0f);
      std::vector<std::uint8_t> codes(x.size());  // [n]
      EncodeKv(dtype, x.data(), static_cast<int>(x.size()), scale, codes.data());
      std::vector<float> back(x.size());
      DecodeKv(dtype, codes.data(), static_cast<int>(x.size()), scale, back.data());
      for (std::size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(codes[i], F32ToFp8(x[i] / scale, format, Fp8Overflow::kSaturate)) << x[i] << " / " << scale;
        ASSERT_EQ(back[i], Fp8ToF32(codes[i], format) * scale);
        ASSERT_TRUE(std::isfinite(back[i]));  // saturating: never an infinity or NaN from a finite input
      }
    }
  }
  // Saturation by hand: ±448 (E4M3 0x7E / 0xFE) and ±57344 (E5M2 0x7B / 0xFB).
  const float x[] = {1e6f, -1e6f};
  std::uint8_t codes[2];
  EncodeKv(KvDtype::kFp8E4M3, x, 2, 2.0f, codes);
  EXPECT_EQ(codes[0], 0x7E);
  EXPECT_EQ(codes[1], 0xFE);
  EncodeKv(KvDtype::kFp8E5M2, x, 2, 2.0f, codes);
  EXPECT_EQ(codes[0], 0x7B);
  EXPECT_EQ(codes[1], 0xFB);
}

// A division, not a multiplication by 1 / scale: the two differ in the last FP32 bit now and then, and
// where that bit decides an FP8 rounding tie the code differs. Such a case is found by search and checked.
TEST(KvDtype, Fp8DividesByTheScale) {
  int found = 0;
  for (int i = 1; i < 4000 && found < 5; ++i) {
    const float scale = 1.0f + static_cast<float>(i) / 4096.0f;
    // Around scale · 1.0625, the tie between E4M3's 1 and 1.125.
    float x = std::nextafter(scale * 1.0625f, 0.0f);
    for (int step = 0; step < 3; ++step, x = std::nextafter(x, 2.0f * x)) {
      const std::uint8_t divided = F32ToFp8(x / scale, Fp8Format::kE4M3, Fp8Overflow::kSaturate);
      const std::uint8_t multiplied = F32ToFp8(x * (1.0f / scale), Fp8Format::kE4M3, Fp8Overflow::kSaturate);
      if (divided == multiplied) continue;
      std::uint8_t code;
      EncodeKv(KvDtype::kFp8E4M3, &x, 1, scale, &code);
      EXPECT_EQ(code, divided) << x << " / " << scale;
      ++found;
    }
  }
  EXPECT_GT(found, 0) << "no value where x / scale and x · (1 / scale) give different FP8 codes";
}

}  // namespace
}  // namespace plumb
