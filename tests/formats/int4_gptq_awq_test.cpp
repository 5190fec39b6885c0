// Tests of the GPTQ and AWQ conversions (docs/formats.md "GPTQ and AWQ packings"): small hand-made cases
// whose int32 words are worked out in the comments, round trips of quantized random matrices, the dequantized
// values against GPTQ's / AWQ's own formula read straight from the words, and every refusal.
#include "plumb/formats/int4_gptq_awq.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/dtype.h"
#include "plumb/formats/int4.h"

namespace plumb {
namespace {

std::int32_t Word(std::uint32_t bits) {
  return static_cast<std::int32_t>(bits);
}

void SetCode(Int4Matrix& m, int r, int c, unsigned nibble) {
  std::uint8_t& byte =
      m.codes[static_cast<std::size_t>(r) * Int4RowBytes(m.cols) + static_cast<std::size_t>(c / 2)];
  byte = static_cast<std::uint8_t>((byte & ~(0xFu << (4 * (c % 2)))) | (nibble << (4 * (c % 2))));
}

// The hand-made matrix: N = 8 rows (out), K = 32 columns (in), one group of 32. Code of (n, k) =
// (k + n) mod 16; asym zero of row n = n + 1; scale of row n = n + 1 halved (FP16).
Int4Matrix HandMade(Int4Scheme scheme) {
  Int4Matrix m;
  m.params = {scheme, 32};
  m.rows = 8;
  m.cols = 32;
  m.codes.assign(8 * 16, 0);
  m.scales.resize(8);
  m.zeros.assign(8 * Int4ZeroRowBytes(m.params, 32), 0);
  for (int n = 0; n < 8; ++n) {
    // Sym: the nibble is two's complement, so plumb code nibble (k + n) mod 16 XOR 8 is GPTQ's (k + n)
    // mod 16.
    for (int k = 0; k < 32; ++k)
      SetCode(m, n, k, ((k + n) % 16) ^ (scheme == Int4Scheme::kSymmetric ? 8u : 0u));
    m.scales[n] = F32ToF16(0.5f * static_cast<float>(n + 1));
    if (scheme == Int4Scheme::kAsymmetric)
      m.zeros[n] = static_cast<std::uint8_t>(n + 1);  // group 0: low nibble
    if (scheme == Int4Scheme::kAsymmetricF16Zero) {
      const std::uint16_t z = F32ToF16(static_cast<float>(n + 1));
      std::memcpy(&m.zeros[2 * static_cast<std::size_t>(n)], &z, 2);
    }
  }
  return m;
}

TEST(Gptq, HandMadeAsymmetricWords) {
  const GptqInt4 g = Int4ToGptq(HandMade(Int4Scheme::kAsymmetric));
  ASSERT_EQ(g.qweight.size(), 4u * 8u);  // [K/8 = 4][N = 8]
  ASSERT_EQ(g.qzeros.size(), 1u);        // [K/G = 1][N/8 = 1]
  ASSERT_EQ(g.scales.size(), 8u);
  // Word [w][n] holds k = 8w .. 8w+7, element k in bits 4·(k mod 8): nibble j = (8w + j + n) mod 16.
  // [0][0]: nibbles 0,1,..,7 -> 0x76543210.       [0][1]: 1,2,..,8 -> 0x87654321.
  // [1][0]: k = 8..15 -> 8,9,..,15 -> 0xFEDCBA98.  [3][3]: k = 24..31, +3 = 27..34 mod 16 = B,C,D,E,F,0,1,2
  //                                                        -> nibble 0 = B .. nibble 7 = 2 -> 0x210FEDCB.
  EXPECT_EQ(g.qweight[0 * 8 + 0], Word(0x76543210u));
  EXPECT_EQ(g.qweight[0 * 8 + 1], Word(0x87654321u));
  EXPECT_EQ(g.qweight[1 * 8 + 0], Word(0xFEDCBA98u));
  EXPECT_EQ(g.qweight[3 * 8 + 3], Word(0x210FEDCBu));
  // qzeros [0][0]: column n's zero is n + 1, stored as zero − 1 = n in nibble n -> 0x76543210.
  EXPECT_EQ(g.qzeros[0], Word(0x76543210u));
  for (int n = 0; n < 8; ++n) EXPECT_EQ(g.scales[n], F32ToF16(0.5f * static_cast<float>(n + 1)));
  EXPECT_EQ(g.g_idx, std::vector<std::int32_t>(32, 0));
  // And back, exactly.
  const Int4Matrix back = Int4FromGptq(g, Int4Scheme::kAsymmetric);
  const Int4Matrix want = HandMade(Int4Scheme::kAsymmetric);
  EXPECT_EQ(back.codes, want.codes);
  EXPECT_EQ(back.scales, want.scales);
  EXPECT_EQ(back.zeros, want.zeros);
}

TEST(Gptq, HandMadeSymmetricWords) {
  // GPTQ's q = plumb's code + 8, the same words as above; every zero 8, stored 7 -> 0x77777777.
  const GptqInt4 g = Int4ToGptq(HandMade(Int4Scheme::kSymmetric));
  EXPECT_EQ(g.qweight[0], Word(0x76543210u));
  EXPECT_EQ(g.qweight[1 * 8 + 0], Word(0xFEDCBA98u));
  EXPECT_EQ(g.qweight[3 * 8 + 3], Word(0x210FEDCBu));
  EXPECT_EQ(g.qzeros[0], Word(0x77777777u));
  const Int4Matrix back = Int4FromGptq(g, Int4Scheme::kSymmetric);
  EXPECT_EQ(back.codes, HandMade(Int4Scheme::kSymmetric).codes);
  EXPECT_TRUE(back.zeros.empty());
  // The same words read as asymmetric: zero 8 in every group, same values.
  const Int4Matrix asym = Int4FromGptq(g, Int4Scheme::kAsymmetric);
  EXPECT_EQ(asym.zeros, std::vector<std::uint8_t>(8, 8));
}

TEST(Awq, HandMadeAsymmetricWords) {
  const AwqInt4 a = Int4ToAwq(HandMade(Int4Scheme::kAsymmetric));
  ASSERT_EQ(a.qweight.size(), 32u);  // [K = 32][N/8 = 1]
  ASSERT_EQ(a.qzeros.size(), 1u);
  // Word [k][0]: nibble j holds column kAwqOrder[j] = 0,2,4,6,1,3,5,7, value (k + column) mod 16.
  // k = 0: nibbles 0,2,4,6,1,3,5,7 -> 0x75316420.
  // k = 9: columns 0,2,4,6,1,3,5,7 -> 9,B,D,F,A,C,E,0 -> 0x0ECAFDB9.
  EXPECT_EQ(a.qweight[0], Word(0x75316420u));
  EXPECT_EQ(a.qweight[9], Word(0x0ECAFDB9u));
  // qzeros: zero of column c is c + 1, stored as is, same order: 1,3,5,7,2,4,6,8 -> 0x86427531.
  EXPECT_EQ(a.qzeros[0], Word(0x86427531u));
  const Int4Matrix back = Int4FromAwq(a, Int4Scheme::kAsymmetric);
  EXPECT_EQ(back.codes, HandMade(Int4Scheme::kAsymmetric).codes);
  EXPECT_EQ(back.zeros, HandMade(Int4Scheme::kAsymmetric).zeros);
  EXPECT_EQ(back.scales, HandMade(Int4Scheme::kAsymmetric).scales);
  // F16 zeros that are integers convert the same way.
  EXPECT_EQ(Int4ToAwq(HandMade(Int4Scheme::kAsymmetricF16Zero)).qzeros, a.qzeros);
  // Symmetric: codes + 8 (the same nibbles as the asym case), zeros 8 -> 0x88888888.
  const AwqInt4 s = Int4ToAwq(HandMade(Int4Scheme::kSymmetric));
  EXPECT_EQ(s.qweight[9], Word(0x0ECAFDB9u));
  EXPECT_EQ(s.qzeros[0], Word(0x88888888u));
  EXPECT_EQ(Int4FromAwq(s, Int4Scheme::kSymmetric).codes, HandMade(Int4Scheme::kSymmetric).codes);
}

TEST(Awq, OrderTablesAreInverse) {
  for (int j = 0; j < 8; ++j) EXPECT_EQ(kAwqInverseOrder[kAwqOrder[j]], j);
}

// GPTQ's and AWQ's own dequantization, straight from the words: (q − zero) · scale.
float GptqValue(const GptqInt4& g, int n, int k) {
  const int N = g.out_features;
  const auto q =
      static_cast<int>((static_cast<std::uint32_t>(g.qweight[(k / 8) * N + n]) >> (4 * (k % 8))) & 0xF);
  const int grp = k / g.group_size;
  const auto z =
      static_cast<int>((static_cast<std::uint32_t>(g.qzeros[grp * (N / 8) + n / 8]) >> (4 * (n % 8))) & 0xF) +
      1;
  return static_cast<float>(q - z) * F16ToF32(g.scales[grp * N + n]);
}
float AwqValue(const AwqInt4& a, int n, int k) {
  const int N = a.out_features;
  const int shift = 4 * kAwqInverseOrder[n % 8];
  const auto q =
      static_cast<int>((static_cast<std::uint32_t>(a.qweight[k * (N / 8) + n / 8]) >> shift) & 0xF);
  const int grp = k / a.group_size;
  const auto z =
      static_cast<int>((static_cast<std::uint32_t>(a.qzeros[grp * (N / 8) + n / 8]) >> shift) & 0xF);
  return static_cast<float>(q - z) * F16ToF32(a.scales[grp * N + n]);
}

std::vector<float> DequantizeAll(const Int4Matrix& m) {
  std::vector<float> out(static_cast<std::size_t>(m.rows) * m.cols);
  const int groups = Int4Groups(m.cols, m.params.group_size);
  const std::size_t zero_row = Int4ZeroRowBytes(m.params, m.cols);
  for (int r = 0; r < m.rows; ++r) {
    DequantizeInt4Row(m.params, m.codes.data() + r * Int4RowBytes(m.cols), m.scales.data() + r * groups,
                      m.zeros.empty() ? nullptr : m.zeros.data() + r * zero_row, m.cols,
                      out.data() + static_cast<std::size_t>(r) * m.cols);
  }
  return out;
}

TEST(GptqAwq, RandomRoundTripsAndValues) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.03f);
  for (const int G : {32, 64, 128}) {
    for (const Int4Scheme scheme : {Int4Scheme::kSymmetric, Int4Scheme::kAsymmetric}) {
      const int N = 24;
      const int K = 256;
      std::vector<float> w(static_cast<std::size_t>(N) * K);
      for (float& x : w) x = normal(rng);
      const Int4Matrix m = QuantizeInt4(w.data(), N, K, {scheme, G});
      const std::vector<float> values = DequantizeAll(m);

      const GptqInt4 g = Int4ToGptq(m);
      const AwqInt4 a = Int4ToAwq(m);
      for (int n = 0; n < N; ++n) {
        for (int k = 0; k < K; ++k) {
          const float v = values[static_cast<std::size_t>(n) * K + k];
          ASSERT_EQ(GptqValue(g, n, k), v)
              << "G" << G << " " << Int4SchemeName(scheme) << " " << n << "," << k;
          ASSERT_EQ(AwqValue(a, n, k), v)
              << "G" << G << " " << Int4SchemeName(scheme) << " " << n << "," << k;
        }
      }
      for (const Int4Matrix& back : {Int4FromGptq(g, scheme), Int4FromAwq(a, scheme)}) {
        EXPECT_EQ(back.codes, m.codes);
        EXPECT_EQ(back.scales, m.scales);
        EXPECT_EQ(back.zeros, m.zeros);
      }
      // Into asym-f16zero and back out: the same words, the same values.
      const Int4Matrix f16 = Int4FromGptq(g, Int4Scheme::kAsymmetricF16Zero);
      EXPECT_EQ(DequantizeAll(f16), values);
      const GptqInt4 g2 = Int4ToGptq(f16);
      EXPECT_EQ(g2.qweight, g.qweight);
      EXPECT_EQ(g2.qzeros, g.qzeros);
      EXPECT_EQ(Int4ToAwq(Int4FromAwq(a, Int4Scheme::kAsymmetricF16Zero)).qzeros, a.qzeros);
    }
  }
}

TEST(Gptq, ZeroPointZeroQuirk) {
  // Asym zero 0 would be stored as −1, nibble 0xF, which GPTQ's readers take as zero 16.
  Int4Matrix m = HandMade(Int4Scheme::kAsymmetric);
  m.zeros[3] = 0;  // row 3's zero
  EXPECT_THROW(Int4ToGptq(m), Error);
  m.scales[3] = 0x8000;  // −0: the group is all ±0, the zero does not matter; written as GPTQ's packer does
  const GptqInt4 g = Int4ToGptq(m);
  EXPECT_EQ((static_cast<std::uint32_t>(g.qzeros[0]) >> 12) & 0xF, 0xFu);
  EXPECT_EQ(Int4FromGptq(g, Int4Scheme::kAsymmetric).zeros, m.zeros);  // read back as 0
  // With a non-zero scale, nibble 0xF is zero 16: only asym-f16zero holds it, exactly.
  GptqInt4 sixteen = g;
  sixteen.scales[3] = F32ToF16(0.25f);
  EXPECT_THROW(Int4FromGptq(sixteen, Int4Scheme::kAsymmetric), Error);
  const Int4Matrix f16 = Int4FromGptq(sixteen, Int4Scheme::kAsymmetricF16Zero);
  std::uint16_t z;
  std::memcpy(&z, &f16.zeros[2 * 3], 2);
  EXPECT_EQ(F16ToF32(z), 16.0f);
  const std::vector<float> values = DequantizeAll(f16);
  for (int k = 0; k < 32; ++k) EXPECT_EQ(values[3 * 32 + k], GptqValue(sixteen, 3, k)) << k;
  EXPECT_EQ(Int4ToGptq(f16).qzeros, sixteen.qzeros);
}

TEST(GptqAwq, RefusesWhatItCannotConvert) {
  const Int4Matrix good = HandMade(Int4Scheme::kAsymmetric);
  const GptqInt4 g = Int4ToGptq(good);
  const AwqInt4 a = Int4ToAwq(good);
  // Shapes: K not a multiple of 8, K not a multiple of G, N not a multiple of 8, bad group size.
  GptqInt4 bad = g;
  bad.in_features = 36;
  EXPECT_THROW(Int4FromGptq(bad, Int4Scheme::kAsymmetric), Error);
  bad.in_features = 40;  // a multiple of 8, not of 32
  EXPECT_THROW(Int4FromGptq(bad, Int4Scheme::kAsymmetric), Error);
  bad = g;
  bad.out_features = 12;
  EXPECT_THROW(Int4FromGptq(bad, Int4Scheme::kAsymmetric), Error);
  bad = g;
  bad.group_size = 16;
  EXPECT_THROW(Int4FromGptq(bad, Int4Scheme::kAsymmetric), Error);
  // Array sizes.
  bad = g;
  bad.qweight.pop_back();
  EXPECT_THROW(Int4FromGptq(bad, Int4Scheme::kAsymmetric), Error);
  bad = g;
  bad.qzeros.push_back(0);
  EXPECT_THROW(Int4FromGptq(bad, Int4Scheme::kAsymmetric), Error);
  bad = g;
  bad.scales.pop_back();
  EXPECT_THROW(Int4FromGptq(bad, Int4Scheme::kAsymmetric), Error);
  AwqInt4 bad_awq = a;
  bad_awq.qweight.resize(33);
  EXPECT_THROW(Int4FromAwq(bad_awq, Int4Scheme::kAsymmetric), Error);
  bad_awq = a;
  bad_awq.in_features = 64;  // arrays now the wrong size for K = 64
  EXPECT_THROW(Int4FromAwq(bad_awq, Int4Scheme::kAsymmetric), Error);
  // Act-order g_idx, and a g_idx of the wrong length; the trivial one is fine.
  bad = g;
  bad.g_idx[5] = 1;
  EXPECT_THROW(Int4FromGptq(bad, Int4Scheme::kAsymmetric), Error);
  bad.g_idx.resize(31, 0);
  EXPECT_THROW(Int4FromGptq(bad, Int4Scheme::kAsymmetric), Error);
  bad.g_idx.clear();
  EXPECT_NO_THROW(Int4FromGptq(bad, Int4Scheme::kAsymmetric));
  // Symmetric asked of asymmetric zeros.
  EXPECT_THROW(Int4FromGptq(g, Int4Scheme::kSymmetric), Error);
  EXPECT_THROW(Int4FromAwq(a, Int4Scheme::kSymmetric), Error);
  // A fractional FP16 zero has no GPTQ or AWQ encoding; nor has a zero of 16 in AWQ.
  Int4Matrix frac = HandMade(Int4Scheme::kAsymmetricF16Zero);
  const std::uint16_t z = F32ToF16(2.5f);
  std::memcpy(&frac.zeros[0], &z, 2);
  EXPECT_THROW(Int4ToGptq(frac), Error);
  EXPECT_THROW(Int4ToAwq(frac), Error);
  const std::uint16_t sixteen = F32ToF16(16.0f);
  std::memcpy(&frac.zeros[0], &sixteen, 2);
  EXPECT_NO_THROW(Int4ToGptq(frac));
  EXPECT_THROW(Int4ToAwq(frac), Error);
  // plumb matrices with partial groups or odd shapes, and inconsistent arrays.
  std::vector<float> w(8 * 40, 0.5f);
  EXPECT_THROW(Int4ToGptq(QuantizeInt4(w.data(), 8, 40, {Int4Scheme::kSymmetric, 32})), Error);
  Int4Matrix short_codes = good;
  short_codes.codes.pop_back();
  EXPECT_THROW(Int4ToGptq(short_codes), Error);
  EXPECT_THROW(Int4ToAwq(short_codes), Error);
}

}  // namespace
}  // namespace plumb
