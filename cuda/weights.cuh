// The weight of a GEMV, W[row][c], decoded to FP32 from any dtype of kernels.h's GemvWeights (docs/formats.md
// defines each packing; the comments cite the sections): one device function, shared by gemv.cu and moe.cu.
#pragma once

#include "common.cuh"

namespace plumb::cuda {

// docs/formats.md "INT4": the nibble of column c in a row of two columns per byte (c even: bits 3–0).
__device__ inline int Nibble(const std::uint8_t* bytes, int c) {
  const std::uint8_t b = bytes[c / 2];
  return (c % 2 == 0) ? (b & 0xF) : (b >> 4);
}

// W[row][c] as FP32 (before fp8_e4m3 / fp8_e5m2's scale, which is applied after the dot product, as GPU
// epilogues do; fp8_block128's block scale is applied here, per element).
__device__ inline float WeightAt(const GemvWeights& w, int n, int k, int row, int c) {
  switch (w.dtype) {
    case WeightDtype::kF32:
      return static_cast<const float*>(w.w)[static_cast<std::int64_t>(row) * k + c];
    case WeightDtype::kF16:  // docs/formats.md "FP16": exact decoding
      return HalfBits(static_cast<const std::uint16_t*>(w.w)[static_cast<std::int64_t>(row) * k + c]);
    case WeightDtype::kBf16:  // docs/formats.md "BF16"
      return Bf16Bits(static_cast<const std::uint16_t*>(w.w)[static_cast<std::int64_t>(row) * k + c]);
    case WeightDtype::kFp8E4m3:  // docs/formats.md "FP8"
    case WeightDtype::kFp8E5m2:
      return Fp8Bits(static_cast<const std::uint8_t*>(w.w)[static_cast<std::int64_t>(row) * k + c],
                     w.dtype == WeightDtype::kFp8E4m3);
    case WeightDtype::kInt4Sym:
    case WeightDtype::kInt4Asym: {
      // docs/formats.md "INT4": codes [n][ceil(k/2)], scales [n][groups] FP16, zeros [n][ceil(groups/2)].
      const int groups = (k + w.group_size - 1) / w.group_size, g = c / w.group_size;
      const int nibble =
          Nibble(static_cast<const std::uint8_t*>(w.w) + static_cast<std::int64_t>(row) * ((k + 1) / 2), c);
      const float scale = HalfBits(w.scales[static_cast<std::int64_t>(row) * groups + g]);
      if (w.dtype == WeightDtype::kInt4Sym) {
        const int q = nibble >= 8 ? nibble - 16 : nibble;  // two's complement, −8 … 7
        return static_cast<float>(q) * scale;
      }
      const int zero = Nibble(w.int4_zeros + static_cast<std::int64_t>(row) * ((groups + 1) / 2), g);
      return static_cast<float>(nibble - zero) * scale;
    }
    case WeightDtype::kGptq: {
      // docs/formats.md "GPTQ and AWQ packings": element (k = c, n = row) in qweight word [c/8][row], bits
      // 4·(c mod 8); zero of (group, row) in qzeros word [g][row/8], bits 4·(row mod 8), stored as zero − 1
      // (so nibble 0xF reads as 16); scales [k/G][n].
      const int g = c / w.group_size;
      const auto word = static_cast<std::uint32_t>(
          static_cast<const std::int32_t*>(w.w)[static_cast<std::int64_t>(c / 8) * n + row]);
      const int q = (word >> (4 * (c % 8))) & 0xF;
      const auto zword =
          static_cast<std::uint32_t>(w.qzeros[static_cast<std::int64_t>(g) * (n / 8) + row / 8]);
      const int zero = ((zword >> (4 * (row % 8))) & 0xF) + 1;
      return static_cast<float>(q - zero) * HalfBits(w.scales[static_cast<std::int64_t>(g) * n + row]);
    }
    case WeightDtype::kAwq: {
      // Same section: element (c, row) in qweight word [c][row/8], nibble j holding column 8·⌊row/8⌋ +
      // order[j], order = 0,2,4,6,1,3,5,7; so column row mod 8 sits in nibble kAwqInverseOrder[row mod 8].
      // qzeros [k/G][n/8] in the same nibble order, stored as is.
      constexpr int kAwqInverseOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};
      const int g = c / w.group_size, shift = 4 * kAwqInverseOrder[row % 8];
      const auto word = static_cast<std::uint32_t>(
          static_cast<const std::int32_t*>(w.w)[static_cast<std::int64_t>(c) * (n / 8) + row / 8]);
      const auto zword =
          static_cast<std::uint32_t>(w.qzeros[static_cast<std::int64_t>(g) * (n / 8) + row / 8]);
      const int q = (word >> shift) & 0xF, zero = (zword >> shift) & 0xF;
      return static_cast<float>(q - zero) * HalfBits(w.scales[static_cast<std::int64_t>(g) * n + row]);
    }
    case WeightDtype::kQ4_0:
    case WeightDtype::kQ4_1:
    case WeightDtype::kQ8_0: {
      // docs/formats.md "GGUF blocks": 32 elements a block, rows of k/32 blocks with no alignment.
      // Q4_0 (18 bytes): d, qs[16], value d·(q − 8); Q4_1 (20): d, m, qs[16], value d·q + m; qs[j] holds
      // element j (low nibble) and j + 16 (high). Q8_0 (34): d, int8 qs[32], value d·q.
      const int block_bytes = w.dtype == WeightDtype::kQ4_0 ? 18 : (w.dtype == WeightDtype::kQ4_1 ? 20 : 34);
      const std::uint8_t* block = static_cast<const std::uint8_t*>(w.w) +
                                  static_cast<std::int64_t>(row) * (k / 32) * block_bytes +
                                  (c / 32) * block_bytes;
      const float d = HalfBits(LoadU16(block));
      const int i = c % 32;
      if (w.dtype == WeightDtype::kQ8_0)
        return d * static_cast<float>(static_cast<std::int8_t>(block[2 + i]));
      const std::uint8_t* qs = block + (w.dtype == WeightDtype::kQ4_0 ? 2 : 4);
      const int q = i < 16 ? (qs[i] & 0xF) : (qs[i - 16] >> 4);
      if (w.dtype == WeightDtype::kQ4_0) return d * static_cast<float>(q - 8);
      return d * static_cast<float>(q) + HalfBits(LoadU16(block + 2));
    }
    case WeightDtype::kMxfp4:
    case WeightDtype::kNvfp4:
    case WeightDtype::kMxfp8E4m3:
    case WeightDtype::kMxfp8E5m2: {
      // docs/formats.md "Microscaled formats": element × its block's scale (one exact FP32 product); the
      // last block of a row may be partial; NVFP4's tensor scale is applied after the dot.
      const bool fp4 = w.dtype == WeightDtype::kMxfp4 || w.dtype == WeightDtype::kNvfp4;
      const int block = w.dtype == WeightDtype::kNvfp4 ? 16 : 32, blocks = (k + block - 1) / block;
      const std::uint8_t* codes = static_cast<const std::uint8_t*>(w.w);
      const std::int64_t row_bytes = fp4 ? (k + 1) / 2 : k;
      const float element = fp4 ? Fp4Bits(static_cast<std::uint8_t>(Nibble(codes + row * row_bytes, c)))
                                : Fp8Bits(codes[row * row_bytes + c], w.dtype == WeightDtype::kMxfp8E4m3);
      const std::uint8_t scale = w.block_scales[static_cast<std::int64_t>(row) * blocks + c / block];
      return element * (w.dtype == WeightDtype::kNvfp4 ? Fp8Bits(scale, true) : E8m0Bits(scale));
    }
    case WeightDtype::kFp8Block128: {
      // docs/formats.md "Block-scaled FP8 (128×128)": E4M3(code) × scales[row/128][c/128], one FP32 product
      // rounded to nearest even (__fmul_rn: never contracted into the dot's FMA); the last block row and
      // column may be partial. No scale after the dot.
      const std::int64_t blocks = (k + 127) / 128;
      const float element =
          Fp8Bits(static_cast<const std::uint8_t*>(w.w)[static_cast<std::int64_t>(row) * k + c], true);
      return __fmul_rn(element, w.block128_scales[(row / 128) * blocks + c / 128]);
    }
  }
  return 0.0f;
}

}  // namespace plumb::cuda
