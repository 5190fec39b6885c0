// Block-scaled FP8 weights: decoding and the quantizer (include/plumb/formats/block_fp8.h; docs/formats.md
// "Block-scaled FP8 (128×128)").
#include "plumb/formats/block_fp8.h"

#include <algorithm>
#include <cmath>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/fp8.h"

namespace plumb {

void DecodeBlockFp8Row(const std::uint8_t* codes, const float* block_scales, std::int64_t begin,
                       std::int64_t count, float* out) {
  const float* table = Fp8DecodeTable(Fp8Format::kE4M3);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t c = begin + i;
    out[i] = table[codes[c]] * block_scales[c / kFp8BlockSize];
  }
}

BlockFp8Matrix QuantizeBlockFp8(const float* w, int rows, int cols) {
  if (rows < 0 || cols < 0) throw MakeError("QuantizeBlockFp8: bad shape [", rows, "][", cols, "]");
  BlockFp8Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.codes.resize(Extent(rows, cols));
  const int block_rows = Fp8BlockCount(rows), block_cols = Fp8BlockCount(cols);
  m.scales.resize(Extent(block_rows, block_cols));
  for (std::size_t i = 0; i < m.codes.size(); ++i) {
    if (!std::isfinite(w[i])) {
      throw MakeError("QuantizeBlockFp8: weight [", i / static_cast<std::size_t>(cols), "][",
                      i % static_cast<std::size_t>(cols), "] is ", w[i], " (FP8 weights must be finite)");
    }
  }
  // DeepGEMM's per_block_cast_to_fp8: amax clamped at 1e-4 (an all-zero block gets a finite scale and no
  // 0/0), codes from w · (448 / amax) rather than w / scale; |w · (448 / amax)| <= 448 · (1 + 2^-23), which
  // rounds to 448, so the saturation never acts.
  constexpr float kMaxFinite = 448.0f, kMinAmax = 1e-4f;
  for (int bi = 0; bi < block_rows; ++bi) {
    const int r0 = bi * kFp8BlockSize, r1 = std::min(rows, r0 + kFp8BlockSize);
    for (int bj = 0; bj < block_cols; ++bj) {
      const int c0 = bj * kFp8BlockSize, c1 = std::min(cols, c0 + kFp8BlockSize);
      float amax = 0.0f;
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[Extent(r, cols) + c]));
      amax = std::max(amax, kMinAmax);
      const float factor = kMaxFinite / amax;
      m.scales[Extent(bi, block_cols) + bj] = amax / kMaxFinite;
      for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; ++c) {
          const std::size_t i = Extent(r, cols) + c;
          m.codes[i] = F32ToFp8(w[i] * factor, Fp8Format::kE4M3, Fp8Overflow::kSaturate);
        }
      }
    }
  }
  return m;
}

}  // namespace plumb
