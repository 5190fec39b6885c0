// The GGUF 32-element-block row dots' loop (RowDot's definition, kernels/row_dot.h), written once and
// compiled by row_dot_avx2.cpp and row_dot_avx512.cpp, which differ only in how a block's codes become its
// 32 weights. The including file defines PLUMB_BODY_TARGET (the function target: the loop must be compiled
// for the decoder's instruction set, or the decoder could not be inlined into it) and, in the namespace it
// includes this in, kRows and the Block types: Block::kBytes, and Block::Decode(b, w) writing the 4 vectors
// of weights of the block at b (elements 8v .. 8v + 7 in w[v]), exactly DequantizeRow's values.
//
// R rows at a time share each block's load of x; each row's products are added to its 8 lanes in element
// order (scalar::Dot's: a block is 32 elements, so element i is in lane i mod 8), and the lanes are reduced
// by the definition's tree. Rows hold whole blocks, so there is no tail.
#if !defined(PLUMB_BODY_TARGET)
#error "define PLUMB_BODY_TARGET before including block_dots_x86_body.h"
#endif

template <class Block, int R>
PLUMB_BODY_TARGET void BlockDots(const std::uint8_t* rows, std::size_t stride, const float* x, std::int64_t n,
                                 float* y) {
  __m256 acc[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * stride);
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const std::int64_t n_blocks = n / 32;
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * 32;
    const __m256 xv[4] = {_mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 8), _mm256_loadu_ps(xb + 16),
                          _mm256_loadu_ps(xb + 24)};
    for (int r = 0; r < R; ++r) {
      // Every other block where two are at most a cache line (Q4_0 .. Q5_1), every block for Q8_0's 34 B.
      if (Block::kBytes > 32 || b % 2 == 0)
        avx2_common::Prefetch(rows, ahead + r * stride + b * Block::kBytes);
      __m256 w[4];
      Block::Decode(rows + r * stride + b * Block::kBytes, w);
      for (int v = 0; v < 4; ++v) acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(w[v], xv[v]));
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float lane[8];
    _mm256_store_ps(lane, acc[r]);
    y[r] = avx2_common::ReduceLanes(lane);
  }
}

// n_rows rows at `rows` (stride bytes apart): blocks of kRows rows together, then one at a time.
template <class Block>
void RunBlocks(const std::uint8_t* rows, std::size_t stride, std::int64_t n_rows, const float* x,
               std::int64_t n, float* y) {
  std::int64_t r = 0;
  for (; r + kRows <= n_rows; r += kRows) {
    BlockDots<Block, kRows>(rows + Extent(r, stride), stride, x, n, y + r);
  }
  for (; r < n_rows; ++r) BlockDots<Block, 1>(rows + Extent(r, stride), stride, x, n, y + r);
}
