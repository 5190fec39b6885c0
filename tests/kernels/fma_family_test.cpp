// The fast family's float kernels as Gemv and GemvBatch choose them (kernels/kernels.h): the FMA kernels
// (fma_dot_test.cpp checks their bits) in the fast family, the exact ones in the exact family and for a
// matrix marked exact_only, at any thread count, and GemvBatch's rows each bitwise their Gemv. And prefill's
// BF16 panels (src/kernels/bf16_panel/bf16_panel.h): AVX512-BF16's rounding, packing and tile product
// bitwise the definition on awkward shapes and values, and Gemm taking them only where it should.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "../../src/kernels/bf16_panel/bf16_panel.h"
#include "plumb/formats/dtype.h"
#include "plumb/kernels/isa.h"

#include "plumb/kernels/kernels.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/float_cases.h"
#include "support/int8_rows.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using kernels::KernelFamily;
using testing::Cases;
using testing::FamilyGuard;
using testing::FloatCase;
using testing::RandomVector;
using testing::SameBits;

// Gemv at 1, 2 and 3 threads: the FMA kernels in the fast family, the exact ones in the exact family and for
// a matrix marked exact_only; GemvBatch row by row the same as Gemv in both families.
TEST(FmaFamily, GemvAndGemvBatchFollowTheFamily) {
  const int threads = kernels::NumThreads();
  for (FloatCase& c : Cases(37, 333, 900)) {
    const std::vector<float> x = RandomVector(333, 901);
    std::vector<float> fma(c.W.rows), exact(c.W.rows), y(c.W.rows);
    kernels::FmaRowDotsOf(c.W, 0, c.W.rows, x.data(), fma.data());
    kernels::RowDotsOf(c.W, 0, c.W.rows, x.data(), exact.data());
    for (int t : {1, 2, 3}) {
      kernels::SetNumThreads(t);
      for (KernelFamily family : {KernelFamily::kFast, KernelFamily::kExact}) {
        FamilyGuard guard(family);
        for (bool exact_only : {false, true}) {
          c.W.exact_only = exact_only;
          kernels::Gemv(c.W, x.data(), y.data());
          const bool fast = family == KernelFamily::kFast && !exact_only;
          EXPECT_EQ(kernels::UsesFmaRowDots(c.W), fast);
          for (int r = 0; r < c.W.rows; ++r) {
            ASSERT_TRUE(SameBits(y[r], fast ? fma[r] : exact[r]))
                << c.name << ", " << kernels::FamilyName(family) << (exact_only ? " exact_only" : "")
                << ", threads " << t << ", row " << r;
          }
        }
        c.W.exact_only = false;
        // Three rows of X, the middle one x: its row of the batch is Gemv's bits.
        std::vector<float> X = RandomVector(3 * 333, 902);
        std::copy(x.begin(), x.end(), X.begin() + 333);
        std::vector<float> Y(3 * static_cast<std::size_t>(c.W.rows));
        kernels::GemvBatch(c.W, X.data(), 3, Y.data());
        const std::vector<float>& want = family == KernelFamily::kFast ? fma : exact;
        for (int r = 0; r < c.W.rows; ++r) {
          ASSERT_TRUE(SameBits(Y[c.W.rows + r], want[r]))
              << c.name << ", GemvBatch, " << kernels::FamilyName(family) << ", threads " << t << ", row "
              << r;
        }
      }
    }
  }
  kernels::SetNumThreads(threads);
}

// ---- BF16 panels ------------------------------------------------------------------------------------------

// Why this host cannot run the AVX512-BF16 kernels, or "".
std::string Bf16Missing() {
  if (!kernels::IsaSupported(kernels::Isa::kAvx512)) return kernels::IsaMissing(kernels::Isa::kAvx512);
  if (!kernels::HasAvx512Bf16()) return "CPU lacks avx512_bf16";
  return "";
}

// The same for a test through Gemm, which also needs the panels on: the active ISA AVX-512 (PLUMB_ISA) and
// PLUMB_BF16 not 0.
std::string Bf16GemmMissing() {
  if (const std::string why = Bf16Missing(); !why.empty()) return why;
  if (!kernels::Bf16PanelsAvailable())
    return std::string("the panels are off (PLUMB_BF16=0, or PLUMB_ISA ") +
           kernels::IsaName(kernels::ActiveIsa()) + ")";
  return "";
}

// x rows with every awkward value: AwkwardX's signed zeros, subnormals and large values, and infinities, a
// NaN, values that round up to the smallest normal or to infinity, and ties of the BF16 rounding.
std::vector<float> AwkwardRows(int m, int k, std::uint32_t seed) {
  std::vector<float> X;
  for (int i = 0; i < m; ++i) {
    std::vector<float> x = testing::AwkwardX(k, seed + static_cast<std::uint32_t>(i));
    if (i % 3 == 1) {
      for (int e = 2; e < k; e += 17) x[e] = std::bit_cast<float>(0x007FFFC0u);  // rounds up to 2^-126
      for (int e = 4; e < k; e += 19) x[e] = std::bit_cast<float>(0x3F808000u);  // a tie: to even, 1.0
      for (int e = 6; e < k; e += 23) x[e] = std::bit_cast<float>(0x3F818000u);  // a tie: up
    }
    if (i % 4 == 2) {
      x[k / 2] = std::numeric_limits<float>::infinity();
      x[k - 1] = std::bit_cast<float>(0x7F7FFFFFu);  // FLT_MAX: rounds to inf
      if (k > 2) x[1] = std::numeric_limits<float>::quiet_NaN();
    }
    X.insert(X.end(), x.begin(), x.end());
  }
  return X;
}

// The vector rounding and packing write the definition's words exactly (NaN as 0x7FFF included), for row
// lengths that are odd, shorter than a register's 32 elements and longer, for partial groups, and from the
// decoded rows and the stored ones alike.
TEST(Bf16Panels, RoundingAndPackingAreTheDefinitions) {
  if (const std::string why = Bf16Missing(); !why.empty()) GTEST_SKIP() << why;
  const kernels::bf16::Kernels avx512 = kernels::bf16::Avx512Bf16Kernels();
  for (int k : {1, 2, 31, 32, 33, 65, 333}) {
    const int pairs = (k + 1) / 2;
    const std::vector<float> X = AwkwardRows(16, k, 77);
    for (int i = 0; i < 16; ++i) {
      std::vector<std::uint32_t> want(pairs + 1, 0xDEADBEEFu), got(pairs + 1, 0xDEADBEEFu);
      kernels::bf16::RoundRow(X.data() + i * k, k, want.data());
      avx512.round_row(X.data() + i * k, k, got.data());
      ASSERT_EQ(got, want) << "k " << k << ", row " << i;  // and the word past the row left alone
    }
    for (int rows : {1, 7, 16}) {
      kernels::bf16::Panel want, got;
      want.Resize(2, pairs);
      got.Resize(2, pairs);
      kernels::bf16::PackGroup(X.data(), rows, k, want, 1);
      avx512.pack_group(X.data(), rows, k, got, 1);
      const std::vector<std::uint32_t> a(want.Group(1), want.Group(1) + pairs * 16);
      const std::vector<std::uint32_t> b(got.Group(1), got.Group(1) + pairs * 16);
      ASSERT_EQ(b, a) << "k " << k << ", rows " << rows;
    }
    // From the stored rows (F32, F16, BF16, their NaNs, infinities and subnormals), the words of the
    // decoded rows; FP8 is not read that way. Rows from 3 on, so that a group starts inside the matrix.
    for (FloatCase& c : Cases(21, k, 60)) {
      std::vector<float> decoded(16 * static_cast<std::size_t>(k));
      for (int rows : {1, 16}) {
        kernels::bf16::Panel want, got;
        want.Resize(1, pairs);
        got.Resize(1, pairs);
        kernels::DecodeRowsOf(c.W, 3, rows, decoded.data());
        kernels::bf16::PackGroup(decoded.data(), rows, k, want, 0);
        const bool stored = avx512.pack_stored(c.W, 3, rows, got, 0);
        ASSERT_EQ(stored, c.W.format == &kernels::kGgmlFormat) << c.name;
        if (!stored) continue;
        const std::vector<std::uint32_t> a(want.Group(0), want.Group(0) + pairs * 16);
        const std::vector<std::uint32_t> b(got.Group(0), got.Group(0) + pairs * 16);
        ASSERT_EQ(b, a) << c.name << ", k " << k << ", rows " << rows;
      }
    }
  }
}

using GemmFn = void (*)(const WeightMatrix& W, const float* X, int m, float* Y);

// `gemm` against the definition with `sums`, element by element: every float format (random and any-bits
// F16/BF16 with infinities, NaNs and subnormals; FP8 with its row scales), x rows with awkward values,
// shapes whose rows, x rows and pairs are not multiples of the blocks (16-row groups, 4-group tiles, 6 x
// rows, 1024-pair blocks of k; the tiles' 16-pair blocks, 8-block chunks, 2 × 2 tiles and tasks of up to
// 128 rows, stored BF16 rows read in place where k is whole blocks), from the fewest rows Gemm gives them, at
// 1 and 3 threads.
void ExpectBitwiseTheDefinition(GemmFn gemm, kernels::bf16::Sums sums, const char* label) {
  const int threads = kernels::NumThreads();
  struct Shape {
    int n, k, m;
  };
  for (const Shape sh :
       {Shape{17, 333, 65}, Shape{70, 31, 7}, Shape{130, 2051, 13}, Shape{64, 2, 100},
        Shape{33, 64, kernels::kBf16PanelMinRows}, Shape{300, 320, 37}, Shape{48, 544, 16}}) {
    const std::vector<float> X = AwkwardRows(sh.m, sh.k, 5);
    kernels::bf16::Bf16Rows xb;
    kernels::bf16::RoundRows(X.data(), sh.m, sh.k, xb);
    for (FloatCase& c : Cases(sh.n, sh.k, 40)) {
      ASSERT_TRUE(kernels::UsesBf16Panels(c.W)) << c.name;
      std::vector<float> want(static_cast<std::size_t>(sh.m) * sh.n);
      kernels::bf16::GemmDefinition(c.W, 0, sh.n, xb, want.data(), sh.n, sums);
      for (int t : {1, 3}) {
        kernels::SetNumThreads(t);
        std::vector<float> Y(want.size(), -1.0f);
        gemm(c.W, X.data(), sh.m, Y.data());
        for (std::size_t e = 0; e < Y.size(); ++e)
          ASSERT_TRUE(SameBits(Y[e], want[e])) << label << ", " << c.name << ", n " << sh.n << " k " << sh.k
                                               << " m " << sh.m << ", threads " << t << ", element " << e;
      }
    }
  }
  kernels::SetNumThreads(threads);
}

// Why this host cannot run the AMX-BF16 tiles as the definition: no AMX-BF16, or a tdpbf16ps that
// computes otherwise (TileSumsMismatch).
std::string TilesMissing() {
  if (const std::string why = Bf16Missing(); !why.empty()) return why;
  return kernels::bf16::TileSumsMismatch();
}

// kernels::Gemm takes the panels with the sums ActiveSums() names; where that is the tiles, the lanes'
// kernel is held to its own definition as well (PLUMB_AMX=0 makes it Gemm's).
TEST(Bf16Panels, GemmIsBitwiseTheDefinition) {
  if (const std::string why = Bf16GemmMissing(); !why.empty()) GTEST_SKIP() << why;
  FamilyGuard guard(KernelFamily::kFast);
  const kernels::bf16::Sums active = kernels::bf16::ActiveSums();
  ExpectBitwiseTheDefinition(
      [](const WeightMatrix& W, const float* X, int m, float* Y) { kernels::Gemm(X, m, W, Y); }, active,
      active == kernels::bf16::Sums::kTileBlocks ? "Gemm, tdpbf16ps tiles" : "Gemm, vdpbf16ps lanes");
  if (active == kernels::bf16::Sums::kTileBlocks)
    ExpectBitwiseTheDefinition(kernels::bf16::LanesGemm, kernels::bf16::Sums::kPairLanes, "vdpbf16ps lanes");
  else if (TilesMissing().empty())
    ExpectBitwiseTheDefinition(kernels::bf16::AmxBf16Gemm(), kernels::bf16::Sums::kTileBlocks,
                               "tdpbf16ps tiles");
}

// Where the tiles' sums part from the lanes', as tdpbf16ps was measured to compute (docs/formats.md, "BF16
// tiles"), each row's known answer for x = all ones; the definition must give it anywhere, the tiles on a
// host with them.
TEST(Bf16Panels, TileSumsAreTheMeasuredInstruction) {
  struct Known {
    const char* what;
    std::vector<float> w;  // elements, pairs (2p, 2p + 1); x is k copies of `x`
    float x, tiles, lanes;
  };
  std::vector<float> split(34, 0.0f);  // pair 0 = (1, 0), pair 16 = (2^-24, 2^-30): two blocks
  split[0] = 1.0f;
  split[32] = 0x1p-24f;
  split[33] = 0x1p-30f;
  const std::vector<Known> known = {
      // Even chain 1 + 0, odd 2^-24 + 2^-30 exact, joined above the tie: 1 + 2^-23. The lanes (odd first)
      // tie 1 + 2^-24 down to 1 before 2^-30 comes.
      {"two chains", {1.0f, 0x1p-24f, 0.0f, 0x1p-30f}, 1.0f, 1.0f + 0x1p-23f, 1.0f},
      // Block 0 gives 1, block 1's join 2^-24 + 2^-30 lifts it; one chain would tie to 1.
      {"16-pair blocks", split, 1.0f, 1.0f + 0x1p-23f, 1.0f},
      // Even chain 2^-126, then −2^-152: 2^-126 − 2^-152 is tiny only before rounding, and both ask after.
      {"tiny after rounding", {0x1p-63f, 0.0f, -0x1p-89f, 0.0f}, 0x1p-63f, FLT_MIN, FLT_MIN},
      // A product below 2^-126 alone in its chain is flushed to −0, which the odd chain's +0 joins to +0; the
      // lanes flush the same sum last, to −0.
      {"a tiny product alone", {-0x1p-65f, 0.0f}, 0x1p-65f, 0.0f, -0.0f},
  };
  const std::string tiles_missing = TilesMissing();
  for (const Known& c : known) {
    const int k = static_cast<int>(c.w.size());
    const std::vector<float> x(static_cast<std::size_t>(k), c.x);
    kernels::bf16::Bf16Rows wb, xb;
    kernels::bf16::RoundRows(c.w.data(), 1, k, wb);
    kernels::bf16::RoundRows(x.data(), 1, k, xb);
    EXPECT_TRUE(SameBits(kernels::bf16::TileDot(wb.Row(0), xb.Row(0), wb.pairs), c.tiles)) << c.what;
    EXPECT_TRUE(SameBits(kernels::bf16::PairDot(wb.Row(0), xb.Row(0), wb.pairs), c.lanes)) << c.what;
    if (!tiles_missing.empty()) continue;
    // The hardware: the row as 16 weight rows against 16 x rows.
    std::vector<std::uint8_t> bytes;
    for (int r = 0; r < 16; ++r)
      for (float v : c.w) {
        const std::uint16_t b = F32ToBF16(v);
        bytes.push_back(static_cast<std::uint8_t>(b & 0xFF));
        bytes.push_back(static_cast<std::uint8_t>(b >> 8));
      }
    const WeightMatrix W = WeightMatrix::FromBytes(GgmlType::BF16, 16, k, std::move(bytes));
    std::vector<float> X;
    for (int i = 0; i < 16; ++i) X.insert(X.end(), x.begin(), x.end());
    std::vector<float> Y(256);
    kernels::bf16::AmxBf16Gemm()(W, X.data(), 16, Y.data());
    for (float y : Y) ASSERT_TRUE(SameBits(y, c.tiles)) << c.what << ", tdpbf16ps";
  }
  if (!tiles_missing.empty()) GTEST_SKIP() << "the definition checked, the tiles not: " << tiles_missing;
}

// Where the definition follows vdpbf16ps rather than IEEE FMA: a sum that x86 calls tiny after rounding
// (2^-126 − 2^-150, which gradual underflow would round up to 2^-126) is flushed to +0, a tie just above it
// is not, and a subnormal input is read as zero. The lanes' hardware answers; the definition must agree.
TEST(Bf16Panels, FlushesAsTheInstructionDoes) {
  if (const std::string why = Bf16Missing(); !why.empty()) GTEST_SKIP() << why;
  constexpr int kRows = 3, kCols = 2, kM = 65;
  // Row r's pair: (even, odd) = (w0[r], 2^-63); x's: (2^-75, 2^-63). The odd product 2^-126 comes first.
  const float w0[kRows] = {-0x1p-75f, -0x1p-76f, 0x1p-130f};
  std::vector<std::uint8_t> bytes;
  for (int r = 0; r < kRows; ++r)
    for (float v : {w0[r], 0x1p-63f}) {
      const std::uint16_t b = F32ToBF16(v);
      bytes.push_back(static_cast<std::uint8_t>(b & 0xFF));
      bytes.push_back(static_cast<std::uint8_t>(b >> 8));
    }
  const WeightMatrix W = WeightMatrix::FromBytes(GgmlType::BF16, kRows, kCols, std::move(bytes));
  std::vector<float> X;
  for (int i = 0; i < kM; ++i) X.insert(X.end(), {0x1p-75f, 0x1p-63f});
  std::vector<float> Y(kM * kRows);
  kernels::bf16::LanesGemm(W, X.data(), kM, Y.data());
  kernels::bf16::Bf16Rows xb;
  kernels::bf16::RoundRows(X.data(), kM, kCols, xb);
  std::vector<float> want(Y.size());
  kernels::bf16::GemmDefinition(W, 0, kRows, xb, want.data(), kRows);
  EXPECT_TRUE(SameBits(Y[0], 0.0f));     // 2^-126 − 2^-150: tiny, flushed
  EXPECT_TRUE(SameBits(Y[1], FLT_MIN));  // 2^-126 − 2^-151: a tie, to even 2^-126
  EXPECT_TRUE(SameBits(Y[2], FLT_MIN));  // 2^-130 is a BF16 subnormal: read as 0
  for (std::size_t e = 0; e < Y.size(); ++e) ASSERT_TRUE(SameBits(Y[e], want[e])) << "element " << e;
}

// The panels run only in the fast family, for a matrix not marked exact_only, on the AVX-512 variant (so
// PLUMB_ISA=avx2 keeps the FP32 path), and for float formats: a GGUF block type keeps its int8 panels.
TEST(Bf16Panels, GemmTakesThemOnlyWhereItShould) {
  WeightMatrix W = testing::RandomGgml(GgmlType::BF16, 16, 64, 3);
  const WeightMatrix q = testing::RandomGgml(GgmlType::Q4_0, 16, 64, 4);
  const char* env = std::getenv("PLUMB_BF16");
  const bool host = Bf16Missing().empty() && (env == nullptr || std::string(env) != "0");
  {
    FamilyGuard guard(KernelFamily::kExact);
    EXPECT_FALSE(kernels::UsesBf16Panels(W));
  }
  FamilyGuard guard(KernelFamily::kFast);
  EXPECT_EQ(kernels::UsesBf16Panels(W), host && kernels::ActiveIsa() == kernels::Isa::kAvx512);
  EXPECT_FALSE(kernels::UsesBf16Panels(q));
  W.exact_only = true;
  EXPECT_FALSE(kernels::UsesBf16Panels(W));
  W.exact_only = false;
  if (host) {
    const kernels::Isa isa = kernels::ActiveIsa();
    kernels::SetIsa(kernels::Isa::kAvx2);
    EXPECT_FALSE(kernels::UsesBf16Panels(W));
    kernels::SetIsa(isa);
  }
}

}  // namespace
}  // namespace plumb
