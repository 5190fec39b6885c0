// The BF16 panels with AVX512-BF16 (bf16_panel.h): vdpbf16ps is the definition's lane, so a 512-bit
// register of accumulators holds 16 weight rows' outputs for one x row, and one instruction adds a pair of
// elements to all 16. Blocks of 6 x rows × 4 groups (64 weight rows) keep 24 accumulators in registers: per
// pair, 4 panel loads and 6 broadcasts of x feed 24 instructions. The rounding and packing are integer code
// with F32ToBF16's bits, reading F32, F16 and BF16 rows as stored. Bitwise the definition (bf16_gemm_test).
#include "bf16_panel_avx512.h"
#include "bf16_panel.h"

#if defined(__x86_64__)

#include "../simd/avx512_intrinsics.h"

#include <algorithm>

#include "plumb/core/extent.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/weight_format.h"

#define PLUMB_BF16_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16")))

namespace plumb::kernels::bf16 {
namespace {

// 16 floats' BF16 roundings, each in the low half of its 32-bit lane: F32ToBF16 (formats/dtype.cpp), the
// lowest kept bit added to 0x7FFF, NaN as 0x7FFF.
PLUMB_BF16_TARGET __m512i RoundToBf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i kept = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(kept, _mm512_set1_epi32(0x7FFF))), 16);
  const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7F800000));
  return _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0x7FFF));
}

// A mask of the first n of 16 (or 32) lanes, n clamped to [0, 16] (or [0, 32]).
inline __mmask16 First16(int n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1);
}
inline __mmask32 First32(int n) {
  return n >= 32 ? 0xFFFFFFFFu : n <= 0 ? 0u : (1u << n) - 1;
}

// Pairs (element 2p in the low half of word p) from the BF16 roundings of two vectors of 16 floats, the
// first holding elements 0..15, the second 16..31.
PLUMB_BF16_TARGET __m512i PairsOfRounded(__m512i lo, __m512i hi) {
  // Each 64-bit lane holds (element 2p, element 2p + 1) in its two 32-bit halves: fold the high one into
  // bits 16..31 of the low one, then keep the low halves.
  const __m512i lo_pairs = _mm512_or_si512(lo, _mm512_srli_epi64(lo, 16));
  const __m512i hi_pairs = _mm512_or_si512(hi, _mm512_srli_epi64(hi, 16));
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(lo_pairs)),
                            _mm512_cvtepi64_epi32(hi_pairs), 1);
}

// The 16 words of pairs p0 .. p0 + 15 of one row of k elements stored as T (past the row: +0), as the
// definition rounds them: F32 rounded, F16 widened (exactly) then rounded, BF16 as stored but with every NaN
// made 0x7FFF, as F32ToBF16 of its widening gives.
template <GgmlType T>
PLUMB_BF16_TARGET __m512i StoredPairs(const void* row, int k, int p0) {
  const int count = k - 2 * p0;  // elements left from pair p0 on
  if constexpr (T == GgmlType::F32) {
    const float* v = static_cast<const float*>(row) + 2 * p0;
    return PairsOfRounded(RoundToBf16(_mm512_maskz_loadu_ps(First16(count), v)),
                          RoundToBf16(_mm512_maskz_loadu_ps(First16(count - 16), v + 16)));
  } else if constexpr (T == GgmlType::F16) {
    const __m512i h =
        _mm512_maskz_loadu_epi16(First32(count), static_cast<const std::uint16_t*>(row) + 2 * p0);
    return PairsOfRounded(RoundToBf16(_mm512_cvtph_ps(_mm512_castsi512_si256(h))),
                          RoundToBf16(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1))));
  } else {
    static_assert(T == GgmlType::BF16);
    const __m512i h =
        _mm512_maskz_loadu_epi16(First32(count), static_cast<const std::uint16_t*>(row) + 2 * p0);
    const __mmask32 nan =
        _mm512_cmpgt_epu16_mask(_mm512_and_si512(h, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(0x7F80));
    return _mm512_mask_mov_epi16(h, nan, _mm512_set1_epi16(0x7FFF));
  }
}

PLUMB_BF16_TARGET void RoundRowAvx512(const float* x, int k, std::uint32_t* out) {
  const int pairs = (k + 1) / 2;
  for (int p = 0; p < pairs; p += 16)
    _mm512_mask_storeu_epi32(out + p, First16(pairs - p), StoredPairs<GgmlType::F32>(x, k, p));
}

}  // namespace

PLUMB_TRANSPOSE_TARGET void Transpose16(__m512i* r) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // u[i + e]: rows i .. i + 3 of element 4L + e in 128-bit lane L
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int e = 0; e < 4; ++e) {
    const __m512i a_even = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88);
    const __m512i a_odd = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xDD);
    const __m512i b_even = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88);
    const __m512i b_odd = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xDD);
    r[e] = _mm512_shuffle_i32x4(a_even, b_even, 0x88);
    r[8 + e] = _mm512_shuffle_i32x4(a_even, b_even, 0xDD);
    r[4 + e] = _mm512_shuffle_i32x4(a_odd, b_odd, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(a_odd, b_odd, 0xDD);
  }
}

namespace {

// Group g of the panel from `rows` rows stored as T, row j at first + j · stride bytes: 16 pairs of the 16
// rows at a time, transposed so that each store is one pair of all 16 rows.
template <GgmlType T>
PLUMB_BF16_TARGET void PackRows(const std::uint8_t* first, std::size_t stride, int rows, int k, Panel& panel,
                                int g) {
  std::uint32_t* group = panel.Group(g);
  for (int p0 = 0; p0 < panel.pairs; p0 += 16) {
    __m512i r[16];
    for (int j = 0; j < 16; ++j)
      r[j] = j < rows ? StoredPairs<T>(first + j * stride, k, p0) : _mm512_setzero_si512();
    Transpose16(r);
    const int n = std::min(16, panel.pairs - p0);
    for (int q = 0; q < n; ++q) _mm512_store_si512(group + Extent(p0 + q, kPanelRows), r[q]);
  }
}

void PackGroupAvx512(const float* decoded, int rows, int k, Panel& panel, int g) {
  PackRows<GgmlType::F32>(reinterpret_cast<const std::uint8_t*>(decoded), Extent(k, sizeof(float)), rows, k,
                          panel, g);
}

bool PackStoredAvx512(const WeightMatrix& W, int r0, int rows, Panel& panel, int g) {
  if (W.format != &kGgmlFormat) return false;
  switch (W.type) {
    case GgmlType::F32:
      PackRows<GgmlType::F32>(W.Row(r0), W.row_bytes, rows, W.cols, panel, g);
      return true;
    case GgmlType::F16:
      PackRows<GgmlType::F16>(W.Row(r0), W.row_bytes, rows, W.cols, panel, g);
      return true;
    case GgmlType::BF16:
      PackRows<GgmlType::BF16>(W.Row(r0), W.row_bytes, rows, W.cols, panel, g);
      return true;
    default:
      return false;
  }
}

// Pairs per block of k: the 4 groups' slice of the panel (256 KiB) stays in L2 while every block of x rows
// passes over it, and 6 x rows' slice (24 KiB) in L1. acc goes through Y between blocks, which the
// definition's single chain allows.
constexpr int kBlockPairs = 1024;

struct Block {
  const Panel* panel;
  const Bf16Rows* X;
  int i0, g0, p0, p1, r0, rows_end;
  float* Y;
  std::size_t ldy;
};

template <int kRx, int kGroups>
PLUMB_BF16_TARGET void Multiply(const Block& b) {
  __m512 acc[kRx][kGroups];
  __mmask16 valid[kGroups];
  for (int n = 0; n < kGroups; ++n) {
    const int first = b.r0 + kPanelRows * (b.g0 + n);
    const int rows = std::clamp(b.rows_end - first, 0, kPanelRows);
    valid[n] = static_cast<__mmask16>((1u << rows) - 1);
  }
  for (int i = 0; i < kRx; ++i)
    for (int n = 0; n < kGroups; ++n)
      acc[i][n] = b.p0 == 0 ? _mm512_setzero_ps()
                            : _mm512_maskz_loadu_ps(
                                  valid[n], b.Y + Extent(b.i0 + i, b.ldy) + b.r0 + kPanelRows * (b.g0 + n));
  const std::uint32_t* x[kRx];
  for (int i = 0; i < kRx; ++i) x[i] = b.X->Row(b.i0 + i);
  const std::uint32_t* w[kGroups];
  for (int n = 0; n < kGroups; ++n) w[n] = b.panel->Group(b.g0 + n);
  for (int p = b.p0; p < b.p1; ++p) {
    __m512i wv[kGroups];
    for (int n = 0; n < kGroups; ++n) wv[n] = _mm512_load_si512(w[n] + Extent(p, kPanelRows));
    for (int i = 0; i < kRx; ++i) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(static_cast<int>(x[i][p]));
      for (int n = 0; n < kGroups; ++n) acc[i][n] = _mm512_dpbf16_ps(acc[i][n], (__m512bh)wv[n], xv);
    }
  }
  for (int i = 0; i < kRx; ++i)
    for (int n = 0; n < kGroups; ++n)
      _mm512_mask_storeu_ps(b.Y + Extent(b.i0 + i, b.ldy) + b.r0 + kPanelRows * (b.g0 + n), valid[n],
                            acc[i][n]);
}

constexpr int kBlockRx = 6, kBlockGroups = 4;
using MultiplyFn = void (*)(const Block&);

template <int kRx>
constexpr MultiplyFn ForGroups(int groups) {
  switch (groups) {
    case 1:
      return Multiply<kRx, 1>;
    case 2:
      return Multiply<kRx, 2>;
    case 3:
      return Multiply<kRx, 3>;
    default:
      return Multiply<kRx, 4>;
  }
}

MultiplyFn MultiplyFor(int rx, int groups) {
  switch (rx) {
    case 1:
      return ForGroups<1>(groups);
    case 2:
      return ForGroups<2>(groups);
    case 3:
      return ForGroups<3>(groups);
    case 4:
      return ForGroups<4>(groups);
    case 5:
      return ForGroups<5>(groups);
    default:
      return ForGroups<6>(groups);
  }
}

void TileAvx512(const Panel& panel, const Bf16Rows& X, int r0, int rows_end, float* Y, std::size_t ldy) {
  for (int p0 = 0; p0 < panel.pairs; p0 += kBlockPairs) {
    const int p1 = std::min(panel.pairs, p0 + kBlockPairs);
    for (int i0 = 0; i0 < X.m; i0 += kBlockRx) {
      const int rx = std::min(kBlockRx, X.m - i0);
      for (int g0 = 0; g0 < panel.groups; g0 += kBlockGroups) {
        const int groups = std::min(kBlockGroups, panel.groups - g0);
        MultiplyFor(rx, groups)(Block{&panel, &X, i0, g0, p0, p1, r0, rows_end, Y, ldy});
      }
    }
  }
}

}  // namespace

Kernels Avx512Bf16Kernels() {
  if (!HasAvx512Bf16()) return {};
  return {RoundRowAvx512, PackGroupAvx512, PackStoredAvx512, TileAvx512};
}

}  // namespace plumb::kernels::bf16

#else

namespace plumb::kernels::bf16 {
Kernels Avx512Bf16Kernels() {
  return {};
}
}  // namespace plumb::kernels::bf16

#endif
