// The x86 variants of the small-m product (small_gemm.h), written once and compiled twice: by
// small_gemm_avx2.cpp (AVX2 + FMA + F16C; 16 vector registers) and by small_gemm_avx512.cpp (the same
// 256-bit code with AVX-512VL, whose 32 registers hold a larger block of accumulators). The including file
// defines PLUMB_BODY_TARGET (the function target), PLUMB_BODY_BLOCK_X and PLUMB_BODY_BLOCK_W (rows of X and
// of the tile per register block) and opens the variant's namespace. Vectors stay 256-bit: on Zen 4 a 512-bit
// op holds a 256-bit pipe for two cycles, so wider vectors save instructions, not cycles, and the 8-lane
// order of the definition maps onto one ymm register per accumulator.
#if !defined(PLUMB_BODY_TARGET) || !defined(PLUMB_BODY_BLOCK_X) || !defined(PLUMB_BODY_BLOCK_W)
#error \
    "define PLUMB_BODY_TARGET, PLUMB_BODY_BLOCK_X and PLUMB_BODY_BLOCK_W before including small_gemm_x86_body.h"
#endif

constexpr int kBlockX = PLUMB_BODY_BLOCK_X;
constexpr int kBlockW = PLUMB_BODY_BLOCK_W;

// Masks for the last k % 8 elements: lanes [0, t) load, the others read as +0 (an added +0·+0 product leaves
// a lane unchanged: a lane that starts at +0 can never become −0, so lane + (+0) is the lane itself).
alignas(32) constexpr std::int32_t kTailMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

template <Order kOrder>
PLUMB_BODY_TARGET inline __m256 Step(__m256 w, __m256 x, __m256 lane) {
  if constexpr (kOrder == Order::kFused) {
    return _mm256_fmadd_ps(w, x, lane);
  } else {
    return _mm256_add_ps(lane, _mm256_mul_ps(w, x));
  }
}

// [ReduceLanes(a[0]), .., ReduceLanes(a[7])] (scalar::Dot's tree, so the same bits) with 19 vector ops
// instead of 8 stores and 56 scalar ones; the reduction was ~15% of a 4 × 4 block's time at k = 576.
PLUMB_BODY_TARGET inline __m256 Reduce8(const __m256* a) {
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
PLUMB_BODY_TARGET void Block(const float* X, int k, const float* W, std::size_t ldw, float* Y,
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
PLUMB_BODY_TARGET void TileOrdered(const float* X, int m, int k, const float* tile, std::size_t ldw, int rows,
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
