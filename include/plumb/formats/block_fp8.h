// Block-scaled FP8 weights (fp8-block128): FP8 E4M3 codes, one FP32 scale per 128 × 128 block of the matrix,
// as DeepSeek-V3's checkpoints store them (`weight` F8_E4M3, `weight_scale_inv` F32) and vLLM's
// w8a8_block_fp8 and DeepGEMM read them. Layout, decoding and the quantizer: docs/formats.md ("Block-scaled
// FP8 (128×128)").
//
// A matrix [rows = out][cols = in] stores its codes row-major, one byte each, and its scales row-major as
// [⌈rows / 128⌉][⌈cols / 128⌉]: block (i, j) covers rows [128i, min(128i + 128, rows)) and columns
// [128j, min(128j + 128, cols)), so the blocks of the last block row and column may be partial. Element c of
// row r is
//   Fp8ToF32(code, E4M3) · scales[r / 128][c / 128]
// one FP32 multiplication, rounded to nearest even (the scale is any FP32 number: unlike a microscaled
// block's power of two, it can leave the product more than 24 significant bits). The scale is the
// dequantization multiplier, what DeepSeek calls `weight_scale_inv` (the inverse of the quantizer's 1/scale).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace plumb {

inline constexpr int kFp8BlockSize = 128;  // a block is 128 rows × 128 columns

inline int Fp8BlockCount(int n) {  // ⌈n / 128⌉: block rows of `n` rows, or block columns of `n` columns
  return (n + kFp8BlockSize - 1) / kFp8BlockSize;
}

// Elements [begin, begin + count) of row r, decoded: out[i] = Fp8ToF32(codes[begin + i], E4M3) ·
// block_scales[begin + i over 128], where `codes` is the row's codes and `block_scales` the row's block row
// of scales (⌈cols / 128⌉ of them, scales + (r / 128) · ⌈cols / 128⌉).
void DecodeBlockFp8Row(const std::uint8_t* codes, const float* block_scales, std::int64_t begin,
                       std::int64_t count, float* out);

// A quantized matrix and its block scales.
struct BlockFp8Matrix {
  int rows = 0;
  int cols = 0;
  std::vector<std::uint8_t> codes;  // [rows][cols] E4M3
  std::vector<float> scales;        // [⌈rows / 128⌉][⌈cols / 128⌉]
};
// Quantizes w [rows][cols] as DeepGEMM's per_block_cast_to_fp8 does (the quantizer of DeepSeek-V3's
// weights): per block, amax = max(largest |w|, 1e-4), scale = amax / 448, and each code
// F32ToFp8(w · (448 / amax), E4M3, kSaturate), FP32 throughout (docs/formats.md says why it never
// saturates). Throws plumb::Error for a non-finite weight or a negative shape.
BlockFp8Matrix QuantizeBlockFp8(const float* w, int rows, int cols);

}  // namespace plumb
