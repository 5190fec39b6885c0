// The fast family's INT4 row dots' loop on NEON (int4_int8.cpp's definition), written once and compiled
// twice by int4_int8_neon.cpp: with the dotprod extension's sdot and without it, which differ only in
// Sums(c, q): lane j = Σ c_i·q_i over i = 4j .. 4j + 3 of 16 signed bytes each (GCC inlines vdotq_s32 only
// into a function compiled for dotprod, so the loop is compiled once per target). The including file
// defines PLUMB_BODY_TARGET (empty, or the dotprod target) and Sums, in the namespace it includes this in.
#if !defined(PLUMB_BODY_TARGET)
#error "define PLUMB_BODY_TARGET before including int4_int8_neon_body.h"
#endif

template <Int4Scheme S, int R>
PLUMB_BODY_TARGET void Dots(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {
  const int G = W.int4.group_size;
  const int groups = Int4Groups(W.cols, G);
  const int blocks = W.cols / 32;
  const std::size_t zero_row = Int4ZeroRowBytes(W.int4, W.cols);
  const std::uint8_t* codes[R];
  const std::uint16_t* scales[R];
  const std::uint8_t* zeros[R];
  neon_lanes::Lanes8 lane[R];
  float z_sum[R];
  for (int r = 0; r < R; ++r) {
    codes[r] = W.Row(r0 + r);
    scales[r] = W.int4_scales + Extent(r0 + r, groups);
    zeros[r] = W.int4_zeros == nullptr ? nullptr : W.int4_zeros + Extent(r0 + r, zero_row);
    lane[r] = neon_lanes::Zero8();
    z_sum[r] = 0.0f;
  }
  for (int g = 0; g < groups; ++g) {
    float s[R], sz[R];
    int8x16_t zero[R];
    for (int r = 0; r < R; ++r) {
      s[r] = F16ToF32(scales[r][g]);
      if constexpr (S == Int4Scheme::kAsymmetric) {
        zero[r] = vdupq_n_s8(static_cast<std::int8_t>(Int4Code(zeros[r], g)));
      } else if constexpr (S == Int4Scheme::kAsymmetricF16Zero) {
        sz[r] = s[r] * F16ToF32(ReadU16(zeros[r] + Extent(g, 2)));
      }
    }
    const int b_end = (g + 1) * G / 32 < blocks ? (g + 1) * G / 32 : blocks;
    for (int b = g * G / 32; b < b_end; ++b) {
      // x's codes in the nibbles' order: the even columns, then the odd ones.
      const int8x16_t q0 = vld1q_s8(x.q.data() + Extent(b, 32));
      const int8x16_t q1 = vld1q_s8(x.q.data() + Extent(b, 32) + 16);
      const int8x16_t even = vuzp1q_s8(q0, q1), odd = vuzp2q_s8(q0, q1);
      const float d_x = x.d[b];
      for (int r = 0; r < R; ++r) {
        const uint8x16_t bytes = vld1q_u8(codes[r] + Extent(b, 16));
        int8x16_t low = vreinterpretq_s8_u8(vandq_u8(bytes, vdupq_n_u8(0x0F)));
        int8x16_t high = vreinterpretq_s8_u8(vshrq_n_u8(bytes, 4));
        if constexpr (S == Int4Scheme::kSymmetric) {  // the nibble as two's complement: (n ^ 8) − 8
          low = vsubq_s8(veorq_s8(low, vdupq_n_s8(8)), vdupq_n_s8(8));
          high = vsubq_s8(veorq_s8(high, vdupq_n_s8(8)), vdupq_n_s8(8));
        } else if constexpr (S == Int4Scheme::kAsymmetric) {
          low = vsubq_s8(low, zero[r]);
          high = vsubq_s8(high, zero[r]);
        }
        const float32x4_t f = vdupq_n_f32(s[r] * d_x);
        lane[r].lo = vfmaq_f32(lane[r].lo, f, vcvtq_f32_s32(Sums(low, even)));
        lane[r].hi = vfmaq_f32(lane[r].hi, f, vcvtq_f32_s32(Sums(high, odd)));
        if constexpr (S == Int4Scheme::kAsymmetricF16Zero) z_sum[r] = __builtin_fmaf(sz[r], x.s[b], z_sum[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    float l[8];
    neon_lanes::Store8(lane[r], l);
    const float dot = ReduceLanes(l);
    y[r0 + r] = S == Int4Scheme::kAsymmetricF16Zero ? dot - z_sum[r] : dot;
  }
}

// Rows [row_begin, row_end) of an INT4 matrix with whole 32-column blocks.
inline void RunAnyScheme(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x,
                         float* y) {
  WithScheme(W.int4.scheme, [&](auto scheme) {
    constexpr Int4Scheme S = decltype(scheme)::value;
    int r = row_begin;
    for (; r + kRows <= row_end; r += kRows) Dots<S, kRows>(W, r, x, y);
    for (; r < row_end; ++r) Dots<S, 1>(W, r, x, y);
  });
}
