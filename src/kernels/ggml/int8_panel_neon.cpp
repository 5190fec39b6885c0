// The int8 panels' kernel with NEON (int8_panel.h): a 16-row group as four quarters of 4 rows, one register
// a chunk of 4 elements of 4 rows, the stored codes made signed (u − o, every type's w fits int8: Q8_0's
// u − 128 wraps to it) so that sdot, or vmull_s8 and two pairwise adds without dotprod, gives each row's 4
// products as an int32 lane (int8_sums_neon.h), exact. The float steps are the definition's, one row per
// lane (vfmaq_f32 is fused, as std::fma is): bitwise scalar::Int8RowDots (int8_panel_test, on qemu).
#include "ggml_kernel_table.h"
#include "ggml_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "../int8_activations/int8_sums_neon.h"
#include "../simd/bytes.h"
#include "int8_panel.h"
#include "int8_panel_driver.h"
#include "plumb/core/extent.h"

namespace plumb::kernels::ggml::neon {
namespace {

// One body for both paths, as a macro because GCC fixes a function's target where it is defined and sdot
// inlines only into a dotprod one (ggml_int8_neon.cpp does the same).
#define PLUMB_NEON_PANEL_KERNEL(NAME, TARGET, SUMS)                                                       \
  template <PanelMin kMin, int G>                                                                         \
  struct NAME {                                                                                           \
    static constexpr int kX = 4;                                                                          \
    static constexpr auto Finish = FinishLanes;                                                           \
    static GroupCodesFn GroupCodesFor(GgmlType) { return nullptr; }                                       \
    template <int RX>                                                                                     \
    TARGET static void Lanes(const PanelArgs& a, const std::uint8_t* group, int x0, float* lanes,         \
                             float* m_lanes) {                                                            \
      const Panel& p = *a.panel;                                                                          \
      const std::size_t term_bytes = p.shape.TermBytes();                                                 \
      const uint8x16_t offset = vdupq_n_u8(static_cast<std::uint8_t>(p.shape.offset));                    \
      const Int8Activations* xs = a.xs + x0;                                                              \
      for (int quarter = 0; quarter < 4; ++quarter) {                                                     \
        for (int L = 0; L < 8; ++L) {                                                                     \
          float32x4_t acc[RX], macc[RX];                                                                  \
          for (int i = 0; i < RX; ++i) {                                                                  \
            acc[i] = vdupq_n_f32(0.0f);                                                                   \
            macc[i] = vdupq_n_f32(0.0f);                                                                  \
          }                                                                                               \
          const std::uint8_t* term = group + a.lane_offset[L];                                            \
          int tau = p.shape.FirstTerm(L);                                                                 \
          for (int k = 0; k < a.lane_terms[L]; ++k, tau += 8, term += term_bytes) {                       \
            const int e0 = tau * G;                                                                       \
            const int b = e0 / 32;                                                                        \
            int8x16_t w[G / 4];                                                                           \
            for (int c = 0; c < G / 4; ++c) {                                                             \
              w[c] = vreinterpretq_s8_u8(vsubq_u8(vld1q_u8(term + 64 * c + 16 * quarter), offset));       \
            }                                                                                             \
            const float* factors = reinterpret_cast<const float*>(term + 16 * G) + 4 * quarter;           \
            const float32x4_t ws = vld1q_f32(factors);                                                    \
            const float32x4_t wm = kMin != PanelMin::kNone ? vld1q_f32(factors + 16) : vdupq_n_f32(0.0f); \
            for (int i = 0; i < RX; ++i) {                                                                \
              const std::uint8_t* q = reinterpret_cast<const std::uint8_t*>(xs[i].q.data()) + e0;         \
              int32x4_t s = vdupq_n_s32(0);                                                               \
              for (int c = 0; c < G / 4; ++c) {                                                           \
                const int8x16_t qc = vreinterpretq_s8_u32(vdupq_n_u32(ReadU32(q + 4 * c)));               \
                s = vaddq_s32(s, int8_sums::SUMS(w[c], qc));                                              \
              }                                                                                           \
              const float32x4_t d_x = vdupq_n_f32(xs[i].d[b]);                                            \
              acc[i] = vfmaq_f32(acc[i], vmulq_f32(ws, d_x), vcvtq_f32_s32(s));                           \
              if constexpr (kMin == PanelMin::kBlockSum) {                                                \
                macc[i] = vfmaq_f32(macc[i], wm, vdupq_n_f32(xs[i].s[b]));                                \
              } else if constexpr (kMin == PanelMin::kTermSum) {                                          \
                const float sigma = static_cast<float>(TermSum(xs[i], G, tau));                           \
                macc[i] = vfmaq_f32(macc[i], vmulq_f32(wm, d_x), vdupq_n_f32(sigma));                     \
              }                                                                                           \
            }                                                                                             \
          }                                                                                               \
          for (int i = 0; i < RX; ++i) {                                                                  \
            vst1q_f32(lanes + (i * 8 + L) * kPanelRows + 4 * quarter, acc[i]);                            \
            vst1q_f32(m_lanes + (i * 8 + L) * kPanelRows + 4 * quarter, macc[i]);                         \
          }                                                                                               \
        }                                                                                                 \
      }                                                                                                   \
    }                                                                                                     \
  };

PLUMB_NEON_PANEL_KERNEL(SdotPanel, PLUMB_INT8_DOTPROD, SdotSums)
PLUMB_NEON_PANEL_KERNEL(PlainPanel, , PlainSums)
#undef PLUMB_NEON_PANEL_KERNEL

template <template <PanelMin, int> class Kernel>
Int8GemmFn PanelFor(GgmlType type) {
  const PanelShape shape = PanelShapeOf(type);
  if (shape.term_elements == 16) return PanelGemm<Kernel<PanelMin::kNone, 16>>;
  if (shape.term_elements == 4) return PanelGemm<Kernel<PanelMin::kTermSum, 4>>;
  if (shape.min == PanelMin::kBlockSum) return PanelGemm<Kernel<PanelMin::kBlockSum, 32>>;
  return PanelGemm<Kernel<PanelMin::kNone, 32>>;
}

}  // namespace

Int8GemmFn Int8PanelGemmPath(bool sdot, GgmlType type) {
  if (!HasPanel(type)) return nullptr;
  return sdot ? PanelFor<SdotPanel>(type) : PanelFor<PlainPanel>(type);
}

void FillInt8Panels(GgmlKernelTable& table) {
  for (int id = 0; id < kGgmlTypeSlots; ++id) {
    const auto type = static_cast<GgmlType>(id);
    table.At(type, Isa::kNeon).int8_panel_gemm = Int8PanelGemmPath(int8_sums::HasDotprod(), type);
  }
}

}  // namespace plumb::kernels::ggml::neon

#endif  // defined(__aarch64__)
