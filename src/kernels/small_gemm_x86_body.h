// The x86 variants of the small-m product (small_gemm.h), written once and compiled twice: by
// small_gemm_avx2.cpp (AVX2 + FMA + F16C; 16 vector registers) and by small_gemm_avx512.cpp (the same
// 256-bit code with AVX-512VL, whose 32 registers hold a larger block of accumulators). The including file
// defines PLUMB_SG_TARGET (the function target), PLUMB_SG_BLOCK_X and PLUMB_SG_BLOCK_W (rows of X and of
// the tile per register block) and opens the variant's namespace. Vectors stay 256-bit: on Zen 4 a 512-bit
// op holds a 256-bit pipe for two cycles, so wider vectors save instructions, not cycles, and the 8-lane
// order of the definition maps onto one ymm register per accumulator.
#if !defined(PLUMB_SG_TARGET) || !defined(PLUMB_SG_BLOCK_X) || !defined(PLUMB_SG_BLOCK_W)
#error "define PLUMB_SG_TARGET, PLUMB_SG_BLOCK_X and PLUMB_SG_BLOCK_W before including small_gemm_x86_body.h"
#endif

constexpr int kBlockX = PLUMB_SG_BLOCK_X;
constexpr int kBlockW = PLUMB_SG_BLOCK_W;

// Masks for the last k % 8 elements: lanes [0, t) load, the others read as +0 (an added +0·+0 product leaves
// a lane unchanged: a lane that starts at +0 can never become −0, so lane + (+0) is the lane itself).
alignas(32) constexpr std::int32_t kTailMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

template <Order kOrder>
PLUMB_SG_TARGET inline __m256 Step(__m256 w, __m256 x, __m256 lane) {
  if constexpr (kOrder == Order::kFused) {
    return _mm256_fmadd_ps(w, x, lane);
  } else {
    return _mm256_add_ps(lane, _mm256_mul_ps(w, x));
  }
}

// [ReduceLanes(a[0]), .., ReduceLanes(a[7])] (scalar::Dot's tree, so the same bits) with 19 vector ops
// instead of 8 stores and 56 scalar ones; the reduction was ~15% of a 4 × 4 block's time at k = 576.
PLUMB_SG_TARGET inline __m256 Reduce8(const __m256* a) {
  // s[p]: low half [l0+l4, l1+l5, l2+l6, l3+l7] of a[2p], high half the same of a[2p + 1].
  __m256 s[4];
  for (int p = 0; p < 4; ++p) {
    s[p] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x20),
                         _mm256_permute2f128_ps(a[2 * p], a[2 * p + 1], 0x31));
  }
  // t[q]: per half [(l0+l4)+(l2+l6), (l1+l5)+(l3+l7)] of two accumulators: low half a[4q], a[4q + 2],
  // high half a[4q + 1], a[4q + 3].
  __m256 t[2];
  for (int q = 0; q < 2; ++q) {
    t[q] = _mm256_add_ps(_mm256_shuffle_ps(s[2 * q], s[2 * q + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(s[2 * q], s[2 * q + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // The two halves of the tree added: [a0, a2, a4, a6 | a1, a3, a5, a7], then put in order.
  const __m256 u = _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(u, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Y[i][j] for i < RX, j < RW: X rows (stride k) against tile rows (stride ldw), all of length k.
template <int RX, int RW, Order kOrder>
PLUMB_SG_TARGET void Block(const float* X, int k, const float* W, std::size_t ldw, float* Y,
                           std::size_t ldy) {
  __m256 acc[RX][RW];  // [X row][W row] 8-lane accumulators: the register block
  for (int i = 0; i < RX; ++i) {
    for (int j = 0; j < RW; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  const int full = k - k % 8;
  for (int c = 0; c < full; c += 8) {
    __m256 w[RW];
    for (int j = 0; j < RW; ++j) w[j] = _mm256_loadu_ps(W + j * ldw + c);
    for (int i = 0; i < RX; ++i) {
      const __m256 x = _mm256_loadu_ps(X + static_cast<std::size_t>(i) * k + c);
      for (int j = 0; j < RW; ++j) acc[i][j] = Step<kOrder>(w[j], x, acc[i][j]);
    }
  }
  if (full < k) {
    const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTailMask + 8 - (k - full)));
    __m256 w[RW];
    for (int j = 0; j < RW; ++j) w[j] = _mm256_maskload_ps(W + j * ldw + full, mask);
    for (int i = 0; i < RX; ++i) {
      const __m256 x = _mm256_maskload_ps(X + static_cast<std::size_t>(i) * k + full, mask);
      for (int j = 0; j < RW; ++j) acc[i][j] = Step<kOrder>(w[j], x, acc[i][j]);
    }
  }
  if constexpr (RW == 4 && RX % 2 == 0) {
    for (int i = 0; i < RX; i += 2) {  // two X rows × four tile rows per Reduce8
      const __m256 y = Reduce8(&acc[i][0]);
      _mm_storeu_ps(Y + i * ldy, _mm256_castps256_ps128(y));
      _mm_storeu_ps(Y + (i + 1) * ldy, _mm256_extractf128_ps(y, 1));
    }
  } else {
    for (int i = 0; i < RX; ++i) {
      for (int j = 0; j < RW; ++j) {
        alignas(32) float lane[8];
        _mm256_store_ps(lane, acc[i][j]);
        Y[i * ldy + j] = avx2_common::ReduceLanes(lane);
      }
    }
  }
}

using BlockFn = void (*)(const float*, int, const float*, std::size_t, float*, std::size_t);

// Block<rx, rw> for every rx ≤ kBlockX, rw ≤ kBlockW (the edges of the tile), indexed [(rx−1)·kBlockW +
// rw−1].
template <Order kOrder, int... I>
constexpr std::array<BlockFn, sizeof...(I)> MakeBlocks(std::integer_sequence<int, I...>) {
  return {&Block<I / kBlockW + 1, I % kBlockW + 1, kOrder>...};
}

template <Order kOrder>
PLUMB_SG_TARGET void TileOrdered(const float* X, int m, int k, const float* tile, std::size_t ldw, int rows,
                                 float* Y, std::size_t ldy) {
  static constexpr std::array<BlockFn, kBlockX* kBlockW> kBlocks =
      MakeBlocks<kOrder>(std::make_integer_sequence<int, kBlockX * kBlockW>{});
  // kBlockW tile rows (a few KiB) stay in L1 while every row of X streams past them from L2.
  for (int j0 = 0; j0 < rows; j0 += kBlockW) {
    const int rw = std::min(kBlockW, rows - j0);
    for (int i0 = 0; i0 < m; i0 += kBlockX) {
      const int rx = std::min(kBlockX, m - i0);
      kBlocks[(rx - 1) * kBlockW + rw - 1](X + static_cast<std::size_t>(i0) * k, k, tile + j0 * ldw, ldw,
                                           Y + i0 * ldy + j0, ldy);
    }
  }
}

void Tile(const float* X, int m, int k, const float* tile, std::size_t ldw, int rows, float* Y,
          std::size_t ldy, Order order) {
  if (order == Order::kFused) {
    TileOrdered<Order::kFused>(X, m, k, tile, ldw, rows, Y, ldy);
  } else {
    TileOrdered<Order::kDefinition>(X, m, k, tile, ldw, rows, Y, ldy);
  }
}

// ---- decoding a tile: DequantizeRow's expressions (formats/gguf_blocks.cpp), 8 elements at a time
// ----------

using avx2_common::HalfBroadcast;
using avx2_common::Nibbles;

// One row of `blocks` 32-element blocks of `bytes` bytes each: Q4_0 (q − 8)·d, Q4_1 q·d + m (the product
// rounded, then the add), Q8_0 q·d.
constexpr std::size_t kPrefetchAhead = 8192;

template <GgmlType kType>
PLUMB_SG_TARGET void DecodeBlocks(const std::uint8_t* row, int blocks, float* out) {
  for (int b = 0; b < blocks; ++b, out += 32) {
    // The weights stream from DRAM in short bursts (a few rows, then many FMAs on them), too irregular for
    // the hardware prefetchers: without this, decoding stalled on every row (SmolLM2 Q4_1, 16 rows: decode
    // was a third of the product's time). kPrefetchAhead bytes is several tiles ahead in the same matrix.
    avx2_common::Prefetch(row, static_cast<std::size_t>(b) * (kType == GgmlType::Q4_0   ? 18
                                                              : kType == GgmlType::Q4_1 ? 20
                                                                                        : 34) +
                                   kPrefetchAhead);
    __m256 w[4];
    if constexpr (kType == GgmlType::Q4_0) {
      const std::uint8_t* block = row + 18 * static_cast<std::size_t>(b);
      const __m256 d = HalfBroadcast(block);
      __m256i q[4];
      Nibbles(block + 2, q);
      for (int v = 0; v < 4; ++v) {
        w[v] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q[v], _mm256_set1_epi32(8))), d);
      }
    } else if constexpr (kType == GgmlType::Q4_1) {
      const std::uint8_t* block = row + 20 * static_cast<std::size_t>(b);
      const __m256 d = HalfBroadcast(block);
      const __m256 m = HalfBroadcast(block + 2);
      __m256i q[4];
      Nibbles(block + 4, q);
      for (int v = 0; v < 4; ++v) w[v] = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q[v]), d), m);
    } else {
      static_assert(kType == GgmlType::Q8_0);
      const std::uint8_t* block = row + 34 * static_cast<std::size_t>(b);
      const __m256 d = HalfBroadcast(block);
      for (int v = 0; v < 4; ++v) {
        const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * v));
        w[v] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), d);
      }
    }
    for (int v = 0; v < 4; ++v) _mm256_storeu_ps(out + 8 * v, w[v]);
  }
}

// F16 rows (any length): F16C's conversion is exact, as F16ToF32 is.
PLUMB_SG_TARGET void DecodeF16(const std::uint8_t* row, int n, float* out) {
  int c = 0;
  for (; c + 8 <= n; c += 8) {
    _mm256_storeu_ps(out + c,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c))));
  }
  if (c < n) DequantizeRow(GgmlType::F16, row + 2 * c, out + c, n - c);
}

void Decode(const WeightMatrix& W, int r0, int count, float* tile) {
  const int k = W.cols;
  for (int r = 0; r < count; ++r) {
    const std::uint8_t* row = W.Row(r0 + r);
    float* out = tile + static_cast<std::size_t>(r) * k;
    if (W.encoding != WeightEncoding::kGgml) {
      DecodePackedRow(W, r0 + r, out);  // FP8 / INT4: already AVX2 (packed_dot_avx2.cpp)
      continue;
    }
    switch (W.type) {
      case GgmlType::Q4_0:
        DecodeBlocks<GgmlType::Q4_0>(row, k / 32, out);
        break;
      case GgmlType::Q4_1:
        DecodeBlocks<GgmlType::Q4_1>(row, k / 32, out);
        break;
      case GgmlType::Q8_0:
        DecodeBlocks<GgmlType::Q8_0>(row, k / 32, out);
        break;
      case GgmlType::F16:
        DecodeF16(row, k, out);
        break;
      default:
        DequantizeRow(W.type, row, out, k);
    }
  }
}
