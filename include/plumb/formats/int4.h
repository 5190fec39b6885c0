// INT4 weights: 4-bit codes in groups along the input dimension, with an FP16 scale (and zero point) per
// group. The layout and the dequantization below are the definition every kernel computes; docs/formats.md
// ("INT4") documents it nibble by nibble, with the GPTQ and AWQ packings it converts to and from.
//
// A matrix is [rows = out_features][cols = in_features]; group g of row r is columns [g·G, min((g+1)·G,
// cols)) for group size G (32, 64 or 128; the last group of a row may be partial). Three arrays, each
// row-major:
//   codes   [rows][Int4RowBytes(cols)]      byte j of a row holds column 2j in bits 0-3 (the low nibble)
//                                           and column 2j+1 in bits 4-7; an odd row ends with a 0 high nibble
//   scales  [rows][Int4Groups(cols, G)]     FP16 bits
//   zeros   kAsymmetric:        [rows][Int4RowBytes(groups)]  4-bit zero points, nibble order as the codes
//           kAsymmetricF16Zero: [rows][groups]                FP16 bits
//           kSymmetric:         none
// Dequantized value of column c in group g (every operation in FP32, each result rounded):
//   kSymmetric           q = the nibble as two's complement (−8..7)   w = float(q) · float(scale_g)
//   kAsymmetric          q = the nibble (0..15), z = zero nibble       w = float(q − z) · float(scale_g)
//   kAsymmetricF16Zero   q = the nibble (0..15), z = FP16 zero         w = (float(q) − float(z_g)) ·
//   float(scale_g)
// The first two products are exact (a 5-bit integer times an 11-bit significand).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace plumb {

enum class Int4Scheme : std::uint8_t { kSymmetric, kAsymmetric, kAsymmetricF16Zero };

struct Int4Params {
  Int4Scheme scheme = Int4Scheme::kSymmetric;
  int group_size = 32;
};

const char* Int4SchemeName(Int4Scheme scheme);  // "sym", "asym", "asym-f16zero"

inline std::size_t Int4RowBytes(std::int64_t cols) {
  return static_cast<std::size_t>((cols + 1) / 2);
}
inline int Int4Groups(int cols, int group_size) {
  return (cols + group_size - 1) / group_size;
}
// Bytes of one row of zero points (0 for kSymmetric).
std::size_t Int4ZeroRowBytes(Int4Params params, int cols);

// The 4-bit code of column c of a row of codes.
inline unsigned Int4Code(const std::uint8_t* codes, std::int64_t c) {
  return (codes[c / 2] >> (4 * (c % 2))) & 0xFu;
}

// One row of the matrix in FP32, per the definition above: out[0..cols).
//   codes: Int4RowBytes(cols) bytes; scales: Int4Groups(cols, G) FP16 values; zeros: Int4ZeroRowBytes bytes
//   (ignored for kSymmetric).
void DequantizeInt4Row(Int4Params params, const std::uint8_t* codes, const std::uint16_t* scales,
                       const std::uint8_t* zeros, int cols, float* out);

// An INT4 matrix in the layout above, owning its arrays.
struct Int4Matrix {
  Int4Params params;
  int rows = 0;
  int cols = 0;
  std::vector<std::uint8_t> codes;    // [rows][Int4RowBytes(cols)]
  std::vector<std::uint16_t> scales;  // [rows][groups] FP16
  std::vector<std::uint8_t> zeros;    // [rows][Int4ZeroRowBytes(params, cols)] (empty for kSymmetric)
};
// Round-to-nearest quantization of an FP32 matrix [rows][cols], group by group; the rule for each scheme
// (how scale and zero are chosen) is in docs/formats.md ("INT4"). Throws plumb::Error for a group size
// other than 32, 64 or 128, a non-finite weight, or a group whose scale exceeds FP16's range.
Int4Matrix QuantizeInt4(const float* w, int rows, int cols, Int4Params params);

}  // namespace plumb
