// The fast family's K-quant row dots (Q2_K .. Q6_K) with NEON: ggml_int8.cpp's K-quant definition, bit for
// bit. Included by ggml_int8_neon.cpp only, inside its namespace, after its Codes32 and Load32; it defines
// the kernels twice, as that file does, for sdot and for plain NEON. Internal to src/kernels/; aarch64 only.
//
// Why the bits match: each x block t of a super-block has its 32 codes made as signed int8 in element order
// (every K-quant code fits: Q2_K 0..3, Q3_K −4..3, Q4_K 0..15, Q5_K 0..31, Q6_K −32..31), elements 0-15 in
// one register and 16-31 in another, so the definition's p[b][j] (elements 4j .. 4j + 3) is lane j mod 4 of
// an int32 sum, exact either way (int8_sums_neon.h). The float factors are the definition's expressions,
// computed in scalar code once per super-block and row: f = (d · float(c)) · d_x, with c the 16-element
// sub-block's scale (lanes 0-3 the first half's, 4-7 the second's); lane = fma(f, float(p), lane) as
// vfmaq_f32 (fused). Q4_K and Q5_K add fma(dmin · float(min_t), s_x, m_lane[t]) lane-wise over the 8 x
// blocks (as two float32x4_t, lane t holding x block t), Q2_K fma(g, float(σ), m_lane[j]) with
// g = (dmin · float(min)) · d_x and σ the sums of x's codes in fours (one per x block, for all rows). The
// result is the definition's tree of lane, minus the tree of m_lane where the type has a dmin. Q4_K's and
// Q5_K's lanes are x blocks (one scale per 32-element sub-block): their 4 blocks' sums come out of two
// pairwise adds, and one FMA takes them into lanes 0-3 (blocks 0-3) or 4-7. Q3_K's and Q6_K's (one scale
// per 16 elements) likewise per half block: first halves into lanes 0-3, second halves into 4-7.
#pragma once

#if defined(__aarch64__)

// Each byte of v shifted right by `shift` (< 8) and masked.
inline uint8x16_t ByteBits(uint8x16_t v, int shift, int mask) {
  return vandq_u8(vshlq_u8(v, vdupq_n_s8(static_cast<std::int8_t>(-shift))),
                  vdupq_n_u8(static_cast<std::uint8_t>(mask)));
}

// The two halves (bytes [0, 16) and [16, 32)) of ByteBits over the 32 bytes at p.
struct Bytes32 {
  uint8x16_t lo, hi;
};
inline Bytes32 Bits32(const std::uint8_t* p, int shift, int mask) {
  return {ByteBits(vld1q_u8(p), shift, mask), ByteBits(vld1q_u8(p + 16), shift, mask)};
}
inline Bytes32 Or32(Bytes32 a, Bytes32 b, int b_shift_left) {
  const int8x16_t left = vdupq_n_s8(static_cast<std::int8_t>(b_shift_left));
  return {vorrq_u8(a.lo, vshlq_u8(b.lo, left)), vorrq_u8(a.hi, vshlq_u8(b.hi, left))};
}

// The signed codes of x block t (elements 32t .. 32t + 31) of a K-quant super-block (docs/formats.md
// "GGUF blocks"; ggml_int8.cpp's KBlockOf).
template <GgmlType kType>
inline Codes32 KCodes(const std::uint8_t* sb, int t) {
  const int h = t / 4, k = t % 4;  // Q2_K, Q3_K, Q6_K: element 32t + l = 128h + 32k + l
  Bytes32 u{};
  int offset = 0;
  if constexpr (kType == GgmlType::Q4_K) {
    u = Bits32(sb + 16 + 32 * (t / 2), 4 * (t % 2), 0x0F);
  } else if constexpr (kType == GgmlType::Q5_K) {
    u = Or32(Bits32(sb + 48 + 32 * (t / 2), 4 * (t % 2), 0x0F), Bits32(sb + 16, t, 1), 4);
  } else if constexpr (kType == GgmlType::Q6_K) {
    u = Or32(Bits32(sb + 64 * h + 32 * (k % 2), 4 * (k / 2), 0x0F), Bits32(sb + 128 + 32 * h, 2 * k, 3), 4);
    offset = 32;
  } else if constexpr (kType == GgmlType::Q3_K) {
    // low − (bit ? 0 : 4) = (low | bit << 2) − 4, low being 0..3
    u = Or32(Bits32(sb + 32 + 32 * h, 2 * k, 3), Bits32(sb, 4 * h + k, 1), 2);
    offset = 4;
  } else {  // Q2_K
    u = Bits32(sb + 16 + 32 * h, 2 * k, 3);
  }
  const uint8x16_t off = vdupq_n_u8(static_cast<std::uint8_t>(offset));  // wraps mod 256: the signed code
  return {vreinterpretq_s8_u8(vsubq_u8(u.lo, off)), vreinterpretq_s8_u8(vsubq_u8(u.hi, off))};
}

// One row's factors for one super-block: f[t] (lanes 0-3, 4-7) for the lanes, and for Q2_K g[t] likewise.
struct KFactors {
  float32x4_t f_lo[8], f_hi[8];
  float32x4_t g_lo[8], g_hi[8];
};

// The definition's per-row state over a K-quant row: the 8 lanes and the minimum's 8 lanes.
template <GgmlType kType>
struct KRowState {
  static constexpr bool kSub32 = kType == GgmlType::Q4_K || kType == GgmlType::Q5_K;
  static constexpr bool kSub16 = kType == GgmlType::Q3_K || kType == GgmlType::Q6_K;
  Lanes8 lane = neon_lanes::Zero8();
  Lanes8 m_lane = neon_lanes::Zero8();
  KFactors factors;
  int32x4_t block_p[4];  // Q4_K, Q5_K: the partial sums of x blocks t − t % 4 .. t
  int32x4_t half_p[2][4];  // Q3_K, Q6_K: those of their first and second halves

  // The factors of super-block B at sb (and, for Q4_K/Q5_K, its minimum's fma on m_lane).
  void Start(const std::uint8_t* sb, int B, const Int8Activations& x) {
    constexpr KLayout kLayout = KLayoutOf(kType);
    int scale[16], min[16];
    KSubBlockScales(kType, sb, scale, min);
    const float d = vgetq_lane_f32(neon_lanes::HalfBroadcast(sb + kLayout.d), 0);
    const float dmin =
        kLayout.dmin >= 0 ? vgetq_lane_f32(neon_lanes::HalfBroadcast(sb + kLayout.dmin), 0) : 0.0f;
    if constexpr (kSub32) {  // one factor per x block: f_lo[0] holds blocks 0-3, f_lo[1] blocks 4-7
      float f[8];
      for (int t = 0; t < 8; ++t) f[t] = (d * static_cast<float>(scale[2 * t])) * x.d[Extent(B, 8) + t];
      factors.f_lo[0] = vld1q_f32(f);
      factors.f_lo[1] = vld1q_f32(f + 4);
    }
    if constexpr (kSub16) {  // one factor per half block: f_lo[g] first halves of blocks 4g .. 4g + 3
      float f[2][8];
      for (int t = 0; t < 8; ++t) {
        for (int h = 0; h < 2; ++h) {
          f[h][t] = (d * static_cast<float>(scale[2 * t + h])) * x.d[Extent(B, 8) + t];
        }
      }
      for (int g = 0; g < 2; ++g) {
        factors.f_lo[g] = vld1q_f32(f[0] + 4 * g);
        factors.f_hi[g] = vld1q_f32(f[1] + 4 * g);
      }
    }
    for (int t = 0; t < 8 && !kSub32 && !kSub16; ++t) {
      const float d_x = x.d[Extent(B, 8) + t];
      factors.f_lo[t] = vdupq_n_f32((d * static_cast<float>(scale[2 * t])) * d_x);
      factors.f_hi[t] = vdupq_n_f32((d * static_cast<float>(scale[2 * t + 1])) * d_x);
      if constexpr (kType == GgmlType::Q2_K) {
        factors.g_lo[t] = vdupq_n_f32((dmin * static_cast<float>(min[2 * t])) * d_x);
        factors.g_hi[t] = vdupq_n_f32((dmin * static_cast<float>(min[2 * t + 1])) * d_x);
      }
    }
    if constexpr (kType == GgmlType::Q4_K || kType == GgmlType::Q5_K) {
      float m[8];
      for (int t = 0; t < 8; ++t) m[t] = dmin * static_cast<float>(min[2 * t]);
      const float* s_x = x.s.data() + Extent(B, 8);
      m_lane.lo = vfmaq_f32(m_lane.lo, vld1q_f32(m), vld1q_f32(s_x));
      m_lane.hi = vfmaq_f32(m_lane.hi, vld1q_f32(m + 4), vld1q_f32(s_x + 4));
    }
  }

  // x block t of the current super-block: its integer sums p (lanes 0-3, 4-7) and, for Q2_K, x's σ.
  void Add(int t, int32x4_t p_lo, int32x4_t p_hi, float32x4_t sigma_lo, float32x4_t sigma_hi) {
    if constexpr (kSub32) {  // 4 blocks' sums at a time, one FMA into lanes 0-3 or 4-7
      block_p[t % 4] = vaddq_s32(p_lo, p_hi);
      if (t % 4 == 3) {
        const int32x4_t s =
            vpaddq_s32(vpaddq_s32(block_p[0], block_p[1]), vpaddq_s32(block_p[2], block_p[3]));
        float32x4_t& half = t < 4 ? lane.lo : lane.hi;
        half = vfmaq_f32(half, factors.f_lo[t / 4], vcvtq_f32_s32(s));
      }
      return;
    }
    if constexpr (kSub16) {  // 4 blocks' half sums at a time: first halves into lanes 0-3, second into 4-7
      half_p[0][t % 4] = p_lo;
      half_p[1][t % 4] = p_hi;
      if (t % 4 == 3) {
        for (int h = 0; h < 2; ++h) {
          const int32x4_t s =
              vpaddq_s32(vpaddq_s32(half_p[h][0], half_p[h][1]), vpaddq_s32(half_p[h][2], half_p[h][3]));
          float32x4_t& l = h == 0 ? lane.lo : lane.hi;
          l = vfmaq_f32(l, h == 0 ? factors.f_lo[t / 4] : factors.f_hi[t / 4], vcvtq_f32_s32(s));
        }
      }
      return;
    }
    lane.lo = vfmaq_f32(lane.lo, factors.f_lo[t], vcvtq_f32_s32(p_lo));
    lane.hi = vfmaq_f32(lane.hi, factors.f_hi[t], vcvtq_f32_s32(p_hi));
    if constexpr (kType == GgmlType::Q2_K) {
      m_lane.lo = vfmaq_f32(m_lane.lo, factors.g_lo[t], sigma_lo);
      m_lane.hi = vfmaq_f32(m_lane.hi, factors.g_hi[t], sigma_hi);
    }
  }

  float Result() const {
    float l[8];
    neon_lanes::Store8(lane, l);
    const float dot = neon_lanes::ReduceLanes(l);
    if constexpr (KLayoutOf(kType).dmin < 0) return dot;
    neon_lanes::Store8(m_lane, l);
    return dot - neon_lanes::ReduceLanes(l);
  }
};

// NAME<kType, R>(W, r0, x, y): K-quant rows r0 .. r0 + R − 1 into y[r0 ..], SUMS making the integer sums
// (see PLUMB_INT8_NEON_DOTS for why a macro).
#define PLUMB_KQUANT_NEON_DOTS(NAME, TARGET, SUMS)                                                           \
  template <GgmlType kType, int R>                                                                           \
  TARGET void NAME(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {                      \
    constexpr int kBlockBytes = KLayoutOf(kType).block_bytes;                                                \
    const int supers = W.cols / 256;                                                                         \
    const std::uint8_t* row[R];                                                                              \
    KRowState<kType> state[R];                                                                               \
    for (int r = 0; r < R; ++r) row[r] = W.Row(r0 + r);                                                      \
    for (int B = 0; B < supers; ++B) {                                                                       \
      for (int r = 0; r < R; ++r) state[r].Start(row[r] + Extent(B, kBlockBytes), B, x);                     \
      for (int t = 0; t < 8; ++t) {                                                                          \
        const Codes32 q = Load32(reinterpret_cast<const std::uint8_t*>(x.q.data() + Extent(8 * B + t, 32))); \
        float32x4_t sigma_lo = vdupq_n_f32(0.0f), sigma_hi = vdupq_n_f32(0.0f);                              \
        if constexpr (kType == GgmlType::Q2_K) {                                                             \
          sigma_lo = vcvtq_f32_s32(SUMS(vdupq_n_s8(1), q.lo));                                               \
          sigma_hi = vcvtq_f32_s32(SUMS(vdupq_n_s8(1), q.hi));                                               \
        }                                                                                                    \
        for (int r = 0; r < R; ++r) {                                                                        \
          const Codes32 w = KCodes<kType>(row[r] + Extent(B, kBlockBytes), t);                               \
          state[r].Add(t, SUMS(w.lo, q.lo), SUMS(w.hi, q.hi), sigma_lo, sigma_hi);                           \
        }                                                                                                    \
      }                                                                                                      \
    }                                                                                                        \
    for (int r = 0; r < R; ++r) y[r0 + r] = state[r].Result();                                               \
  }

PLUMB_KQUANT_NEON_DOTS(KSdotDots, PLUMB_INT8_DOTPROD, SdotSums)
PLUMB_KQUANT_NEON_DOTS(KPlainDots, , PlainSums)

#undef PLUMB_KQUANT_NEON_DOTS

#endif  // defined(__aarch64__)
