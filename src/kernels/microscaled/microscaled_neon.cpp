// The microscaled format's row dots with NEON: the definition (microscaled_format.cpp), eight lanes at a
// time.
//
// Why the bits match the definition: one Lanes8 accumulator per row holds scalar::Dot's eight lanes (column i
// in lane i mod 8; every group of 8 columns starts at a multiple of 8, and so lies inside one block of 16 or
// 32); each step is vmulq_f32 then vaddq_f32 (neon_lanes.h); a row's last cols mod 8 columns are added lane
// by lane in scalar code as scalar::Dot's tail loop does (neon_lanes::AddTail), the lanes are reduced in its
// tree, and the tensor scale multiplies the reduced dot. Each weight is the definition's product, the
// element's exact value times its block's scale in one rounded (here exact) multiply:
//   FP4: the 8 nibbles of 4 bytes (element 2i in the low nibble of byte i), each code's sign moved to bit 15
//   and its exponent and mantissa 9 bits up: an FP16 of 2^-14 times the E2M1 value (bias 15 instead of 1;
//   code 1, the subnormal 0.5, becomes the FP16 subnormal 2^-15), converted exactly and multiplied by 2^14,
//   exactly. Code 8 gives −0, as Fp4ToF32.
//   FP8: fp8_neon.h's DecodeFp8, Fp8ToF32's values (NaNs as the quiet NaN of their sign).
//   Block scales: E8M0DecodeTable (or Fp8DecodeTable for NVFP4's E4M3), one lookup per 8 columns.
#include "microscaled_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "../fp8/fp8_neon.h"
#include "../simd/neon_lanes.h"
#include "plumb/core/extent.h"
#include "plumb/formats/e8m0.h"
#include "plumb/formats/fp8.h"

namespace plumb::kernels::microscaled::neon {
namespace {

using neon_lanes::Lanes8;

constexpr int kRows = 4;

enum class Element : std::uint8_t { kFp4, kE4M3, kE5M2 };

const float* ScaleTable(MicroscalingScheme scheme) {
  return scheme == MicroscalingScheme::kNvfp4 ? Fp8DecodeTable(Fp8Format::kE4M3) : E8M0DecodeTable();
}

// The 8 FP4 codes of codes[0 .. 4) as their values, Fp4ToF32's bit for bit.
inline Lanes8 DecodeFp4(const std::uint8_t* codes) {
  std::uint32_t word;
  std::memcpy(&word, codes, sizeof word);
  const uint8x8_t bytes = vreinterpret_u8_u32(vdup_n_u32(word));
  // Low nibble of byte i, then its high nibble: elements 2i, 2i + 1.
  const uint16x8_t c = vmovl_u8(vzip1_u8(vand_u8(bytes, vdup_n_u8(0x0F)), vshr_n_u8(bytes, 4)));
  const uint16x8_t half = vorrq_u16(vshlq_n_u16(vandq_u16(c, vdupq_n_u16(0x8)), 12),
                                    vshlq_n_u16(vandq_u16(c, vdupq_n_u16(0x7)), 9));
  return neon_lanes::Mul8(neon_lanes::HalvesToFloat(half), vdupq_n_f32(0x1p14f));
}

// Columns c .. c + 7 of a row (c a multiple of 8) as their elements' values.
template <Element kElement>
inline Lanes8 Elements8(const std::uint8_t* codes, int c) {
  if constexpr (kElement == Element::kFp4) {
    return DecodeFp4(codes + c / 2);
  } else if constexpr (kElement == Element::kE4M3) {
    return fp8::neon::DecodeFp8<Fp8Format::kE4M3>(vld1_u8(codes + c));
  } else {
    return fp8::neon::DecodeFp8<Fp8Format::kE5M2>(vld1_u8(codes + c));
  }
}

// y[r0 .. r0 + R) of W (R rows side by side: independent accumulator chains, x loaded once for them).
template <Element kElement, int R>
void Dots(const WeightMatrix& W, int r0, const float* x, float* y) {
  const MicroscalingScheme scheme = W.mx_scheme;
  const int cols = W.cols, block = MicroscalingBlockSize(scheme), blocks = MicroscaledBlocks(scheme, cols);
  const float* table = ScaleTable(scheme);
  const std::uint8_t* codes[R];
  const std::uint8_t* row_scales[R];
  Lanes8 acc[R];
  for (int i = 0; i < R; ++i) {
    codes[i] = W.Row(r0 + i);
    row_scales[i] = W.mx_scales + Extent(r0 + i, blocks);
    acc[i] = neon_lanes::Zero8();
  }
  int c = 0;
  for (; c + 8 <= cols; c += 8) {
    const Lanes8 xv = neon_lanes::Load8(x + c);
    for (int i = 0; i < R; ++i) {
      const float32x4_t scale = vdupq_n_f32(table[row_scales[i][c / block]]);
      neon_lanes::MulAdd(acc[i], neon_lanes::Mul8(Elements8<kElement>(codes[i], c), scale), xv);
    }
  }
  for (int i = 0; i < R; ++i) {
    if (c < cols) {
      float w[8] = {};
      for (int t = 0; t < cols - c; ++t) {
        w[t] = MicroscaledElement(scheme, MicroscaledElementCode(scheme, codes[i], c + t)) *
               table[row_scales[i][(c + t) / block]];
      }
      neon_lanes::AddTail(acc[i], neon_lanes::Load8(w), x + c, cols - c);
    }
    float lane[8];
    neon_lanes::Store8(acc[i], lane);
    y[r0 + i] = W.mx_tensor_scale * neon_lanes::ReduceLanes(lane);  // the epilogue, after the dot
  }
}

template <Element kElement>
void RowDotsOf(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) Dots<kElement, kRows>(W, r, x, y);
  for (; r < row_end; ++r) Dots<kElement, 1>(W, r, x, y);
}

}  // namespace

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  switch (W.mx_scheme) {
    case MicroscalingScheme::kMxfp4:
    case MicroscalingScheme::kNvfp4:
      return RowDotsOf<Element::kFp4>(W, row_begin, row_end, x, y);
    case MicroscalingScheme::kMxfp8E4M3:
      return RowDotsOf<Element::kE4M3>(W, row_begin, row_end, x, y);
    case MicroscalingScheme::kMxfp8E5M2:
      return RowDotsOf<Element::kE5M2>(W, row_begin, row_end, x, y);
  }
}

}  // namespace plumb::kernels::microscaled::neon

#endif  // defined(__aarch64__)
