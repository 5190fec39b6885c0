// The int8 panels' kernel with AVX-512 VNNI (int8_panel.h): one 512-bit register holds a chunk of 4
// elements of all 16 rows of a group, and dpbusd adds each row's 4 products into its int32 lane, so a term
// of G elements is G / 4 dpbusd per x row, exact, with no int16 step; its float steps are the definition's,
// one row per lane. Bitwise scalar::Int8RowDots (int8_gemm_test). Entered in the AVX-512 column only
// where the CPU has VNNI; otherwise AVX-512 hosts take AVX2's panels by the table's fallback. Where the CPU
// has AMX, its tiles take the G = 32 types instead (int8_panel_amx.cpp).
#include "ggml_kernels.h"

#if defined(__x86_64__)

#include "../simd/avx512_intrinsics.h"

#include <cstdint>

#include "../int8_activations/int8_sums_x86.h"
#include "../simd/bytes.h"
#include "ggml_kernel_table.h"
#include "int8_panel.h"
#include "int8_panel_avx512.h"
#include "int8_panel_driver.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/isa.h"

namespace plumb::kernels::ggml::avx512 {
namespace {

// 16 rows' 32 bits as the Word of int8_panel_codes_body.h: each read a gather of the same offset in the 16
// rows (row j at j · row_bytes), so a group's codes take one gather and a few operations per chunk of 4
// elements, where row by row they take that many per row.
struct GroupWord {
  using Word = __m512i;
  __m512i rows;
  PLUMB_INT8_VNNI Word Load(const std::uint8_t* p) const { return _mm512_i32gather_epi32(rows, p, 1); }
  PLUMB_INT8_VNNI static void Store(std::uint8_t* p, Word w) { _mm512_store_si512(p, w); }
  PLUMB_INT8_VNNI static Word Set(std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  PLUMB_INT8_VNNI static Word Shr(Word x, int n) { return _mm512_srl_epi32(x, _mm_cvtsi32_si128(n)); }
  PLUMB_INT8_VNNI static Word Shl(Word x, int n) { return _mm512_sll_epi32(x, _mm_cvtsi32_si128(n)); }
  PLUMB_INT8_VNNI static Word And(Word x, Word y) { return _mm512_and_si512(x, y); }
  PLUMB_INT8_VNNI static Word Or(Word x, Word y) { return _mm512_or_si512(x, y); }
  PLUMB_INT8_VNNI static Word Xor(Word x, Word y) { return _mm512_xor_si512(x, y); }
  PLUMB_INT8_VNNI static Word Add(Word x, Word y) { return _mm512_add_epi32(x, y); }
  PLUMB_INT8_VNNI static Word Mul(Word x, Word y) { return _mm512_mullo_epi32(x, y); }
};

#define PLUMB_BODY_TARGET PLUMB_INT8_VNNI
#include "int8_panel_codes_body.h"
#undef PLUMB_BODY_TARGET

template <GgmlType T>
PLUMB_INT8_VNNI void GatheredGroupCodes(const WeightMatrix& W, int r0, const Panel& panel,
                                        const std::size_t* lane_offset, std::uint8_t* group) {
  const GroupWord o{
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(W.row_bytes)))};
  GroupCodes<T>(o, W.Row(r0), panel, lane_offset, group, 0);
}

template <PanelMin kMin, int G, bool kOffset>
struct PanelKernel {
  // 6 x rows: 6 × 3 accumulators, a term's G / 4 weight registers and its factors stay in the 32 registers.
  static constexpr int kX = 6;
  static GroupCodesFn GroupCodesFor(GgmlType type) { return GatheredGroupCodesFor(type); }
  template <int RX>
  PLUMB_INT8_VNNI static void Lanes(const PanelArgs& a, const std::uint8_t* group, int x0, float* lanes,
                                    float* m_lanes) {
    const Panel& p = *a.panel;
    const std::size_t term_bytes = p.shape.TermBytes();
    const int offset = p.shape.offset;
    const Int8Activations* xs = a.xs + x0;
    for (int L = 0; L < 8; ++L) {
      __m512 acc[RX], macc[RX];
      for (int i = 0; i < RX; ++i) {
        acc[i] = _mm512_setzero_ps();
        macc[i] = _mm512_setzero_ps();
      }
      const std::uint8_t* term = group + a.lane_offset[L];
      int tau = p.shape.FirstTerm(L);
      for (int k = 0; k < a.lane_terms[L]; ++k, tau += 8, term += term_bytes) {
        const int e0 = tau * G;
        const int b = e0 / 32;
        __m512i w[G / 4];
        for (int c = 0; c < G / 4; ++c) w[c] = _mm512_load_si512(term + 64 * c);
        const __m512 ws = _mm512_load_ps(reinterpret_cast<const float*>(term + 16 * G));
        __m512 wm = _mm512_setzero_ps();
        if constexpr (kMin != PanelMin::kNone)
          wm = _mm512_load_ps(reinterpret_cast<const float*>(term + 16 * G + 64));
        for (int i = 0; i < RX; ++i) {
          const std::uint8_t* q = reinterpret_cast<const std::uint8_t*>(xs[i].q.data()) + e0;
          // Two chains of dpbusd (even and odd chunks) halve the wait on its latency.
          __m512i s = _mm512_setzero_si512();
          __m512i s_odd = _mm512_setzero_si512();
          for (int c = 0; c < G / 4; c += 2) {
            s = _mm512_dpbusd_epi32(s, w[c], _mm512_set1_epi32(static_cast<int>(ReadU32(q + 4 * c))));
            if constexpr (G > 4) {
              s_odd = _mm512_dpbusd_epi32(s_odd, w[c + 1],
                                          _mm512_set1_epi32(static_cast<int>(ReadU32(q + 4 * c + 4))));
            }
          }
          if constexpr (G > 4) s = _mm512_add_epi32(s, s_odd);
          const std::int32_t term_sum = TermSum(xs[i], G, tau);
          if constexpr (kOffset) s = _mm512_sub_epi32(s, _mm512_set1_epi32(offset * term_sum));
          const __m512 d_x = _mm512_set1_ps(xs[i].d[b]);
          acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(ws, d_x), _mm512_cvtepi32_ps(s), acc[i]);
          if constexpr (kMin == PanelMin::kBlockSum) {
            macc[i] = _mm512_fmadd_ps(wm, _mm512_set1_ps(xs[i].s[b]), macc[i]);
          } else if constexpr (kMin == PanelMin::kTermSum) {
            macc[i] = _mm512_fmadd_ps(_mm512_mul_ps(wm, d_x), _mm512_set1_ps(static_cast<float>(term_sum)),
                                      macc[i]);
          }
        }
      }
      for (int i = 0; i < RX; ++i) {
        _mm512_store_ps(lanes + (i * 8 + L) * kPanelRows, acc[i]);
        if constexpr (kMin != PanelMin::kNone) _mm512_store_ps(m_lanes + (i * 8 + L) * kPanelRows, macc[i]);
      }
    }
  }

  static void Finish(const PanelShape& shape, const float* lanes, const float* m_lanes, int rx, int rows,
                     float* Y, std::size_t ldy, int r0) {
    FinishLanes16(shape, lanes, m_lanes, rx, rows, Y, ldy, r0);
  }
};

PLUMB_INT8_VNNI __m512 Tree(const float* l) {
  __m512 v[8];
  for (int L = 0; L < 8; ++L) v[L] = _mm512_load_ps(l + L * kPanelRows);
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                       _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7])));
}

Int8GemmFn VnniPanelGemmFor(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
      return PanelGemm<PanelKernel<PanelMin::kNone, 32, true>>;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return PanelGemm<PanelKernel<PanelMin::kBlockSum, 32, false>>;
    case GgmlType::Q3_K:
    case GgmlType::Q6_K:
      return PanelGemm<PanelKernel<PanelMin::kNone, 16, true>>;
    case GgmlType::Q2_K:
      return PanelGemm<PanelKernel<PanelMin::kTermSum, 4, false>>;
    default:
      return nullptr;
  }
}

// PLUMB_AMX=0 leaves AMX unused (an A/B of the two paths on one host).
bool AmxWanted() {
  return HasAmxInt8() && !EnvTurnsOff("PLUMB_AMX");
}

}  // namespace

GroupCodesFn GatheredGroupCodesFor(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return GatheredGroupCodes<GgmlType::Q4_0>;
    case GgmlType::Q4_1:
      return GatheredGroupCodes<GgmlType::Q4_1>;
    case GgmlType::Q5_0:
      return GatheredGroupCodes<GgmlType::Q5_0>;
    case GgmlType::Q5_1:
      return GatheredGroupCodes<GgmlType::Q5_1>;
    case GgmlType::Q8_0:
      return GatheredGroupCodes<GgmlType::Q8_0>;
    case GgmlType::Q2_K:
      return GatheredGroupCodes<GgmlType::Q2_K>;
    case GgmlType::Q3_K:
      return GatheredGroupCodes<GgmlType::Q3_K>;
    case GgmlType::Q4_K:
      return GatheredGroupCodes<GgmlType::Q4_K>;
    case GgmlType::Q5_K:
      return GatheredGroupCodes<GgmlType::Q5_K>;
    case GgmlType::Q6_K:
      return GatheredGroupCodes<GgmlType::Q6_K>;
    default:
      return nullptr;
  }
}

PLUMB_INT8_VNNI void FinishLanes16(const PanelShape& shape, const float* lanes, const float* m_lanes, int rx,
                                   int rows, float* Y, std::size_t ldy, int r0) {
  const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
  for (int i = 0; i < rx; ++i) {
    __m512 y = Tree(lanes + i * 8 * kPanelRows);
    if (shape.min != PanelMin::kNone) {
      const __m512 m = Tree(m_lanes + i * 8 * kPanelRows);
      y = shape.min_subtracts ? _mm512_sub_ps(y, m) : _mm512_add_ps(y, m);
    }
    _mm512_mask_storeu_ps(Y + Extent(i, ldy) + r0, valid, y);
  }
}

Int8GemmFn Int8PanelGemmPath(bool amx, GgmlType type) {
  if (amx) {
    if (Int8GemmFn fn = AmxPanelGemmFor(type)) return fn;
  }
  return VnniPanelGemmFor(type);
}

void FillInt8Panels(GgmlKernelTable& table) {
  if (!HasAvx512Vnni()) return;
  const bool amx = AmxWanted();
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                        GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    table.At(type, Isa::kAvx512).int8_panel_gemm = Int8PanelGemmPath(amx, type);
  }
}

}  // namespace plumb::kernels::ggml::avx512

#endif  // defined(__x86_64__)
