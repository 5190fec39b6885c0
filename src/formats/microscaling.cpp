// Microscaled weights: layout, decoding and quantization (include/plumb/formats/microscaling.h;
// docs/formats.md "Microscaled formats").
#include "plumb/formats/microscaling.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/e8m0.h"
#include "plumb/formats/fp4.h"
#include "plumb/formats/fp8.h"

namespace plumb {

const char* MicroscalingSchemeName(MicroscalingScheme scheme) {
  switch (scheme) {
    case MicroscalingScheme::kMxfp4:
      return "mxfp4";
    case MicroscalingScheme::kNvfp4:
      return "nvfp4";
    case MicroscalingScheme::kMxfp8E4M3:
      return "mxfp8-e4m3";
    case MicroscalingScheme::kMxfp8E5M2:
      return "mxfp8-e5m2";
  }
  return "?";
}

MicroscalingScheme ParseMicroscalingScheme(std::string_view name) {
  std::string known;
  for (const MicroscalingScheme scheme : kMicroscalingSchemes) {
    if (name == MicroscalingSchemeName(scheme)) return scheme;
    known += (known.empty() ? "" : ", ") + std::string(MicroscalingSchemeName(scheme));
  }
  throw MakeError("unknown microscaling scheme '", name, "' (expected one of: ", known, ")");
}

int MicroscalingBlockSize(MicroscalingScheme scheme) {
  return scheme == MicroscalingScheme::kNvfp4 ? 16 : 32;
}

bool MicroscalingElementIsFp4(MicroscalingScheme scheme) {
  return scheme == MicroscalingScheme::kMxfp4 || scheme == MicroscalingScheme::kNvfp4;
}

int MicroscaledBlocks(MicroscalingScheme scheme, int cols) {
  const int block = MicroscalingBlockSize(scheme);
  return (cols + block - 1) / block;
}

std::size_t MicroscaledRowBytes(MicroscalingScheme scheme, int cols) {
  const auto n = static_cast<std::size_t>(cols);
  return MicroscalingElementIsFp4(scheme) ? (n + 1) / 2 : n;
}

namespace {

Fp8Format ElementFp8(MicroscalingScheme scheme) {
  return scheme == MicroscalingScheme::kMxfp8E5M2 ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
}

// The largest power of two an element reaches, emax of the OCP specification: FP4 6 = 1.5 · 2^2, E4M3
// 448 = 1.75 · 2^8, E5M2 57344 = 1.75 · 2^15.
int ElementMaxExponent(MicroscalingScheme scheme) {
  if (MicroscalingElementIsFp4(scheme)) return 2;
  return scheme == MicroscalingScheme::kMxfp8E5M2 ? 15 : 8;
}

}  // namespace

std::uint8_t MicroscaledElementCode(MicroscalingScheme scheme, const std::uint8_t* codes, std::int64_t c) {
  if (!MicroscalingElementIsFp4(scheme)) return codes[c];
  const std::uint8_t byte = codes[c / 2];
  return static_cast<std::uint8_t>(c % 2 == 0 ? byte & 0x0F : byte >> 4);
}

float MicroscaledElement(MicroscalingScheme scheme, std::uint8_t code) {
  return MicroscalingElementIsFp4(scheme) ? Fp4ToF32(code) : Fp8ToF32(code, ElementFp8(scheme));
}

float MicroscaledBlockScale(MicroscalingScheme scheme, std::uint8_t code) {
  return scheme == MicroscalingScheme::kNvfp4 ? Fp8ToF32(code, Fp8Format::kE4M3) : E8M0ToF32(code);
}

void DecodeMicroscaledRow(MicroscalingScheme scheme, const std::uint8_t* codes, const std::uint8_t* scales,
                          std::int64_t begin, std::int64_t count, float* out) {
  const int block = MicroscalingBlockSize(scheme);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t c = begin + i;
    out[i] = MicroscaledElement(scheme, MicroscaledElementCode(scheme, codes, c)) *
             MicroscaledBlockScale(scheme, scales[c / block]);
  }
}

MicroscaledMatrix QuantizeMicroscaled(const float* w, int rows, int cols, MicroscalingScheme scheme) {
  if (rows < 0 || cols < 0) throw MakeError("QuantizeMicroscaled: bad shape [", rows, "][", cols, "]");
  const std::size_t count = Extent(rows, cols);
  for (std::size_t i = 0; i < count; ++i) {
    if (!std::isfinite(w[i])) {
      throw MakeError("QuantizeMicroscaled: weight [", i / static_cast<std::size_t>(cols), "][",
                      i % static_cast<std::size_t>(cols), "] is ", w[i], " (", MicroscalingSchemeName(scheme),
                      " weights must be finite)");
    }
  }
  MicroscaledMatrix m;
  m.scheme = scheme;
  m.rows = rows;
  m.cols = cols;
  const bool fp4 = MicroscalingElementIsFp4(scheme);
  const int block = MicroscalingBlockSize(scheme);
  const int blocks = MicroscaledBlocks(scheme, cols);
  const std::size_t row_bytes = MicroscaledRowBytes(scheme, cols);
  m.codes.assign(Extent(rows, row_bytes), 0);
  m.scales.assign(Extent(rows, blocks), 0);
  const auto amax_of = [](const float* v, std::size_t n) {
    float amax = 0.0f;
    for (std::size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
    return amax;
  };
  if (scheme == MicroscalingScheme::kNvfp4) {
    // The tensor scale puts the largest block scale at E4M3's largest value: amax / (6 · 448). 1 where the
    // matrix is all zeros (every code is then 0 either way).
    const float tensor_amax = amax_of(w, count);
    m.tensor_scale =
        tensor_amax == 0.0f ? 1.0f : tensor_amax / (kFp4MaxFinite * Fp8MaxFinite(Fp8Format::kE4M3));
  }
  for (int r = 0; r < rows; ++r) {
    const float* row = w + Extent(r, cols);
    std::uint8_t* codes = m.codes.data() + Extent(r, row_bytes);
    for (int b = 0; b < blocks; ++b) {
      const int first = b * block;
      const int n = std::min(block, cols - first);
      const float amax = amax_of(row + first, static_cast<std::size_t>(n));
      std::uint8_t scale_code;
      float divisor;  // what each element is divided by before it is rounded: the decoded scale(s)
      if (scheme == MicroscalingScheme::kNvfp4) {
        // The block's scale, amax / 6 in units of the tensor scale, rounded to nearest in E4M3 (saturated:
        // FP32 rounding can put the largest block a hair above 448).
        scale_code =
            F32ToFp8(amax / kFp4MaxFinite / m.tensor_scale, Fp8Format::kE4M3, Fp8Overflow::kSaturate);
        divisor = Fp8ToF32(scale_code, Fp8Format::kE4M3) * m.tensor_scale;
      } else {
        // OCP MX v1.0: X = 2^(⌊log2 amax⌋ − emax). F32ToE8M0 toward zero is 2^⌊log2 amax⌋; the codes below
        // emax are clamped to 0, the smallest scale (amax < 2^(emax − 127), or 0).
        const int exponent = F32ToE8M0(amax, E8M0Rounding::kTowardZero, Fp8Overflow::kSaturate);
        scale_code = static_cast<std::uint8_t>(std::max(0, exponent - ElementMaxExponent(scheme)));
        divisor = E8M0ToF32(scale_code);
      }
      m.scales[Extent(r, blocks) + static_cast<std::size_t>(b)] = scale_code;
      for (int i = 0; i < n; ++i) {
        const int c = first + i;
        const float v = divisor == 0.0f ? 0.0f : row[c] / divisor;  // a power of two (MX): exact
        if (fp4) {
          const std::uint8_t q = F32ToFp4(v, Fp4Rounding::kNearestEven);
          codes[c / 2] = static_cast<std::uint8_t>(codes[c / 2] | (c % 2 == 0 ? q : q << 4));
        } else {
          codes[c] = F32ToFp8(v, ElementFp8(scheme), Fp8Overflow::kSaturate);
        }
      }
    }
  }
  return m;
}

}  // namespace plumb
