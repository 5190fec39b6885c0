// The BF16 panels' definition and its plain C++ rounding and packing (bf16_panel.h).
#include "bf16_panel.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <utility>

#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/thread_pool.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels::bf16 {
namespace {

// A subnormal read as zero of its sign (DAZ).
float Daz(float v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}

float Low(std::uint32_t word) {
  return Daz(std::bit_cast<float>(word << 16));
}
float High(std::uint32_t word) {
  return Daz(std::bit_cast<float>(word & 0xFFFF0000u));
}

// fma(a, b, acc) with x86's flush to zero: a result that is tiny after rounding (its value rounded to 24
// bits with an unbounded exponent is below 2^-126) becomes zero of its sign. Rounding into the subnormal
// range first would keep 2^-126 for a sum just below it that x86 flushes, so tininess is decided on the sum
// taken with a 64-bit significand (the product of two BF16 values is exact in it, and no sum reaching the
// threshold needs more than its bits there: the threshold has 26 significant bits, each operand at most 24).
float FlushedFma(float a, float b, float acc) {
  const float rounded = std::fma(a, b, acc);
  // Above 2^-126 after rounding (or NaN): not tiny either way.
  if (!(std::fabs(rounded) <= FLT_MIN)) return rounded;
  const long double sum = static_cast<long double>(a) * b + acc;
  constexpr long double kTiny = static_cast<long double>(FLT_MIN) - 0x1p-151L;  // FLT_MIN's rounding midpoint
  if (std::fabs(sum) < kTiny && sum != 0) return std::copysign(0.0f, static_cast<float>(sum));
  return rounded;
}

}  // namespace

void Bf16Rows::Resize(int rows, int cols) {
  m = rows;
  k = cols;
  pairs = (cols + 1) / 2;
  if (words.size() < Extent(m, pairs)) words.resize(Extent(m, pairs));
}

const std::uint32_t* Panel::Group(int g) const {
  const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
  return storage.data() + ((64 - address % 64) % 64) / 4 + Extent(g, Extent(pairs, kPanelRows));
}
std::uint32_t* Panel::Group(int g) {
  return const_cast<std::uint32_t*>(std::as_const(*this).Group(g));
}

void Panel::Resize(int group_count, int pair_count) {
  groups = group_count;
  pairs = pair_count;
  const std::size_t words = Extent(groups, Extent(pairs, kPanelRows)) + 16;  // 16: room to align
  if (storage.size() < words) storage.resize(words);
}

float PairDot(const std::uint32_t* w, const std::uint32_t* x, int pairs) {
  float acc = 0.0f;
  for (int p = 0; p < pairs; ++p) {
    acc = FlushedFma(High(w[p]), High(x[p]), acc);
    acc = FlushedFma(Low(w[p]), Low(x[p]), acc);
  }
  return acc;
}

float TileDot(const std::uint32_t* w, const std::uint32_t* x, int pairs) {
  float acc = 0.0f;
  for (int p0 = 0; p0 < pairs; p0 += kTileBlockPairs) {
    float even = 0.0f, odd = 0.0f;
    for (int p = p0; p < p0 + kTileBlockPairs; ++p) {
      const std::uint32_t wp = p < pairs ? w[p] : 0u, xp = p < pairs ? x[p] : 0u;
      even = FlushedFma(Low(wp), Low(xp), even);
      odd = FlushedFma(High(wp), High(xp), odd);
    }
    acc = FlushedFma(1.0f, FlushedFma(1.0f, even, odd), acc);
  }
  return acc;
}

namespace {

// Elements 2p and 2p + 1 of v (k long; past its end +0) as one word.
std::uint32_t PairOf(const float* v, int k, int p) {
  const std::uint32_t low = F32ToBF16(v[2 * p]);
  const std::uint32_t high = 2 * p + 1 < k ? F32ToBF16(v[2 * p + 1]) : 0u;
  return low | (high << 16);
}

}  // namespace

void RoundRow(const float* x, int k, std::uint32_t* out) {
  for (int p = 0; p < (k + 1) / 2; ++p) out[p] = PairOf(x, k, p);
}

void RoundRows(const float* X, int m, int k, Bf16Rows& out) {
  out.Resize(m, k);
  for (int i = 0; i < m; ++i) RoundRow(X + Extent(i, k), k, out.Row(i));
}

void PackGroup(const float* decoded, int rows, int k, Panel& panel, int g) {
  std::uint32_t* group = panel.Group(g);
  for (int p = 0; p < panel.pairs; ++p)
    for (int j = 0; j < kPanelRows; ++j)
      group[Extent(p, kPanelRows) + j] = j < rows ? PairOf(decoded + Extent(j, k), k, p) : 0u;
}

void GemmDefinition(const WeightMatrix& W, int row_begin, int row_end, const Bf16Rows& X, float* Y,
                    std::size_t ldy, Sums sums) {
  const auto dot = sums == Sums::kTileBlocks ? TileDot : PairDot;
  std::vector<float> decoded(static_cast<std::size_t>(W.cols));
  Bf16Rows row;
  for (int r = row_begin; r < row_end; ++r) {
    DecodeRowsOf(W, r, 1, decoded.data());
    RoundRows(decoded.data(), 1, W.cols, row);
    for (int i = 0; i < X.m; ++i) Y[Extent(i, ldy) + r] = dot(row.Row(0), X.Row(i), X.pairs);
  }
  ApplyRowScales(W, row_begin, row_end - row_begin, Y, X.m, ldy);
}

bool PanelsAvailable() {
  static const bool wanted = !EnvTurnsOff("PLUMB_BF16");
  return wanted && ActiveIsa() == Isa::kAvx512 && HasAvx512Bf16();
}

Sums ActiveSums() {
  static const bool tiles = !EnvTurnsOff("PLUMB_AMX") && TileSumsMismatch().empty();
  return tiles ? Sums::kTileBlocks : Sums::kPairLanes;
}

bool PanelsRun(const WeightMatrix& W) {
  return PanelsAvailable() && UsesFmaRowDots(W);
}

// A tile is 4 groups (64 rows): the tile kernel's block, so each of its passes over x feeds 24 accumulators.
// 2048 rows give 32 tiles, enough for the pool to even out threads that run at different speeds.
void LanesGemm(const WeightMatrix& W, const float* X, int m, float* Y) {
  const Kernels kernels = Avx512Bf16Kernels();
  const int n = W.rows, k = W.cols;
  thread_local Bf16Rows scratch;
  Bf16Rows& xb = scratch;  // a reference, so the pool's threads share this thread's
  xb.Resize(m, k);
  ParallelFor(m, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      kernels.round_row(X + Extent(i, k), k, xb.Row(static_cast<int>(i)));
  });
  constexpr int kTileRows = 4 * kPanelRows;
  const DecodeRowsFn decode = KernelsFor(*W.format, ActiveIsa()).decode_rows;
  ParallelForDynamic((n + kTileRows - 1) / kTileRows, [&](std::int64_t tile, int) {
    thread_local Panel panel;
    thread_local std::vector<float> decoded;
    const int r0 = static_cast<int>(tile) * kTileRows;
    const int rows = std::min(kTileRows, n - r0);
    panel.Resize((rows + kPanelRows - 1) / kPanelRows, xb.pairs);
    for (int g = 0; g < panel.groups; ++g) {
      const int first = r0 + g * kPanelRows, count = std::min(kPanelRows, rows - g * kPanelRows);
      if (kernels.pack_stored(W, first, count, panel, g)) continue;
      if (decoded.size() < Extent(kPanelRows, k)) decoded.resize(Extent(kPanelRows, k));
      decode(W, first, count, decoded.data());
      kernels.pack_group(decoded.data(), count, k, panel, g);
    }
    kernels.tile(panel, xb, r0, r0 + rows, Y, static_cast<std::size_t>(n));
    ApplyRowScales(W, r0, rows, Y, m, static_cast<std::size_t>(n));
  });
}

void PanelGemm(const WeightMatrix& W, const float* X, int m, float* Y) {
  if (ActiveSums() == Sums::kTileBlocks) return AmxBf16Gemm()(W, X, m, Y);
  LanesGemm(W, X, m, Y);
}

}  // namespace plumb::kernels::bf16
