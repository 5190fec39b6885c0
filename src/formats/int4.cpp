// INT4 dequantization: the definition in include/plumb/formats/int4.h (docs/formats.md "INT4").
#include "plumb/formats/int4.h"

#include <algorithm>
#include <cstring>

#include "plumb/formats/dtype.h"

namespace plumb {

const char* Int4SchemeName(Int4Scheme scheme) {
  switch (scheme) {
    case Int4Scheme::kSymmetric:
      return "sym";
    case Int4Scheme::kAsymmetric:
      return "asym";
    case Int4Scheme::kAsymmetricF16Zero:
      return "asym-f16zero";
  }
  return "?";
}

std::size_t Int4ZeroRowBytes(Int4Params params, int cols) {
  const int groups = Int4Groups(cols, params.group_size);
  switch (params.scheme) {
    case Int4Scheme::kSymmetric:
      return 0;
    case Int4Scheme::kAsymmetric:
      return Int4RowBytes(groups);
    case Int4Scheme::kAsymmetricF16Zero:
      return static_cast<std::size_t>(groups) * sizeof(std::uint16_t);
  }
  return 0;
}

void DequantizeInt4Row(Int4Params params, const std::uint8_t* codes, const std::uint16_t* scales,
                       const std::uint8_t* zeros, int cols, float* out) {
  const int groups = Int4Groups(cols, params.group_size);
  for (int g = 0; g < groups; ++g) {
    const float scale = F16ToF32(scales[g]);
    const int begin = g * params.group_size;
    const int end = std::min(cols, begin + params.group_size);
    switch (params.scheme) {
      case Int4Scheme::kSymmetric:
        for (int c = begin; c < end; ++c) {
          const int q = static_cast<int>(Int4Code(codes, c) ^ 8u) - 8;  // sign-extend the nibble
          out[c] = static_cast<float>(q) * scale;
        }
        break;
      case Int4Scheme::kAsymmetric: {
        const int z = static_cast<int>(Int4Code(zeros, g));
        for (int c = begin; c < end; ++c)
          out[c] = static_cast<float>(static_cast<int>(Int4Code(codes, c)) - z) * scale;
        break;
      }
      case Int4Scheme::kAsymmetricF16Zero: {
        std::uint16_t zero_bits;
        std::memcpy(&zero_bits, zeros + 2 * static_cast<std::size_t>(g), sizeof zero_bits);  // any alignment
        const float z = F16ToF32(zero_bits);
        for (int c = begin; c < end; ++c) out[c] = (static_cast<float>(Int4Code(codes, c)) - z) * scale;
        break;
      }
    }
  }
}

}  // namespace plumb
