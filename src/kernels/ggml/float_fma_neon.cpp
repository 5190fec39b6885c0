// The fast family's F32, F16 and BF16 rows with NEON: kernels/simd/fma_dot.h's definition through
// fma_dots_neon.h's loop (which says why the bits match), with each format's exact decoder: F32 loaded as it
// is, F16 converted by FCVTL (exact), BF16 widened into the top half of an FP32.
#include "ggml_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "../simd/bytes.h"
#include "../simd/fma_dots_neon.h"
#include "ggml_kernel_table.h"
#include "plumb/formats/dtype.h"

namespace plumb::kernels::ggml::neon {
namespace {

struct NoScale {
  static float Scale(const WeightMatrix&, int, float dot) { return dot; }
};

struct F32 : NoScale {
  static void Load32(const std::uint8_t* row, int c, float32x4_t w[8]) {
    const float* p = reinterpret_cast<const float*>(row) + c;
    for (int v = 0; v < 8; ++v) w[v] = vld1q_f32(p + 4 * v);
  }
  static float At(const std::uint8_t* row, int c) {
    float value;
    std::memcpy(&value, row + 4 * static_cast<std::size_t>(c), sizeof(value));
    return value;
  }
};

struct F16 : NoScale {
  static void Load32(const std::uint8_t* row, int c, float32x4_t w[8]) {
    const std::uint16_t* p = reinterpret_cast<const std::uint16_t*>(row + 2 * static_cast<std::size_t>(c));
    for (int v = 0; v < 8; ++v) w[v] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p + 4 * v)));
  }
  static float At(const std::uint8_t* row, int c) {
    return F16ToF32(ReadU16(row + 2 * static_cast<std::size_t>(c)));
  }
};

struct BF16 : NoScale {
  static void Load32(const std::uint8_t* row, int c, float32x4_t w[8]) {
    const std::uint16_t* p = reinterpret_cast<const std::uint16_t*>(row + 2 * static_cast<std::size_t>(c));
    for (int v = 0; v < 8; ++v) w[v] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p + 4 * v), 16));
  }
  static float At(const std::uint8_t* row, int c) {
    return BF16ToF32(ReadU16(row + 2 * static_cast<std::size_t>(c)));
  }
};

}  // namespace

// The table's NEON column of FMA row dots.
void FillFma(GgmlKernelTable& table) {
  table.At(GgmlType::F32, Isa::kNeon).fma_row_dots = fma_neon::FmaRowDots<F32>;
  table.At(GgmlType::F16, Isa::kNeon).fma_row_dots = fma_neon::FmaRowDots<F16>;
  table.At(GgmlType::BF16, Isa::kNeon).fma_row_dots = fma_neon::FmaRowDots<BF16>;
}

}  // namespace plumb::kernels::ggml::neon

#endif  // defined(__aarch64__)
