// The int8 panels' kernel with AVX2 (int8_panel.h): a 16-row group as two halves of 8 rows, one 256-bit
// register a chunk of 4 elements of 8 rows; maddubs + madd give each row's 4 products as an int32 lane
// (int8_sums_x86.h). Codes up to 63 (every type but Q8_0) go in as stored, two chunks' int16 pairs added
// before one madd (4·63·127 < 2^15); Q8_0's stored u = w + 128 would saturate, so its w goes in signed with
// the sign moved onto x. The sums are exact, the float steps the definition's, one row per lane: bitwise
// scalar::Int8RowDots (int8_panel_test).
#include "ggml_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../int8_activations/int8_sums_x86.h"
#include "../simd/bytes.h"
#include "ggml_kernel_table.h"
#include "int8_panel.h"
#include "int8_panel_driver.h"
#include "plumb/core/extent.h"

namespace plumb::kernels::ggml::avx2 {
namespace {

// kWide: codes up to 255 (Q8_0), summed as signed w = u − 128 (no offset step after).
template <PanelMin kMin, int G, bool kOffset, bool kWide>
struct PanelKernel {
  static constexpr int kX = 4;  // 4 x rows × 3 accumulators, in AVX2's 16 registers with the weights
  static GroupCodesFn GroupCodesFor(GgmlType) { return nullptr; }  // no gathers worth it on AVX2
  template <int RX>
  PLUMB_INT8_AVX2 static void Lanes(const PanelArgs& a, const std::uint8_t* group, int x0, float* lanes,
                                    float* m_lanes) {
    const Panel& p = *a.panel;
    const std::size_t term_bytes = p.shape.TermBytes();
    const int offset = p.shape.offset;
    const Int8Activations* xs = a.xs + x0;
    for (int half = 0; half < 2; ++half) {
      for (int L = 0; L < 8; ++L) {
        __m256 acc[RX], macc[RX];
        for (int i = 0; i < RX; ++i) {
          acc[i] = _mm256_setzero_ps();
          macc[i] = _mm256_setzero_ps();
        }
        const std::uint8_t* term = group + a.lane_offset[L] + 32 * half;
        int tau = p.shape.FirstTerm(L);
        for (int k = 0; k < a.lane_terms[L]; ++k, tau += 8, term += term_bytes) {
          const int e0 = tau * G;
          const int b = e0 / 32;
          __m256i w[G / 4];
          for (int c = 0; c < G / 4; ++c) {
            w[c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(term + 64 * c));
            if constexpr (kWide) w[c] = _mm256_xor_si256(w[c], _mm256_set1_epi8(static_cast<char>(0x80)));
          }
          const __m256 ws = _mm256_load_ps(reinterpret_cast<const float*>(term + 16 * G));
          __m256 wm = _mm256_setzero_ps();
          if constexpr (kMin != PanelMin::kNone) {
            wm = _mm256_load_ps(reinterpret_cast<const float*>(term + 16 * G + 64));
          }
          for (int i = 0; i < RX; ++i) {
            const std::uint8_t* q = reinterpret_cast<const std::uint8_t*>(xs[i].q.data()) + e0;
            __m256i s = _mm256_setzero_si256();
            if constexpr (kWide) {
              for (int c = 0; c < G / 4; ++c) {
                const int8_sums::SignMoved moved =
                    int8_sums::MoveSign(w[c], _mm256_set1_epi32(static_cast<int>(ReadU32(q + 4 * c))));
                s = int8_sums::Avx2(s, moved.u, moved.q);
              }
            } else if constexpr (G == 4) {
              s = int8_sums::Avx2(s, w[0], _mm256_set1_epi32(static_cast<int>(ReadU32(q))));
            } else {
              for (int c = 0; c < G / 4; c += 2) {
                const __m256i q1 = _mm256_set1_epi32(static_cast<int>(ReadU32(q + 4 * c)));
                const __m256i q2 = _mm256_set1_epi32(static_cast<int>(ReadU32(q + 4 * c + 4)));
                s = _mm256_add_epi32(s, int8_sums::Avx2Pair(w[c], q1, w[c + 1], q2));
              }
            }
            const std::int32_t term_sum = TermSum(xs[i], G, tau);
            if constexpr (kOffset && !kWide) s = _mm256_sub_epi32(s, _mm256_set1_epi32(offset * term_sum));
            const __m256 d_x = _mm256_set1_ps(xs[i].d[b]);
            acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(ws, d_x), _mm256_cvtepi32_ps(s), acc[i]);
            if constexpr (kMin == PanelMin::kBlockSum) {
              macc[i] = _mm256_fmadd_ps(wm, _mm256_set1_ps(xs[i].s[b]), macc[i]);
            } else if constexpr (kMin == PanelMin::kTermSum) {
              macc[i] = _mm256_fmadd_ps(_mm256_mul_ps(wm, d_x), _mm256_set1_ps(static_cast<float>(term_sum)),
                                        macc[i]);
            }
          }
        }
        for (int i = 0; i < RX; ++i) {
          _mm256_store_ps(lanes + (i * 8 + L) * kPanelRows + 8 * half, acc[i]);
          if constexpr (kMin != PanelMin::kNone) {
            _mm256_store_ps(m_lanes + (i * 8 + L) * kPanelRows + 8 * half, macc[i]);
          }
        }
      }
    }
  }

  // FinishLanes with 8 rows to a register: ReduceLanes' tree, lane by lane; the last rows one at a time.
  PLUMB_INT8_AVX2 static void Finish(const PanelShape& shape, const float* lanes, const float* m_lanes,
                                     int rx, int rows, float* Y, std::size_t ldy, int r0) {
    for (int i = 0; i < rx; ++i) {
      for (int half = 0; half < 2; ++half) {
        __m256 y = Tree(lanes + i * 8 * kPanelRows + 8 * half);
        if constexpr (kMin != PanelMin::kNone) {
          const __m256 m = Tree(m_lanes + i * 8 * kPanelRows + 8 * half);
          y = shape.min_subtracts ? _mm256_sub_ps(y, m) : _mm256_add_ps(y, m);
        }
        float* out = Y + Extent(i, ldy) + r0 + 8 * half;
        const int here = rows - 8 * half;
        if (here >= 8) {
          _mm256_storeu_ps(out, y);
        } else {
          alignas(32) float part[8];
          _mm256_store_ps(part, y);
          for (int j = 0; j < here; ++j) out[j] = part[j];
        }
      }
    }
  }

  PLUMB_INT8_AVX2 static __m256 Tree(const float* l) {
    __m256 v[8];
    for (int L = 0; L < 8; ++L) v[L] = _mm256_load_ps(l + L * kPanelRows);
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6])),
                         _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7])));
  }
};

template <PanelMin kMin, int G, bool kOffset, bool kWide = false>
void Enter(GgmlKernelTable& table, GgmlType type) {
  table.At(type, Isa::kAvx2).int8_panel_gemm = PanelGemm<PanelKernel<kMin, G, kOffset, kWide>>;
}

}  // namespace

void FillInt8Panels(GgmlKernelTable& table) {
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q5_0}) Enter<PanelMin::kNone, 32, true>(table, type);
  Enter<PanelMin::kNone, 32, true, true>(table, GgmlType::Q8_0);
  for (GgmlType type : {GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K}) {
    Enter<PanelMin::kBlockSum, 32, false>(table, type);
  }
  for (GgmlType type : {GgmlType::Q3_K, GgmlType::Q6_K}) Enter<PanelMin::kNone, 16, true>(table, type);
  Enter<PanelMin::kTermSum, 4, false>(table, GgmlType::Q2_K);
}

}  // namespace plumb::kernels::ggml::avx2

#endif  // defined(__x86_64__)
