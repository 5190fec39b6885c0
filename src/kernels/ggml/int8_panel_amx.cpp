// The int8 panels' kernel with AMX (int8_panel.h): one tile product multiplies a term of 16 x rows by the
// same term of a group's 16 weight rows, so a term costs one TDPBSSD where AVX-512 VNNI spends G / 4
// dpbusd per x row; the float steps after it are the definition's, one weight row per lane of a 512-bit
// register, as in int8_panel_avx512.cpp. Bitwise scalar::Int8RowDots (int8_gemm_test).
//
// Why the panel serves as the tile unchanged: a term's codes are G / 4 chunks of 64 bytes, each the 16 rows'
// 4 elements in row order (int8_panel.h), which is TDPBSSD's B operand as the Intel SDM defines it (K / 4
// rows; row k holds, for each column n, elements 4k .. 4k + 3). A is the 16 x rows' G bytes of the term, from
// a copy of the x rows at one stride. Both are signed: the codes become w = u − o in place, so the product
// is Σ w · q_x, the definition's s = Σ u · q_x − o · Σ q_x, an exact int32 either way.
//
// Only the G = 32 types take tiles. Every term's sums leave the tiles to be scaled in float (the
// definition scales each term on its own), and that store and the scaling, not the product, are the cost:
// measured on a Xeon with AMX, a 16 × 16 × 32 product with its store ~10 ns, its scaling ~11 ns, the two
// barely overlapping. With G = 16 (Q3_K, Q6_K) the same costs buy half the products and VNNI is faster
// (docs/performance.md, "AMX"); Q2_K's G = 4 would use a sixteenth of a tile's depth.
#include "ggml_kernels.h"

#if defined(__x86_64__)

#include "../simd/amx_tile_config.h"
#include "../simd/avx512_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "int8_panel.h"
#include "int8_panel_avx512.h"
#include "int8_panel_driver.h"
#include "plumb/core/extent.h"

#define PLUMB_AMX \
  __attribute__((target("avx2,f16c,fma,avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-int8")))

namespace plumb::kernels::ggml::avx512 {
namespace {

constexpr int kTileRows = 16;  // x rows per tile product (A's rows, C's rows)

// Tiles 0 .. 3 hold the sums of a chunk's 4 terms; 4, 5 take turns as A and 6, 7 as B.
AmxTileConfig ConfigFor(int G) {
  AmxTileConfig config;
  for (int c = 0; c < 4; ++c) {
    config.colsb[c] = 64;  // C: 16 int32 sums per x row, one per weight row
    config.rows[c] = kTileRows;
  }
  for (int a : {4, 5}) {
    config.colsb[a] = static_cast<std::uint16_t>(G);  // A: the term's G bytes per x row
    config.rows[a] = kTileRows;
  }
  for (int b : {6, 7}) {
    config.colsb[b] = 64;  // B: the panel's G / 4 chunks
    config.rows[b] = static_cast<std::uint8_t>(G / 4);
  }
  return config;
}

// One term's sums, C[i][j] = Σ x_i · w_j over its G elements, for 16 x rows i and 16 weight rows j.
struct alignas(64) TermSums {
  std::int32_t v[kTileRows * 16];
};

// One term's product on tiles C, A, B: sums = A · B. The tile numbers are immediates, hence one function per
// triple. Written as asm rather than with GCC's intrinsics because those do not tell the compiler that
// memory is written: here `sums` is an output, so its reads below stay after it. (x and the panel, which
// the tiles read, are not written while the tiles run.)
#define PLUMB_TERM_PRODUCT(NAME, C, A, B)                                                         \
  inline void NAME(const std::int8_t* x, long x_stride, const std::uint8_t* w, TermSums* sums) {  \
    __asm__ volatile("tilezero %%tmm" #C                                                          \
                     "\n\t"                                                                       \
                     "tileloadd (%[x],%[xs],1), %%tmm" #A                                         \
                     "\n\t"                                                                       \
                     "tileloadd (%[w],%[ws],1), %%tmm" #B                                         \
                     "\n\t"                                                                       \
                     "tdpbssd %%tmm" #B ", %%tmm" #A ", %%tmm" #C                                 \
                     "\n\t"                                                                       \
                     "tilestored %%tmm" #C ", (%[s],%[ws],1)"                                     \
                     : "=m"(*sums)                                                                \
                     : [x] "r"(x), [xs] "r"(x_stride), [w] "r"(w), [ws] "r"(64L), [s] "r"(sums)); \
  }
PLUMB_TERM_PRODUCT(TermProduct0, 0, 4, 6)
PLUMB_TERM_PRODUCT(TermProduct1, 1, 5, 7)
PLUMB_TERM_PRODUCT(TermProduct2, 2, 4, 6)
PLUMB_TERM_PRODUCT(TermProduct3, 3, 5, 7)
#undef PLUMB_TERM_PRODUCT

// The codes of every term of the panel as w = u − o (a byte's wrap-around gives w's two's complement).
PLUMB_AMX void SignCodes(Panel& panel) {
  const int offset = panel.shape.offset;
  if (offset == 0) return;
  const int G = panel.shape.term_elements;
  const __m512i o = _mm512_set1_epi8(static_cast<char>(offset));
  for (int g = 0; g < panel.groups; ++g) {
    std::uint8_t* term = panel.Group(g);
    for (int t = 0; t < panel.terms; ++t, term += panel.shape.TermBytes()) {
      for (int c = 0; c < G / 4; ++c) {
        std::uint8_t* chunk = term + 64 * c;
        _mm512_store_si512(chunk, _mm512_sub_epi8(_mm512_load_si512(chunk), o));
      }
    }
  }
}

// 16 x rows as the tiles and the scaling read them: q copied to one stride (rows past the last x row zeros,
// which add nothing and are never written out), d and s through the rows' own arrays. The stride is the
// row's bytes and 64 more, so that a tile's 16 rows fall in different sets of the L1 cache: at a stride of
// 4 KiB or its multiples (K = 8192) all 16 would share one 12-way set.
//
// A thread keeps its copies from call to call: Gemm hands every tile of weight rows the same x rows, and
// the projections that share an input (q, k, v; gate, up) the same ones again, so the copy is made once per
// thread, not once per tile. Int8Activations::serial tells that a row is still the one copied.
struct XTile {
  std::vector<std::int8_t> q;  // [16][stride]
  long stride = 0;
  // Per row: the serial of the x row copied there, kZeros for zeros, 0 for a copy that no serial names.
  static constexpr std::uint64_t kZeros = ~std::uint64_t{0};
  std::uint64_t serial[kTileRows] = {};
  const float* d[kTileRows];
  const float* s[kTileRows];

  void Fill(const Int8Activations* xs, int rx, int cols) {
    const std::size_t bytes = static_cast<std::size_t>(kTileRows) * static_cast<std::size_t>(cols + 64);
    if (stride != cols + 64 || q.size() != bytes) {
      stride = cols + 64;
      q.assign(bytes, 0);
      for (std::uint64_t& n : serial) n = kZeros;
    }
    for (int i = 0; i < kTileRows; ++i) {
      const Int8Activations& x = xs[i < rx ? i : 0];  // a padded row's factors are read, never stored
      d[i] = x.d.data();
      s[i] = x.s.data();
      if (i < rx && (x.serial == 0 || x.serial != serial[i])) {
        std::memcpy(q.data() + Extent(i, stride), x.q.data(), static_cast<std::size_t>(cols));
        serial[i] = x.serial;
      } else if (i >= rx && serial[i] != kZeros) {
        std::memset(q.data() + Extent(i, stride), 0, static_cast<std::size_t>(cols));
        serial[i] = kZeros;
      }
    }
  }
};

constexpr int kChunk = 4;  // terms whose products are in flight together, one per C tile

template <PanelMin kMin, int G>
struct AmxKernel {
  // Lane chains of one group against the 16 x rows of `x`: lanes[i][L][j] as the driver's Lanes write them.
  // The group's terms are taken in the panel's order (lane 0's, then lane 1's, ...: term t of the group is
  // x term tau[t] in lane lane[t]), 4 at a time, the next 4's products issued before this 4's scaling, so
  // that the tiles work while the vector units scale.
  PLUMB_AMX static void Lanes(const PanelShape& shape, const Panel& p, const int* tau, const int* lane,
                              const XTile& x, const std::uint8_t* group, float* lanes, float* m_lanes) {
    const std::size_t term_bytes = shape.TermBytes();
    const long stride = x.stride;
    const std::int8_t* const xq = x.q.data();
    const int terms = p.terms;
    TermSums sums[2][kChunk];
    // The tiles read x and the panel behind the compiler's back: every store to them is done before this.
    __asm__ volatile("" ::: "memory");
    const auto issue = [&](int chunk) {
      const int t0 = chunk * kChunk;
      const std::uint8_t* w = group + static_cast<std::size_t>(t0) * term_bytes;
      TermSums* out = sums[chunk % 2];
      TermProduct0(xq + tau[t0] * G, stride, w, out);
      if (t0 + 1 < terms) TermProduct1(xq + tau[t0 + 1] * G, stride, w + term_bytes, out + 1);
      if (t0 + 2 < terms) TermProduct2(xq + tau[t0 + 2] * G, stride, w + 2 * term_bytes, out + 2);
      if (t0 + 3 < terms) TermProduct3(xq + tau[t0 + 3] * G, stride, w + 3 * term_bytes, out + 3);
    };
    for (int L = 0; L < 8; ++L) {  // lanes without terms (K under 8 terms) stay zero
      if (p.LaneTerms(L) == 0) {
        for (int i = 0; i < kTileRows; ++i)
          _mm512_store_ps(lanes + (i * 8 + L) * kPanelRows, _mm512_setzero_ps());
      }
    }
    __m512 acc[kTileRows];
    for (__m512& v : acc) v = _mm512_setzero_ps();
    const int chunks = (terms + kChunk - 1) / kChunk;
    issue(0);
    for (int c = 0; c < chunks; ++c) {
      if (c + 1 < chunks) issue(c + 1);
      for (int u = 0; u < kChunk && c * kChunk + u < terms; ++u) {
        const int t = c * kChunk + u;
        const std::uint8_t* w = group + static_cast<std::size_t>(t) * term_bytes;
        const __m512 ws = _mm512_load_ps(reinterpret_cast<const float*>(w + 16 * G));
        const int b = tau[t] * G / 32;
        for (int i = 0; i < kTileRows; ++i) {
          const __m512i s = _mm512_load_si512(sums[c % 2][u].v + 16 * i);
          acc[i] =
              _mm512_fmadd_ps(_mm512_mul_ps(ws, _mm512_set1_ps(x.d[i][b])), _mm512_cvtepi32_ps(s), acc[i]);
        }
        if (t + 1 == terms || lane[t + 1] != lane[t]) {  // the lane's last term: its chain is done
          for (int i = 0; i < kTileRows; ++i) {
            _mm512_store_ps(lanes + (i * 8 + lane[t]) * kPanelRows, acc[i]);
            acc[i] = _mm512_setzero_ps();
          }
        }
      }
    }
    if constexpr (kMin == PanelMin::kBlockSum) {
      // m_lane = fma(wm, s_x[b], m_lane), lane by lane: chains of their own, which need no tiles.
      for (int L = 0; L < 8; ++L) {
        if (p.LaneTerms(L) == 0) {
          for (int i = 0; i < kTileRows; ++i)
            _mm512_store_ps(m_lanes + (i * 8 + L) * kPanelRows, _mm512_setzero_ps());
        }
      }
      for (int t = 0; t < terms; ++t) {
        const __m512 wm = _mm512_load_ps(
            reinterpret_cast<const float*>(group + static_cast<std::size_t>(t) * term_bytes + 16 * G + 64));
        const int b = tau[t] * G / 32;
        for (int i = 0; i < kTileRows; ++i) acc[i] = _mm512_fmadd_ps(wm, _mm512_set1_ps(x.s[i][b]), acc[i]);
        if (t + 1 == terms || lane[t + 1] != lane[t]) {
          for (int i = 0; i < kTileRows; ++i) {
            _mm512_store_ps(m_lanes + (i * 8 + lane[t]) * kPanelRows, acc[i]);
            acc[i] = _mm512_setzero_ps();
          }
        }
      }
    }
  }
};

// An Int8GemmFn on AMX: PanelGemm's walk (int8_panel_driver.h) with 16 x rows a block, copied to one stride
// for the tiles (XTile).
template <PanelMin kMin, int G>
PLUMB_AMX void AmxPanelGemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs,
                            int m, float* Y, std::size_t ldy) {
  if (row_end <= row_begin || m <= 0) return;
  thread_local Panel panel;
  thread_local std::vector<XTile> x_tiles;
  if (x_tiles.size() < static_cast<std::size_t>((m + kTileRows - 1) / kTileRows))
    x_tiles.resize(static_cast<std::size_t>((m + kTileRows - 1) / kTileRows));
  RepackRows(W, row_begin, row_end, panel, GatheredGroupCodesFor(W.type));
  CheckGroupSums(panel.shape, xs, m);
  SignCodes(panel);
  // Term t of a group, in the panel's order: its x term and lane.
  thread_local std::vector<int> tau, lane;
  tau.clear();
  lane.clear();
  for (int L = 0; L < 8; ++L) {
    for (int k = 0; k < panel.LaneTerms(L); ++k) {
      tau.push_back(panel.shape.FirstTerm(L) + 8 * k);
      lane.push_back(L);
    }
  }
  alignas(64) float lanes[kTileRows * 8 * kPanelRows];
  alignas(64) float m_lanes[kTileRows * 8 * kPanelRows] = {};
  const AmxTileConfig config = ConfigFor(G);
  _tile_loadconfig(&config);
  for (int x0 = 0; x0 < m; x0 += kTileRows) {
    const int rx = std::min(kTileRows, m - x0);
    XTile& x = x_tiles[static_cast<std::size_t>(x0 / kTileRows)];
    x.Fill(xs + x0, rx, W.cols);
    for (int g = 0; g < panel.groups; ++g) {
      AmxKernel<kMin, G>::Lanes(panel.shape, panel, tau.data(), lane.data(), x, panel.Group(g), lanes,
                                m_lanes);
      const int r0 = row_begin + g * kPanelRows;
      FinishLanes16(panel.shape, lanes, m_lanes, rx, std::min(kPanelRows, row_end - r0), Y + Extent(x0, ldy),
                    ldy, r0);
    }
  }
  _tile_release();
}

}  // namespace

Int8GemmFn AmxPanelGemmFor(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
      return AmxPanelGemm<PanelMin::kNone, 32>;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return AmxPanelGemm<PanelMin::kBlockSum, 32>;
    default:
      return nullptr;
  }
}

}  // namespace plumb::kernels::ggml::avx512

#endif  // defined(__x86_64__)
