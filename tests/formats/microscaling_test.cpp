// The microscaled formats' layout and quantizers (formats/microscaling.h; docs/formats.md "Microscaled
// formats"): hand-checked blocks for each scheme's scale rule, and, on random matrices, every scale against
// the rule recomputed with frexp and every element against a nearest-value search over the block's grid.
#include "plumb/formats/microscaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/fp8.h"

namespace plumb {
namespace {

std::uint8_t Code(const MicroscaledMatrix& m, int r, int c) {
  const std::size_t row_bytes = MicroscaledRowBytes(m.scheme, m.cols);
  const std::uint8_t* row = m.codes.data() + r * row_bytes;
  if (!MicroscalingElementIsFp4(m.scheme)) return row[c];
  return static_cast<std::uint8_t>((row[c / 2] >> (4 * (c % 2))) & 0xF);
}

std::uint8_t Scale(const MicroscaledMatrix& m, int r, int c) {
  return m.scales[r * MicroscaledBlocks(m.scheme, m.cols) + c / MicroscalingBlockSize(m.scheme)];
}

TEST(Microscaling, SchemesHaveTheirLayouts) {
  EXPECT_EQ(MicroscalingBlockSize(MicroscalingScheme::kMxfp4), 32);
  EXPECT_EQ(MicroscalingBlockSize(MicroscalingScheme::kNvfp4), 16);
  EXPECT_EQ(MicroscaledRowBytes(MicroscalingScheme::kMxfp4, 45), 23u);
  EXPECT_EQ(MicroscaledRowBytes(MicroscalingScheme::kMxfp8E5M2, 45), 45u);
  EXPECT_EQ(MicroscaledBlocks(MicroscalingScheme::kNvfp4, 45), 3);
  EXPECT_EQ(MicroscaledBlocks(MicroscalingScheme::kMxfp8E4M3, 64), 2);
  for (const MicroscalingScheme scheme : kMicroscalingSchemes) {
    EXPECT_EQ(ParseMicroscalingScheme(MicroscalingSchemeName(scheme)), scheme);
  }
  try {
    ParseMicroscalingScheme("mxfp6");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mxfp6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nvfp4"), std::string::npos) << e.what();
  }
}

TEST(Microscaling, Mxfp4BlocksFollowTheOcpRule) {
  // Block 0: amax 1 = 2^0, so X = 2^(0 − 2) (code 125) and 1 is 4 · X (FP4 code 0x6); −0.3 / X = −1.2,
  // nearest −1 (0xA). Block 1 (a partial one, 3 elements): amax 7, ⌊log2 7⌋ = 2, X = 2^0 (code 127); 7
  // saturates to 6 (0x7), 5 is the tie between 4 and 6 and goes to 4 (0x6, even), 0.2 rounds to 0.
  std::vector<float> w(35, 0.0f);
  w[0] = 1.0f;
  w[1] = -0.3f;
  w[32] = 7.0f;
  w[33] = 5.0f;
  w[34] = 0.2f;
  const MicroscaledMatrix m = QuantizeMicroscaled(w.data(), 1, 35, MicroscalingScheme::kMxfp4);
  ASSERT_EQ(m.scales.size(), 2u);
  EXPECT_EQ(m.scales[0], 125);
  EXPECT_EQ(m.scales[1], 127);
  EXPECT_EQ(Code(m, 0, 0), 0x6);
  EXPECT_EQ(Code(m, 0, 1), 0xA);
  EXPECT_EQ(Code(m, 0, 2), 0x0);
  EXPECT_EQ(Code(m, 0, 32), 0x7);
  EXPECT_EQ(Code(m, 0, 33), 0x6);
  EXPECT_EQ(Code(m, 0, 34), 0x0);
  EXPECT_EQ(m.codes.size(), 18u);
  EXPECT_EQ(m.codes.back() >> 4, 0) << "the odd row's unused high nibble";
  EXPECT_EQ(m.tensor_scale, 1.0f);
}

TEST(Microscaling, Mxfp8AndNvfp4HandCheckedBlocks) {
  // MXFP8 E4M3: amax 1, X = 2^(0 − 8) (code 119); 1 / X = 256, E4M3 0x78.
  const float one = 1.0f;
  const MicroscaledMatrix e4m3 = QuantizeMicroscaled(&one, 1, 1, MicroscalingScheme::kMxfp8E4M3);
  EXPECT_EQ(e4m3.scales[0], 119);
  EXPECT_EQ(e4m3.codes[0], 0x78);
  // NVFP4: the tensor's amax 2688 = 6 · 448 gives tensor scale 1; its block's scale is 2688 / 6 = 448 (E4M3
  // 0x7E) and the element 2688 / 448 = 6 (0x7). The second block, amax 3, has scale 0.5 (E4M3 0x30) and 3 /
  // 0.5 = 6.
  std::vector<float> w(32, 0.0f);
  w[0] = 2688.0f;
  w[16] = 3.0f;
  w[17] = -1.0f;  // −1 / 0.5 = −2: 0xC
  const MicroscaledMatrix nv = QuantizeMicroscaled(w.data(), 1, 32, MicroscalingScheme::kNvfp4);
  EXPECT_EQ(nv.tensor_scale, 1.0f);
  EXPECT_EQ(nv.scales[0], 0x7E);
  EXPECT_EQ(nv.scales[1], 0x30);
  EXPECT_EQ(Code(nv, 0, 0), 0x7);
  EXPECT_EQ(Code(nv, 0, 16), 0x7);
  EXPECT_EQ(Code(nv, 0, 17), 0xC);
  // All zeros: every code and scale 0, and NVFP4's tensor scale 1.
  const std::vector<float> zeros(20, 0.0f);
  for (const MicroscalingScheme scheme : kMicroscalingSchemes) {
    const MicroscaledMatrix z = QuantizeMicroscaled(zeros.data(), 2, 10, scheme);
    for (const std::uint8_t c : z.codes) EXPECT_EQ(c, 0) << MicroscalingSchemeName(scheme);
    for (const std::uint8_t s : z.scales) EXPECT_EQ(s, 0) << MicroscalingSchemeName(scheme);
    EXPECT_EQ(z.tensor_scale, 1.0f);
  }
}

// The scale by the rule, recomputed with frexp: MX: ⌊log2 amax⌋ − emax, biased by 127, clamped to 0 (|x| =
// f · 2^e with f in [0.5, 1) gives ⌊log2 |x|⌋ = e − 1). Then every element's decoded value is the block
// grid's nearest to w (the grid: every finite element value times the decoded scale(s); ties either way,
// their direction being the element conversion's, tested against CUDA's).
TEST(Microscaling, RandomMatricesHaveTheRulesScalesAndNearestElements) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (const MicroscalingScheme scheme : kMicroscalingSchemes) {
    const int rows = 5, cols = 77;
    std::vector<float> w(rows * cols);
    for (int r = 0; r < rows; ++r) {
      const int e = exponent(rng);  // rows of very different magnitudes
      for (int c = 0; c < cols; ++c) w[r * cols + c] = std::ldexp(normal(rng), e);
    }
    const MicroscaledMatrix m = QuantizeMicroscaled(w.data(), rows, cols, scheme);
    const bool fp4 = MicroscalingElementIsFp4(scheme);
    const int block = MicroscalingBlockSize(scheme);
    const int emax = fp4 ? 2 : scheme == MicroscalingScheme::kMxfp8E5M2 ? 15 : 8;
    const int element_codes = fp4 ? 16 : 256;
    for (int r = 0; r < rows; ++r) {
      for (int c0 = 0; c0 < cols; c0 += block) {
        const int n = std::min(block, cols - c0);
        double amax = 0;
        for (int i = 0; i < n; ++i)
          amax = std::max(amax, std::fabs(static_cast<double>(w[r * cols + c0 + i])));
        const std::uint8_t s = Scale(m, r, c0);
        double scale;
        if (scheme == MicroscalingScheme::kNvfp4) {
          scale = static_cast<double>(Fp8ToF32(s, Fp8Format::kE4M3)) * m.tensor_scale;
        } else {
          int e = 0;
          std::frexp(amax, &e);
          ASSERT_EQ(s, std::max(0, e - 1 + 127 - emax)) << MicroscalingSchemeName(scheme) << " row " << r;
          scale = std::ldexp(1.0, s - 127);
        }
        for (int i = 0; i < n; ++i) {
          const int c = c0 + i;
          const double x = w[r * cols + c];
          const double got = MicroscaledElement(scheme, Code(m, r, c)) * scale;
          double best = INFINITY;
          for (int code = 0; code < element_codes; ++code) {
            const double v = MicroscaledElement(scheme, static_cast<std::uint8_t>(code));
            if (std::isfinite(v)) best = std::min(best, std::fabs(v * scale - x));
          }
          ASSERT_LE(std::fabs(got - x), best * (1 + 1e-12))
              << MicroscalingSchemeName(scheme) << " [" << r << "][" << c << "] = " << x << ", got " << got;
        }
      }
    }
  }
}

TEST(Microscaling, NonFiniteWeightsAreAnErrorNamingTheElement) {
  std::vector<float> w(40, 1.0f);
  w[37] = NAN;
  try {
    QuantizeMicroscaled(w.data(), 2, 20, MicroscalingScheme::kNvfp4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[1][17]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(QuantizeMicroscaled(w.data(), -1, 20, MicroscalingScheme::kMxfp4), Error);
}

}  // namespace
}  // namespace plumb
