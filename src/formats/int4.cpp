// INT4 dequantization (the definition in include/plumb/formats/int4.h) and round-to-nearest quantization
// (docs/formats.md "INT4").
#include "plumb/formats/int4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"
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
      return Extent(groups, sizeof(std::uint16_t));
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

namespace {

// Round to nearest, ties to even (torch.round, which GPTQ and AWQ use), then clamp to [lo, hi].
int RoundClamp(float x, int lo, int hi) {
  return static_cast<int>(std::clamp(std::nearbyint(x), static_cast<float>(lo), static_cast<float>(hi)));
}

void SetNibble(std::uint8_t* bytes, int index, unsigned nibble) {
  bytes[index / 2] = static_cast<std::uint8_t>(bytes[index / 2] | ((nibble & 0xFu) << (4 * (index % 2))));
}

// The FP16 scale of a group whose FP32 scale is `scale`; an FP16 overflow is an error, not an inf.
std::uint16_t GroupScale(float scale, int row, int group) {
  const std::uint16_t bits = F32ToF16(scale);
  if ((bits & 0x7C00u) == 0x7C00u) {
    throw MakeError("QuantizeInt4: row ", row, " group ", group, " needs scale ", scale,
                    ", beyond FP16's largest finite value 65504");
  }
  return bits;
}

}  // namespace

Int4Matrix QuantizeInt4(const float* w, int rows, int cols, Int4Params params) {
  const int G = params.group_size;
  if (G != 32 && G != 64 && G != 128) {
    throw MakeError("QuantizeInt4: group size ", G, " (must be 32, 64 or 128)");
  }
  if (rows < 0 || cols < 0) throw MakeError("QuantizeInt4: bad shape [", rows, "][", cols, "]");
  Int4Matrix m;
  m.params = params;
  m.rows = rows;
  m.cols = cols;
  const int groups = Int4Groups(cols, G);
  const std::size_t code_row = Int4RowBytes(cols);
  const std::size_t zero_row = Int4ZeroRowBytes(params, cols);
  m.codes.assign(Extent(rows, code_row), 0);
  m.scales.assign(Extent(rows, groups), 0);
  m.zeros.assign(Extent(rows, zero_row), 0);

  for (int r = 0; r < rows; ++r) {
    const float* row = w + Extent(r, cols);
    std::uint8_t* codes = m.codes.data() + Extent(r, code_row);
    std::uint16_t* scales = m.scales.data() + Extent(r, groups);
    std::uint8_t* zeros = m.zeros.data() + Extent(r, zero_row);
    for (int g = 0; g < groups; ++g) {
      const int begin = g * G;
      const int end = std::min(cols, begin + G);
      // The range always includes 0 (GPTQ's rule), so a 4-bit zero point fits 0..15 and an exact 0 weight
      // stays exactly 0.
      float lo = 0.0f;
      float hi = 0.0f;
      for (int c = begin; c < end; ++c) {
        if (!std::isfinite(row[c])) {
          throw MakeError("QuantizeInt4: weight [", r, "][", c, "] is ", row[c],
                          " (INT4 weights must be finite)");
        }
        lo = std::min(lo, row[c]);
        hi = std::max(hi, row[c]);
      }
      // Symmetric: GPTQ's sym rule, scale = 2·amax / 15, so ±amax land on ±7.5 and round (ties to even)
      // to -8 and 8 -> clamped 7: every weight is within half a step, and all 16 codes are used.
      // Asymmetric: scale = (max - min) / 15 over the range with 0 included.
      const float amax = std::max(hi, -lo);  // +0, not -0, for an all-zero group
      const float wanted = params.scheme == Int4Scheme::kSymmetric ? 2.0f * amax / 15.0f : (hi - lo) / 15.0f;
      const std::uint16_t scale_bits = GroupScale(wanted, r, g);
      scales[g] = scale_bits;
      // Quantize against the scale as stored, which is what dequantization multiplies by.
      const float scale = F16ToF32(scale_bits);
      if (scale == 0.0f) continue;  // all-zero group (or below FP16's subnormals): codes, zero 0; w = 0
      switch (params.scheme) {
        case Int4Scheme::kSymmetric:
          for (int c = begin; c < end; ++c) {
            SetNibble(codes, c, static_cast<unsigned>(RoundClamp(row[c] / scale, -8, 7)) & 0xFu);
          }
          break;
        case Int4Scheme::kAsymmetric: {
          // GPTQ's order: q = clamp(round(w / scale) + zero, 0, 15).
          const int z = RoundClamp(-lo / scale, 0, 15);
          SetNibble(zeros, g, static_cast<unsigned>(z));
          for (int c = begin; c < end; ++c) {
            SetNibble(codes, c,
                      static_cast<unsigned>(std::clamp(RoundClamp(row[c] / scale, -15, 15) + z, 0, 15)));
          }
          break;
        }
        case Int4Scheme::kAsymmetricF16Zero: {
          const std::uint16_t z_bits = F32ToF16(-lo / scale);
          std::memcpy(zeros + 2 * static_cast<std::size_t>(g), &z_bits, sizeof z_bits);
          const float z = F16ToF32(z_bits);
          for (int c = begin; c < end; ++c) {
            SetNibble(codes, c, static_cast<unsigned>(RoundClamp(row[c] / scale + z, 0, 15)));
          }
          break;
        }
      }
    }
  }
  return m;
}

}  // namespace plumb
