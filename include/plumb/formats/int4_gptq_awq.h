// Conversions between plumb's INT4 layout (int4.h) and the two packings INT4 checkpoints use on the GPU:
// GPTQ's (int32 words along the input dimension, zero points stored as zero − 1) and AWQ's (int32 words
// along the output dimension, nibbles in the order 0,2,4,6,1,3,5,7). Word layouts bit by bit, and the
// rules below: docs/formats.md ("GPTQ and AWQ packings").
//
// K = in_features = plumb's cols, N = out_features = plumb's rows; GPTQ and AWQ store the transpose of
// plumb's matrix. Every conversion is exact: the dequantized values (GPTQ and AWQ compute (q − zero) ·
// scale, the zero an integer) are the ones plumb's DequantizeInt4Row gives for the converted matrix.
// Shapes must have K a multiple of 8 and of the group size, N a multiple of 8; anything else, a wrong
// array size, or a zero point the target cannot hold is a plumb::Error naming the field and value.
#pragma once

#include <cstdint>
#include <vector>

#include "plumb/formats/int4.h"

namespace plumb {

// The three tensors both packings store (their layouts differ; below).
struct Int4PackedWords {
  int in_features = 0;   // K
  int out_features = 0;  // N
  int group_size = 128;  // G: 32, 64 or 128
  std::vector<std::int32_t> qweight;
  std::vector<std::int32_t> qzeros;
  std::vector<std::uint16_t> scales;  // FP16 bits
};

// GPTQ's "v1" checkpoint tensors (AutoGPTQ, GPTQModel's default; as AutoGPTQ's and exllama's kernels read
// them):
//   qweight int32 [K/8][N]   element (k, n) in word [k/8][n], bits 4·(k mod 8) .. +3, unsigned code q
//   qzeros  int32 [K/G][N/8] zero of (group g, column n) in word [g][n/8], bits 4·(n mod 8), stored as
//                            (zero − 1) mod 16: readers add 1 back, so nibble 0xF means zero 16
//   scales  FP16  [K/G][N]
//   g_idx   int32 [K]        group of input k; only the trivial k / G is accepted (act-order, whose
//                            g_idx permutes groups, is refused); may be empty
// Dequantized: w[n][k] = (q − zero) · scale. Symmetric GPTQ stores zero 8 (nibbles 0x7).
struct GptqInt4 : Int4PackedWords {
  std::vector<std::int32_t> g_idx;
};

// plumb -> GPTQ. kSymmetric: q = plumb code + 8, zero 8. kAsymmetric: q and zero as they are; zero 0 has
// no GPTQ v1 encoding (−1 would be read as 16) and is refused unless the group's scale is ±0, where the
// zero does not matter and nibble 0xF is written (GPTQ's own packer's bits). kAsymmetricF16Zero: the zero
// must be an integer 1..16 (16 -> nibble 0xF), or anything with a ±0 scale.
GptqInt4 Int4ToGptq(const Int4Matrix& m);

// GPTQ -> plumb, in the scheme asked for. kSymmetric: every zero must be 8; code = q − 8.
// kAsymmetric: zeros 1..15, and zero 16 (nibble 0xF) only in a group whose scale is ±0 (becomes 0).
// kAsymmetricF16Zero: any zero, 1..16, exactly as an FP16 value.
Int4Matrix Int4FromGptq(const GptqInt4& gptq, Int4Scheme scheme);

// AWQ's checkpoint tensors (AutoAWQ "gemm" version, as vLLM reads them):
//   qweight int32 [K][N/8]   element (k, n) in word [k][n/8]: nibble j (bits 4·j .. +3) holds column
//                            8·(n/8) + kAwqOrder[j], i.e. column n sits in nibble kAwqInverseOrder[n mod 8]
//   qzeros  int32 [K/G][N/8] zero of (g, n), same word and nibble order, stored as it is (0..15)
//   scales  FP16  [K/G][N]
// Dequantized: w[n][k] = (q − zero) · scale.
inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
inline constexpr int kAwqInverseOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};
struct AwqInt4 : Int4PackedWords {};

// plumb -> AWQ. kSymmetric: q = plumb code + 8, zero 8. kAsymmetric: as they are. kAsymmetricF16Zero:
// the zero must be an integer 0..15.
AwqInt4 Int4ToAwq(const Int4Matrix& m);

// AWQ -> plumb. kSymmetric: every zero must be 8. kAsymmetric: as they are. kAsymmetricF16Zero: the zero
// as an FP16 value.
Int4Matrix Int4FromAwq(const AwqInt4& awq, Int4Scheme scheme);

}  // namespace plumb
