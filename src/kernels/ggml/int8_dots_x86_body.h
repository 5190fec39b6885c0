// The fast family's GGUF block dots (ggml_int8.cpp's definition), written once and compiled by
// ggml_int8_avx2.cpp and ggml_int8_avx512.cpp, which differ only in how a block's 32 products become the
// 8 int32 partial sums (maddubs + madd, or VNNI's dpbusd: the same sums, exactly). The including file
// defines PLUMB_BODY_TARGET (the function target, so that the sums inline into the loop) and, in the
// namespace it includes this in, kRows and AddPartials(acc, u, q): acc + (lane j = Σ u_i·q_i over
// i = 4j .. 4j + 3) for unsigned codes u and x's codes q; AddPairPartials(u1, q1, u2, q2), the sums of two
// such code registers (each u ≤ 31) lane by lane (int8_sums_x86.h); and FifthBits(bits): byte i = 0x10
// where bit i of the 32 bits is set, else 0 (Q5_0's and Q5_1's fifth bits). R rows at a time share each
// block's load of x and its factors.
#if !defined(PLUMB_BODY_TARGET)
#error "define PLUMB_BODY_TARGET before including int8_dots_x86_body.h"
#endif

// p[j], j = 0..7, as int32 lanes: the products of the 32 weight codes w (bytes in element order, unsigned
// where Int8LayoutOf(kType).is_unsigned, signed otherwise) and x's codes q, elements 4j .. 4j + 3 summed.
// No int16 pair of maddubs saturates: |w| ≤ 128 and |q| ≤ 127, so a pair is at most 2·128·127 = 32512.
template <GgmlType kType>
PLUMB_BODY_TARGET inline __m256i Partials(__m256i w, __m256i q) {
  if constexpr (Int8LayoutOf(kType).is_unsigned) {
    return AddPartials(_mm256_setzero_si256(), w, q);
  } else {
    const int8_sums::SignMoved m = int8_sums::MoveSign(w, q);
    return AddPartials(_mm256_setzero_si256(), m.u, m.q);
  }
}

// The 32 codes of a block as bytes in element order (Q4_0, Q5_0 and Q8_0 signed; Q4_1, Q5_1 unsigned).
template <GgmlType kType>
PLUMB_BODY_TARGET inline __m256i Codes(const std::uint8_t* block) {
  if constexpr (kType == GgmlType::Q8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  } else {
    constexpr Int8Layout kLayout = Int8LayoutOf(kType);
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kLayout.qs));
    const __m128i low = _mm_and_si128(qs, _mm_set1_epi8(0x0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(qs, 4), _mm_set1_epi8(0x0F));
    __m256i codes = _mm256_set_m128i(high, low);
    if constexpr (kLayout.five_bits) {
      codes = _mm256_or_si256(codes, FifthBits(ReadU32(block + kLayout.qs - 4)));
    }
    if constexpr (kLayout.offset != 0) {
      return _mm256_sub_epi8(codes, _mm256_set1_epi8(kLayout.offset));
    }
    return codes;
  }
}

// log2 of the offset a type's codes carry (Q4_0's 8, Q5_0's 16); -1 for none.
template <GgmlType kType>
constexpr int kOffsetShift = Int8LayoutOf(kType).offset == 8    ? 3
                             : Int8LayoutOf(kType).offset == 16 ? 4
                                                                : -1;

// The FP16s in the low 16 bits of v's 8 int32 lanes, as 8 floats. packus puts lanes 0-3 in qword 0 and
// 4-7 in qword 2 (each 128-bit half packs its own 4 lanes, twice).
PLUMB_BODY_TARGET inline __m256 HalvesToFloats(__m256i v) {
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0b1000);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

// Where a group's 8 block sums land (GroupSums): lane k holds block kGroupOrder[k] of the 8. The 4- and
// 5-bit types pair their blocks ([block t's 4 partials | block t + 1's]), and three horizontal adds of 4
// pairs leave the even blocks in the low half; Q8_0's blocks come out in order.
template <GgmlType kType>
constexpr bool kPairs = kType != GgmlType::Q8_0;
template <GgmlType kType>
constexpr int kGroupOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
template <>
constexpr int kGroupOrder<GgmlType::Q8_0>[8] = {0, 1, 2, 3, 4, 5, 6, 7};

template <GgmlType kType>
PLUMB_BODY_TARGET inline __m256i GroupOrder() {
  constexpr const int* o = kGroupOrder<kType>;
  return _mm256_setr_epi32(o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]);
}

// x's codes for a group of 8 blocks as the pairs take them: for t = 0, 2, 4, 6, [q_t[0..16) | q_t+1[0..16)]
// then [q_t[16..32) | q_t+1[16..32)], so that one register of a pair's low nibbles (then high ones) meets
// its x codes.
PLUMB_BODY_TARGET inline void PairedCodes(const std::int8_t* q, std::int8_t* out) {
  for (int t = 0; t < 8; t += 2) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * t));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * (t + 1)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 32 * t), _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 32 * (t + 1)), _mm256_permute2x128_si256(a, b, 0x31));
  }
}

// Blocks t and t + 1 of a 4- or 5-bit type (the first at `block`) against x's paired codes xp (PairedCodes):
// int32 lanes 0-3 sum to Σ u·q of block t, lanes 4-7 to block t + 1's, u the unsigned codes (with Q4_0's
// and Q5_0's offset still in: at most 31, as AddPairPartials needs).
template <GgmlType kType>
PLUMB_BODY_TARGET inline __m256i PairSums(const std::uint8_t* block, const std::int8_t* xp) {
  constexpr Int8Layout kLayout = Int8LayoutOf(kType);
  const __m256i qs =
      _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(block + kLayout.block_bytes + kLayout.qs),
                          reinterpret_cast<const __m128i*>(block + kLayout.qs));
  __m256i low = _mm256_and_si256(qs, _mm256_set1_epi8(0x0F));  // elements 0-15 of t, then of t + 1
  __m256i high = _mm256_and_si256(_mm256_srli_epi16(qs, 4), _mm256_set1_epi8(0x0F));  // 16-31
  if constexpr (kLayout.five_bits) {
    const std::uint32_t h0 = ReadU32(block + kLayout.qs - 4);
    const std::uint32_t h1 = ReadU32(block + kLayout.block_bytes + kLayout.qs - 4);
    low = _mm256_or_si256(low, FifthBits((h0 & 0xFFFF) | h1 << 16));
    high = _mm256_or_si256(high, FifthBits(h0 >> 16 | (h1 & 0xFFFF0000u)));
  }
  return AddPairPartials(low, _mm256_load_si256(reinterpret_cast<const __m256i*>(xp)), high,
                         _mm256_load_si256(reinterpret_cast<const __m256i*>(xp + 32)));
}

// Lane t: the sum of p[t]'s 8 int32 lanes, for t = 0..7.
PLUMB_BODY_TARGET inline __m256i Totals8(const __m256i p[8]) {
  const __m256i h[4] = {_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]),
                        _mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7])};  // [0 0 1 1 | 0 0 1 1]
  const __m256i g0 = _mm256_hadd_epi32(h[0], h[1]);  // [0 1 2 3 | 0 1 2 3], each a half of its vector
  const __m256i g1 = _mm256_hadd_epi32(h[2], h[3]);  // [4 5 6 7 | 4 5 6 7]
  return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20), _mm256_permute2x128_si256(g0, g1, 0x31));
}

// The integer sums s of the 8 blocks of a group (the first at `group`), in kGroupOrder: Σ u·q, u as PairSums
// takes them for the 4- and 5-bit types (the caller takes the offset off), the signed codes for Q8_0.
template <GgmlType kType>
PLUMB_BODY_TARGET inline __m256i GroupSums(const std::uint8_t* group, const std::int8_t* xp,
                                           const std::int8_t* q) {
  constexpr int kB = Int8LayoutOf(kType).block_bytes;
  if constexpr (kPairs<kType>) {
    const __m256i p01 = PairSums<kType>(group, xp);
    const __m256i p23 = PairSums<kType>(group + 2 * kB, xp + 64);
    const __m256i p45 = PairSums<kType>(group + 4 * kB, xp + 128);
    const __m256i p67 = PairSums<kType>(group + 6 * kB, xp + 192);
    // [0 0 2 2 | 1 1 3 3] and [4 4 6 6 | 5 5 7 7], then [0 2 4 6 | 1 3 5 7]
    return _mm256_hadd_epi32(_mm256_hadd_epi32(p01, p23), _mm256_hadd_epi32(p45, p67));
  } else {
    __m256i p[8];
    for (int t = 0; t < 8; ++t) {
      p[t] = Partials<kType>(Codes<kType>(group + t * kB),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * t)));
    }
    return Totals8(p);
  }
}

// The sum of v's 8 int32 lanes.
PLUMB_BODY_TARGET inline int SumLanes(__m256i v) {
  const __m128i four = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i two = _mm_add_epi32(four, _mm_unpackhi_epi64(four, four));
  return _mm_cvtsi128_si32(_mm_add_epi32(two, _mm_shuffle_epi32(two, 1)));
}

template <GgmlType kType, int R>
PLUMB_BODY_TARGET void Dots(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {
  constexpr int kB = Int8LayoutOf(kType).block_bytes;
  constexpr bool kMin = Int8LayoutOf(kType).has_min;
  // Q4_0's and Q5_0's codes go in as stored, u = w + offset (unsigned, at most 31), and s = Σ u·q −
  // offset·Σq, x's block sum: the same integer as Σ w·q.
  constexpr int kShift = kOffsetShift<kType>;
  constexpr const int* kOrder = kGroupOrder<kType>;
  const int blocks = W.cols / 32;
  const std::uint8_t* row[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * W.row_bytes);
  __m256 lane[R], m_lane[R];  // lane k: the definition's lane kOrder[k]
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    lane[r] = _mm256_setzero_ps();
    m_lane[r] = _mm256_setzero_ps();
  }
  alignas(32) std::int8_t paired[256];
  const __m256i order = GroupOrder<kType>();
  int b = 0;
  for (; b + 8 <= blocks; b += 8) {  // groups of 8 blocks: one conversion and one FMA per row
    const std::int8_t* q = x.q.data() + Extent(b, 32);
    if constexpr (kPairs<kType>) PairedCodes(q, paired);
    const __m256 d_x = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x.d.data() + b), order);
    __m256 s_x = _mm256_setzero_ps();
    if constexpr (kMin) s_x = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x.s.data() + b), order);
    __m256i offsets = _mm256_setzero_si256();  // offset · Σq per block, in kOrder
    if constexpr (kShift >= 0) {
      const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.sum.data() + b));
      offsets = _mm256_slli_epi32(_mm256_permutevar8x32_epi32(sums, order), kShift);
    }
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* group = row[r] + Extent(b, kB);
      for (int o = 0; o < 8 * kB; o += 64) avx2_common::Prefetch(group + o, ahead);
      const __m256i sums = _mm256_sub_epi32(GroupSums<kType>(group, paired, q), offsets);
      // Each block's first 4 bytes: its d, and for Q4_1 and Q5_1 its m.
      const __m256i words = _mm256_setr_epi32(static_cast<int>(ReadU32(group + kOrder[0] * kB)),
                                              static_cast<int>(ReadU32(group + kOrder[1] * kB)),
                                              static_cast<int>(ReadU32(group + kOrder[2] * kB)),
                                              static_cast<int>(ReadU32(group + kOrder[3] * kB)),
                                              static_cast<int>(ReadU32(group + kOrder[4] * kB)),
                                              static_cast<int>(ReadU32(group + kOrder[5] * kB)),
                                              static_cast<int>(ReadU32(group + kOrder[6] * kB)),
                                              static_cast<int>(ReadU32(group + kOrder[7] * kB)));
      const __m256 d_w = HalvesToFloats(_mm256_and_si256(words, _mm256_set1_epi32(0xFFFF)));
      lane[r] = _mm256_fmadd_ps(_mm256_mul_ps(d_w, d_x), _mm256_cvtepi32_ps(sums), lane[r]);
      if constexpr (kMin) {
        m_lane[r] = _mm256_fmadd_ps(HalvesToFloats(_mm256_srli_epi32(words, 16)), s_x, m_lane[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float ordered[8], m_ordered[8];
    _mm256_store_ps(ordered, lane[r]);
    _mm256_store_ps(m_ordered, m_lane[r]);
    float l[8], m[8];
    for (int k = 0; k < 8; ++k) {
      l[kOrder[k]] = ordered[k];
      m[kOrder[k]] = m_ordered[k];
    }
    for (int t = b; t < blocks; ++t) {  // the last blocks, one at a time
      const std::uint8_t* block = row[r] + Extent(t, kB);
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + Extent(t, 32)));
      const int s = SumLanes(Partials<kType>(Codes<kType>(block), q));
      const float f = _cvtsh_ss(ReadU16(block)) * x.d[t];
      l[t % 8] = __builtin_fmaf(f, static_cast<float>(s), l[t % 8]);
      if constexpr (kMin) m[t % 8] = __builtin_fmaf(_cvtsh_ss(ReadU16(block + 2)), x.s[t], m[t % 8]);
    }
    const float dot = avx2_common::ReduceLanes(l);
    y[r0 + r] = kMin ? dot + avx2_common::ReduceLanes(m) : dot;
  }
}

template <GgmlType kType>
void Run(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) Dots<kType, kRows>(W, r, x, y);
  for (; r < row_end; ++r) Dots<kType, 1>(W, r, x, y);
}

// ---- K-quants: 256-element super-blocks of 8 x blocks --------------------------------------------------
//
// Each x block's codes come out of the type's bit planes as unsigned bytes u in element order (w = u −
// kOffset: Q3_K's 4, Q6_K's 32), and the definition's p is Σ u·q − kOffset·σ with σ = Σ q per 4 elements:
// one sum per x block for all rows, folded into AddPartials' accumulator. The per-lane float factors are
// built once per super-block and row, before the rows' integer work; Q4_K's and Q5_K's are one per x block.

template <GgmlType kType>
constexpr int kKOffsetShift = kType == GgmlType::Q6_K   ? 5
                              : kType == GgmlType::Q3_K ? 2
                                                        : -1;  // log2 kOffset

// The 8 bytes of lo, then hi, as 8 floats.
PLUMB_BODY_TARGET inline __m256 BytesToFloats(std::uint32_t lo, std::uint32_t hi) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(hi), static_cast<int>(lo))));
}

// Q4_K's and Q5_K's 8 six-bit scales and mins (ggml's get_scale_min_k4, docs/formats.md "Q4_K") as floats,
// with the 12 bytes read as three 32-bit words: each word's 4 bytes are 4 sub-blocks' fields at once.
PLUMB_BODY_TARGET inline void ScalesMinsK4(const std::uint8_t* b, __m256* scale, __m256* min) {
  const std::uint32_t u0 = ReadU32(b), u1 = ReadU32(b + 4), u2 = ReadU32(b + 8);
  const std::uint32_t scale_lo = u0 & 0x3F3F3F3F, min_lo = u1 & 0x3F3F3F3F;
  const std::uint32_t scale_hi = (u2 & 0x0F0F0F0F) | ((u0 >> 6) & 0x03030303) << 4;
  const std::uint32_t min_hi = ((u2 >> 4) & 0x0F0F0F0F) | ((u1 >> 6) & 0x03030303) << 4;
  *scale = BytesToFloats(scale_lo, scale_hi);
  *min = BytesToFloats(min_lo, min_hi);
}

// The 16 integer scales c of a Q2_K, Q3_K or Q6_K super-block (16-element sub-blocks) as int8 bytes; for
// Q2_K, `min` gets its 16 mins.
template <GgmlType kType>
PLUMB_BODY_TARGET inline __m128i Scales16(const std::uint8_t* sb, __m128i* min) {
  if constexpr (kType == GgmlType::Q6_K) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 192));
  } else if constexpr (kType == GgmlType::Q2_K) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb));
    *min = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F));
    return _mm_and_si128(packed, _mm_set1_epi8(0x0F));
  } else {  // Q3_K: word i's bytes are scales 4i .. 4i + 3 (low 4 bits from bytes 0-7, high 2 from 8-11)
    const std::uint32_t a0 = ReadU32(sb + 96), a1 = ReadU32(sb + 100), a2 = ReadU32(sb + 104);
    const std::uint32_t s0 = (a0 & 0x0F0F0F0F) | (a2 & 0x03030303) << 4;
    const std::uint32_t s1 = (a1 & 0x0F0F0F0F) | ((a2 >> 2) & 0x03030303) << 4;
    const std::uint32_t s2 = ((a0 >> 4) & 0x0F0F0F0F) | ((a2 >> 4) & 0x03030303) << 4;
    const std::uint32_t s3 = ((a1 >> 4) & 0x0F0F0F0F) | ((a2 >> 6) & 0x03030303) << 4;
    const __m128i scales = _mm_setr_epi32(static_cast<int>(s0), static_cast<int>(s1), static_cast<int>(s2),
                                          static_cast<int>(s3));
    return _mm_sub_epi8(scales, _mm_set1_epi8(32));
  }
}

PLUMB_BODY_TARGET inline __m256i Load32(const std::uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Each byte of v shifted right by `shift` (< 8) and masked. The shift is of 16-bit lanes; the mask keeps
// only bits that came from the same byte.
PLUMB_BODY_TARGET inline __m256i ByteBits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

// The unsigned codes u of x block t (elements 32t .. 32t + 31) of a Q2_K, Q3_K or Q6_K super-block, in
// element order (docs/formats.md "GGUF blocks"); Q4_K and Q5_K take theirs two blocks at a time
// (KPairCodes). The bits moved up to join a code (slli_epi16) stay within their byte.
template <GgmlType kType>
PLUMB_BODY_TARGET inline __m256i KCodes(const std::uint8_t* sb, int t) {
  const int h = t / 4, k = t % 4;  // element 32t + l = 128h + 32k + l
  if constexpr (kType == GgmlType::Q6_K) {
    const __m256i high = _mm256_slli_epi16(ByteBits(Load32(sb + 128 + 32 * h), 2 * k, 3), 4);
    return _mm256_or_si256(ByteBits(Load32(sb + 64 * h + 32 * (k % 2)), 4 * (k / 2), 0x0F), high);
  } else if constexpr (kType == GgmlType::Q3_K) {
    const __m256i third = _mm256_slli_epi16(ByteBits(Load32(sb), 4 * h + k, 1), 2);
    return _mm256_or_si256(ByteBits(Load32(sb + 32 + 32 * h), 2 * k, 3), third);
  } else {  // Q2_K
    return ByteBits(Load32(sb + 16 + 32 * h), 2 * k, 3);
  }
}

// out[t][j] = (factor · float(c[2t + j / 4])) · d_x[t] for the 8 x blocks t of a super-block with
// 16-element sub-blocks: sub-block 2t's factor in lanes 0-3, 2t + 1's in lanes 4-7.
PLUMB_BODY_TARGET inline void LaneFactors(__m256 factor, __m128i c, const float* d_x, __m256 out[8]) {
  const __m256 sub[2] = {
      _mm256_mul_ps(factor, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c))),
      _mm256_mul_ps(factor, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c, 8))))};
  for (int t = 0; t < 8; ++t) {
    const int m = 2 * (t % 4);
    const __m256 pair =
        _mm256_permutevar8x32_ps(sub[t / 4], _mm256_setr_epi32(m, m, m, m, m + 1, m + 1, m + 1, m + 1));
    out[t] = _mm256_mul_ps(pair, _mm256_set1_ps(d_x[t]));
  }
}

// Q2_K (RunK's other types have KDots32 and KDots16): 8 lanes of 4 elements per x block, with per-lane
// factors.
template <GgmlType kType, int R>
PLUMB_BODY_TARGET void KDots(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {
  constexpr KLayout kLayout = KLayoutOf(kType);
  constexpr bool kMinPerLane = kType == GgmlType::Q2_K;
  constexpr int kShift = kKOffsetShift<kType>;
  const int supers = W.cols / 256;
  const std::uint8_t* row[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * W.row_bytes);
  __m256 lane[R], m_lane[R];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    lane[r] = _mm256_setzero_ps();
    m_lane[r] = _mm256_setzero_ps();
  }
  for (int B = 0; B < supers; ++B) {
    const float* d_x = x.d.data() + Extent(B, 8);
    __m256 f_lane[R][8];  // f[b][j]
    __m256 g_lane[R][8];  // Q2_K: the minimum's factors
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* sb = row[r] + Extent(B, kLayout.block_bytes);
      for (int o = 0; o < kLayout.block_bytes; o += 64) avx2_common::Prefetch(sb + o, ahead);
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(avx2_common::ReadU16(sb + kLayout.d)));
      __m128i min16 = _mm_setzero_si128();
      const __m128i scale16 = Scales16<kType>(sb, &min16);
      LaneFactors(d, scale16, d_x, f_lane[r]);
      if constexpr (kMinPerLane) {
        const __m256 dmin = _mm256_set1_ps(_cvtsh_ss(avx2_common::ReadU16(sb + kLayout.dmin)));
        LaneFactors(dmin, min16, d_x, g_lane[r]);
      }
    }
    for (int t = 0; t < 8; ++t) {
      const __m256i q =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + Extent(8 * B + t, 32)));
      __m256i acc = _mm256_setzero_si256();
      __m256 sigma_f = _mm256_setzero_ps();
      if constexpr (kShift >= 0 || kMinPerLane) {
        const __m256i sigma = AddPartials(_mm256_setzero_si256(), _mm256_set1_epi8(1), q);
        if constexpr (kShift >= 0) acc = _mm256_sub_epi32(acc, _mm256_slli_epi32(sigma, kShift));
        if constexpr (kMinPerLane) sigma_f = _mm256_cvtepi32_ps(sigma);
      }
      for (int r = 0; r < R; ++r) {
        const std::uint8_t* sb = row[r] + Extent(B, kLayout.block_bytes);
        const __m256 p = _mm256_cvtepi32_ps(AddPartials(acc, KCodes<kType>(sb, t), q));
        lane[r] = _mm256_fmadd_ps(f_lane[r][t], p, lane[r]);
        if constexpr (kMinPerLane) m_lane[r] = _mm256_fmadd_ps(g_lane[r][t], sigma_f, m_lane[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float l[8];
    _mm256_store_ps(l, lane[r]);
    const float dot = avx2_common::ReduceLanes(l);
    if constexpr (kLayout.dmin >= 0) {
      _mm256_store_ps(l, m_lane[r]);
      y[r0 + r] = dot - avx2_common::ReduceLanes(l);
    } else {
      y[r0 + r] = dot;
    }
  }
}

// Q4_K's and Q5_K's x blocks are paired as the 32-element types pair theirs (PairSums), blocks t and t + 2:
// the 32 bytes of qs at 32c hold x block 2c in their low nibbles and 2c + 1 in their high ones, so one load
// of half h (elements 16h .. 16h + 15) from chunk c and from chunk c + 1 gives [2c | 2c + 2] in its low
// nibbles and [2c + 1 | 2c + 3] in its high ones. kKPairs lists the pairs in the order KPairSums makes
// them, and KPairedCodes lays x's codes out to meet them: for each pair (a, b), [q_a[0..16) | q_b[0..16)]
// then [q_a[16..32) | q_b[16..32)].
constexpr int kKPairs[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};

PLUMB_BODY_TARGET inline void KPairedCodes(const std::int8_t* q, std::int8_t* out) {
  for (int p = 0; p < 4; ++p) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * kKPairs[p][0]));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * kKPairs[p][1]));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 64 * p), _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 64 * p + 32), _mm256_permute2x128_si256(a, b, 0x31));
  }
}

// The unsigned codes of half h of the x blocks of chunks c and c + 1 (c = 0 or 2): lo = [2c | 2c + 2],
// hi = [2c + 1 | 2c + 3]. Q5_K's fifth bit of element l of x block t is bit t of qh[l]: each 32-bit lane
// of qh shifted right by its half's block index leaves that bit at bit 0 of every byte (a shift below 8
// moves no bit into a byte's bit 0 from its neighbour).
template <GgmlType kType>
PLUMB_BODY_TARGET inline void KPairCodes(const std::uint8_t* sb, int c, int h, __m256i* lo, __m256i* hi) {
  constexpr int kQs = kType == GgmlType::Q4_K ? 16 : 48;
  const __m256i bytes =
      _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(sb + kQs + 32 * (c + 1) + 16 * h),
                          reinterpret_cast<const __m128i*>(sb + kQs + 32 * c + 16 * h));
  *lo = _mm256_and_si256(bytes, _mm256_set1_epi8(0x0F));
  *hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), _mm256_set1_epi8(0x0F));
  if constexpr (kType == GgmlType::Q5_K) {
    const __m256i qh =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 16 + 16 * h)));
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i lo_shift =
        _mm256_setr_epi32(2 * c, 2 * c, 2 * c, 2 * c, 2 * c + 2, 2 * c + 2, 2 * c + 2, 2 * c + 2);
    const __m256i hi_shift = _mm256_add_epi32(lo_shift, _mm256_set1_epi32(1));
    *lo = _mm256_or_si256(*lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srlv_epi32(qh, lo_shift), one), 4));
    *hi = _mm256_or_si256(*hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srlv_epi32(qh, hi_shift), one), 4));
  }
}

// The 8 x blocks' integer sums Σ u·q of a Q4_K or Q5_K super-block, lane t = x block t, from x's codes as
// KPairedCodes lays them out (xp). Each pair's register holds block a's 4 partial sums in its low half and
// b's in its high one; three horizontal adds leave [0 1 4 5 | 2 3 6 7], and one permute puts them in order.
template <GgmlType kType>
PLUMB_BODY_TARGET inline __m256i KPairSums(const std::uint8_t* sb, const std::int8_t* xp) {
  __m256i p[4];
  for (int c = 0; c < 4; c += 2) {
    __m256i lo0, hi0, lo1, hi1;
    KPairCodes<kType>(sb, c, 0, &lo0, &hi0);
    KPairCodes<kType>(sb, c, 1, &lo1, &hi1);
    const std::int8_t* x_lo = xp + 64 * c;  // pair (2c, 2c + 2): kKPairs[c]
    const std::int8_t* x_hi = x_lo + 64;    // pair (2c + 1, 2c + 3): kKPairs[c + 1]
    p[c] = AddPairPartials(lo0, _mm256_load_si256(reinterpret_cast<const __m256i*>(x_lo)), lo1,
                           _mm256_load_si256(reinterpret_cast<const __m256i*>(x_lo + 32)));
    p[c + 1] = AddPairPartials(hi0, _mm256_load_si256(reinterpret_cast<const __m256i*>(x_hi)), hi1,
                               _mm256_load_si256(reinterpret_cast<const __m256i*>(x_hi + 32)));
  }
  const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  return _mm256_permutevar8x32_epi32(sums, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
}

// Q4_K and Q5_K: one scale per 32-element sub-block, so one factor f per x block, one integer sum per x
// block (KPairSums) and one FMA per super-block and row into the 8 lanes (x block t of the super-block in
// lane t).
template <GgmlType kType, int R>
PLUMB_BODY_TARGET void KDots32(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {
  constexpr KLayout kLayout = KLayoutOf(kType);
  const int supers = W.cols / 256;
  const std::uint8_t* row[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * W.row_bytes);
  __m256 lane[R], m_lane[R];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    lane[r] = _mm256_setzero_ps();
    m_lane[r] = _mm256_setzero_ps();
  }
  alignas(32) std::int8_t paired[256];
  for (int B = 0; B < supers; ++B) {
    const __m256 d_x = _mm256_loadu_ps(x.d.data() + Extent(B, 8));
    const __m256 s_x = _mm256_loadu_ps(x.s.data() + Extent(B, 8));
    KPairedCodes(x.q.data() + Extent(B, 256), paired);
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* sb = row[r] + Extent(B, kLayout.block_bytes);
      for (int o = 0; o < kLayout.block_bytes; o += 64) avx2_common::Prefetch(sb + o, ahead);
      const __m256i sums = KPairSums<kType>(sb, paired);
      __m256 scale, min;
      ScalesMinsK4(sb + 4, &scale, &min);
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(avx2_common::ReadU16(sb + kLayout.d)));
      const __m256 dmin = _mm256_set1_ps(_cvtsh_ss(avx2_common::ReadU16(sb + kLayout.dmin)));
      const __m256 f = _mm256_mul_ps(_mm256_mul_ps(d, scale), d_x);
      lane[r] = _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(sums), lane[r]);
      m_lane[r] = _mm256_fmadd_ps(_mm256_mul_ps(dmin, min), s_x, m_lane[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float l[8], m[8];
    _mm256_store_ps(l, lane[r]);
    _mm256_store_ps(m, m_lane[r]);
    y[r0 + r] = avx2_common::ReduceLanes(l) - avx2_common::ReduceLanes(m);
  }
}

// Q3_K and Q6_K: one scale per 16-element sub-block, so one sum and one factor per half x block; the halves
// of x blocks t and t + 4 share lane t % 4 (first halves) or 4 + t % 4 (second ones), two FMAs per
// super-block and row. Three horizontal adds make blocks 0-3's half sums in that order, then 4-7's.
template <GgmlType kType, int R>
PLUMB_BODY_TARGET void KDots16(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {
  constexpr KLayout kLayout = KLayoutOf(kType);
  constexpr int kShift = kKOffsetShift<kType>;
  const int supers = W.cols / 256;
  const std::uint8_t* row[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * W.row_bytes);
  __m256 lane[R];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    lane[r] = _mm256_setzero_ps();
  }
  const __m256i evens_first = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (int B = 0; B < supers; ++B) {
    const std::int8_t* q = x.q.data() + Extent(B, 256);
    alignas(32) std::int32_t offsets[8][8];  // −kOffset·σ per x block, for every row
    for (int t = 0; t < 8; ++t) {
      const __m256i sigma = AddPartials(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * t)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(offsets[t]),
                         _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sigma, kShift)));
    }
    const __m128 d_x_lo = _mm_loadu_ps(x.d.data() + Extent(B, 8));
    const __m128 d_x_hi = _mm_loadu_ps(x.d.data() + Extent(B, 8) + 4);
    const __m256 d_x[2] = {_mm256_set_m128(d_x_lo, d_x_lo), _mm256_set_m128(d_x_hi, d_x_hi)};
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* sb = row[r] + Extent(B, kLayout.block_bytes);
      for (int o = 0; o < kLayout.block_bytes; o += 64) avx2_common::Prefetch(sb + o, ahead);
      __m128i unused_min;
      const __m128i c = Scales16<kType>(sb, &unused_min);  // sub-block k = 2t + half
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(avx2_common::ReadU16(sb + kLayout.d)));
      for (int g = 0; g < 2; ++g) {  // x blocks 4g .. 4g + 3
        __m256i p[4];
        for (int t = 0; t < 4; ++t) {
          const int b = 4 * g + t;
          p[t] = AddPartials(_mm256_load_si256(reinterpret_cast<const __m256i*>(offsets[b])),
                             KCodes<kType>(sb, b),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b)));
        }
        // [t=0..3 first halves | t=0..3 second halves]
        const __m256i halves =
            _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        const __m256 scales = _mm256_permutevar8x32_ps(
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(g == 0 ? c : _mm_srli_si128(c, 8))), evens_first);
        const __m256 f = _mm256_mul_ps(_mm256_mul_ps(d, scales), d_x[g]);
        lane[r] = _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(halves), lane[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float l[8];
    _mm256_store_ps(l, lane[r]);
    y[r0 + r] = avx2_common::ReduceLanes(l);
  }
}

template <GgmlType kType>
void RunK(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  int r = row_begin;
  if constexpr (kType == GgmlType::Q4_K || kType == GgmlType::Q5_K) {
    for (; r + kRows <= row_end; r += kRows) KDots32<kType, kRows>(W, r, x, y);
    for (; r < row_end; ++r) KDots32<kType, 1>(W, r, x, y);
  } else if constexpr (kType == GgmlType::Q3_K || kType == GgmlType::Q6_K) {
    for (; r + kRows <= row_end; r += kRows) KDots16<kType, kRows>(W, r, x, y);
    for (; r < row_end; ++r) KDots16<kType, 1>(W, r, x, y);
  } else {
    for (; r + kRows <= row_end; r += kRows) KDots<kType, kRows>(W, r, x, y);
    for (; r < row_end; ++r) KDots<kType, 1>(W, r, x, y);
  }
}

// This ISA's column of the table (ggml_kernel_table.h): every type HasInt8 accepts. int8_gemm is the row
// dots per x row over chunks of weight rows (Int8GemmByRowChunks): the definition's one FMA per 8 blocks
// leaves a multi-row kernel little float work to share; what it would save is the second read of each block
// from cache.
template <GgmlType kType, void (*kRun)(const WeightMatrix&, int, int, const Int8Activations&, float*)>
void Enter(GgmlKernelTable& table, Isa isa) {
  table.At(kType, isa).int8_row_dots = kRun;
  table.At(kType, isa).int8_gemm = Int8GemmByRowChunks<kRun>;
}

void FillInt8Column(GgmlKernelTable& table, Isa isa) {
  Enter<GgmlType::Q4_0, Run<GgmlType::Q4_0>>(table, isa);
  Enter<GgmlType::Q4_1, Run<GgmlType::Q4_1>>(table, isa);
  Enter<GgmlType::Q5_0, Run<GgmlType::Q5_0>>(table, isa);
  Enter<GgmlType::Q5_1, Run<GgmlType::Q5_1>>(table, isa);
  Enter<GgmlType::Q8_0, Run<GgmlType::Q8_0>>(table, isa);
  Enter<GgmlType::Q2_K, RunK<GgmlType::Q2_K>>(table, isa);
  Enter<GgmlType::Q3_K, RunK<GgmlType::Q3_K>>(table, isa);
  Enter<GgmlType::Q4_K, RunK<GgmlType::Q4_K>>(table, isa);
  Enter<GgmlType::Q5_K, RunK<GgmlType::Q5_K>>(table, isa);
  Enter<GgmlType::Q6_K, RunK<GgmlType::Q6_K>>(table, isa);
}
