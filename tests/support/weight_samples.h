// Random weight matrices of every format (kernels/weight_format.h), made straight from random codes, scales
// and zero points (no quantizer involved), so every value a file could hold is reachable; and the bitwise
// comparison the kernel tests judge variants by. Shared by tests/kernels/*_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "plumb/formats/dtype.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/formats/microscaling.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::testing {

inline bool Fp8IsSpecial(std::uint8_t c, Fp8Format format) {
  return format == Fp8Format::kE4M3 ? (c & 0x7F) == 0x7F : (c & 0x7C) == 0x7C;
}

inline std::uint16_t RandomFiniteF16(std::mt19937& rng) {
  for (;;) {
    const auto h = static_cast<std::uint16_t>(rng());
    if ((h & 0x7C00) != 0x7C00) return h;
  }
}

inline std::uint32_t Bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Bitwise equality, except that any NaN equals any NaN: NaN payloads are not part of the definition.
inline ::testing::AssertionResult SameBits(float got, float expected) {
  if ((std::isnan(got) && std::isnan(expected)) || Bits(got) == Bits(expected))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << " (0x" << std::hex << Bits(got) << "), expected "
                                       << expected << " (0x" << Bits(expected) << ")";
}

// ---- random matrices ------------------------------------------------------------------------------------

struct Storage {
  std::vector<std::uint8_t> codes;
  std::vector<float> fp8_scales;
  std::vector<std::uint16_t> scales;
  std::vector<std::uint8_t> zeros;
  std::vector<std::uint8_t> block_scales;  // microscaled matrices' scale codes
  std::vector<float> fp8_block_scales;     // block-scaled FP8 matrices' scales
};

// `misalign` bytes of padding before the codes (and an FP16 zero array), so rows start at odd addresses.
inline WeightMatrix RandomFp8(Fp8Format format, int rows, int cols, bool per_row, std::uint32_t seed,
                              bool specials = false, int misalign = 0) {
  std::mt19937 rng(seed);
  auto s = std::make_shared<Storage>();
  s->codes.resize(static_cast<std::size_t>(rows) * cols + misalign);
  for (auto& c : s->codes) {
    do {
      c = static_cast<std::uint8_t>(rng());
    } while (!specials && Fp8IsSpecial(c, format));
  }
  std::uniform_real_distribution<float> scale(0.001f, 4.0f);
  s->fp8_scales.resize(per_row ? rows : 1);
  for (float& v : s->fp8_scales) v = scale(rng);
  return WeightMatrix::Fp8View(format, rows, cols, s->codes.data() + misalign, s->fp8_scales.data(), per_row,
                               s);
}

inline WeightMatrix RandomInt4(Int4Params params, int rows, int cols, std::uint32_t seed, int misalign = 0) {
  std::mt19937 rng(seed);
  auto s = std::make_shared<Storage>();
  const std::size_t row_bytes = Int4RowBytes(cols);
  s->codes.resize(rows * row_bytes + misalign);
  for (auto& c : s->codes) c = static_cast<std::uint8_t>(rng());
  if (cols % 2 == 1) {  // the layout's unused high nibble of an odd row's last byte is 0
    for (int r = 0; r < rows; ++r) s->codes[misalign + r * row_bytes + row_bytes - 1] &= 0x0F;
  }
  const int groups = Int4Groups(cols, params.group_size);
  s->scales.resize(static_cast<std::size_t>(rows) * groups);
  for (auto& h : s->scales) h = RandomFiniteF16(rng);
  const std::uint8_t* zeros = nullptr;
  if (params.scheme != Int4Scheme::kSymmetric) {
    const std::size_t zero_bytes = rows * Int4ZeroRowBytes(params, cols);
    s->zeros.resize(zero_bytes + misalign);
    if (params.scheme == Int4Scheme::kAsymmetric) {
      for (std::size_t i = 0; i < zero_bytes; ++i) s->zeros[misalign + i] = static_cast<std::uint8_t>(rng());
    } else {
      // Zero points within the codes' range, as a quantizer makes them (any finite value is valid).
      std::uniform_real_distribution<float> zero(0.0f, 15.0f);
      for (std::size_t i = 0; i < zero_bytes; i += 2) {
        const std::uint16_t z = F32ToF16(zero(rng));
        std::memcpy(&s->zeros[misalign + i], &z, sizeof z);
      }
    }
    zeros = s->zeros.data() + misalign;
  }
  return WeightMatrix::Int4View(params, rows, cols, s->codes.data() + misalign, s->scales.data(), zeros, s);
}

// A microscaled matrix of random codes and scales. E8M0 scales are drawn from 2^−20 .. 2^20 (codes 107 ..
// 147), so MXFP8's products stay finite, and E4M3 block scales from the positive finite codes; with
// `specials`, one scale in each row is NaN (0xFF in E8M0, 0x7F in E4M3) and FP8 elements may be NaN or inf.
// An odd FP4 row's unused last high nibble is 0, as the layout has it.
inline WeightMatrix RandomMicroscaled(MicroscalingScheme scheme, int rows, int cols, std::uint32_t seed,
                                      bool specials = false) {
  std::mt19937 rng(seed);
  auto s = std::make_shared<Storage>();
  const std::size_t row_bytes = MicroscaledRowBytes(scheme, cols);
  const int blocks = MicroscaledBlocks(scheme, cols);
  const bool fp4 = MicroscalingElementIsFp4(scheme);
  const Fp8Format fp8 = scheme == MicroscalingScheme::kMxfp8E5M2 ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
  s->codes.resize(static_cast<std::size_t>(rows) * row_bytes);
  for (auto& c : s->codes) {
    do {
      c = static_cast<std::uint8_t>(rng());
    } while (!fp4 && !specials && Fp8IsSpecial(c, fp8));
  }
  if (fp4 && cols % 2 == 1) {
    for (int r = 0; r < rows; ++r) s->codes[r * row_bytes + row_bytes - 1] &= 0x0F;
  }
  std::vector<std::uint8_t>& scales = s->block_scales;
  scales.resize(static_cast<std::size_t>(rows) * blocks);
  for (auto& c : scales) {
    c = scheme == MicroscalingScheme::kNvfp4 ? static_cast<std::uint8_t>(1 + rng() % 0x7E)
                                             : static_cast<std::uint8_t>(107 + rng() % 41);
  }
  if (specials) {
    for (int r = 0; r < rows; ++r) {
      scales[r * static_cast<std::size_t>(blocks) + rng() % blocks] =
          scheme == MicroscalingScheme::kNvfp4 ? 0x7F : 0xFF;
    }
  }
  const float tensor_scale =
      scheme == MicroscalingScheme::kNvfp4 ? std::uniform_real_distribution<float>(0.001f, 4.0f)(rng) : 1.0f;
  return WeightMatrix::MicroscaledView(scheme, rows, cols, s->codes.data(), scales.data(), tensor_scale, s);
}

// A block-scaled FP8 matrix of random finite E4M3 codes and FP32 block scales (any significand, magnitudes
// 2^-20 .. 2^20, so products round). With `specials`, row 1 holds a NaN code in its middle column, and the
// last block of block row 1 (rows 128 ..) a scale of 2^121, beyond what the AVX2 kernels' 2^8-scaled scales
// hold (its largest codes then overflow to inf), so that the other rows still test finite dots.
inline WeightMatrix RandomBlockFp8(int rows, int cols, std::uint32_t seed, bool specials = false) {
  std::mt19937 rng(seed);
  auto s = std::make_shared<Storage>();
  s->codes.resize(static_cast<std::size_t>(rows) * cols);
  for (auto& c : s->codes) {
    do {
      c = static_cast<std::uint8_t>(rng());
    } while (Fp8IsSpecial(c, Fp8Format::kE4M3));
  }
  const int block_rows = Fp8BlockCount(rows), block_cols = Fp8BlockCount(cols);
  s->fp8_block_scales.resize(static_cast<std::size_t>(block_rows) * block_cols);
  std::uniform_real_distribution<float> significand(1.0f, 2.0f);
  for (float& v : s->fp8_block_scales) v = std::ldexp(significand(rng), static_cast<int>(rng() % 41) - 20);
  if (specials && rows > 1) s->codes[static_cast<std::size_t>(cols) + cols / 2] = 0x7F;
  if (specials && block_rows > 1)
    s->fp8_block_scales[2 * static_cast<std::size_t>(block_cols) - 1] = 0x1p121f;
  return WeightMatrix::BlockFp8View(rows, cols, s->codes.data(), s->fp8_block_scales.data(), s);
}

// A GGUF-type matrix of random rows whose every element is finite (so a row's dot is finite where x is):
// F32 uniform values; F16 and BF16 random bits with the exponent's top bit clear; blocks of random bytes,
// a block redrawn with bit 6 of every byte clear (every FP16 scale and minimum then finite) when its first
// draw decodes to a non-finite value.
inline WeightMatrix RandomGgml(GgmlType type, int rows, int cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::size_t row_bytes = GgmlRowBytes(type, cols);
  std::vector<std::uint8_t> bytes(row_bytes * static_cast<std::size_t>(rows));
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  if (type == GgmlType::F32) {
    std::uniform_real_distribution<float> value(-2.0f, 2.0f);
    for (std::size_t i = 0; i < bytes.size(); i += 4) {
      const float v = value(rng);
      std::memcpy(&bytes[i], &v, sizeof v);
    }
  } else if (type == GgmlType::F16 || type == GgmlType::BF16) {
    for (std::size_t i = 1; i < bytes.size(); i += 2) bytes[i] &= 0xBF;  // exponent's top bit clear: finite
  } else {
    const GgmlTypeTraits traits = GgmlTraits(type);
    std::vector<float> probe(traits.block_elements);
    for (std::size_t b = 0; b < bytes.size(); b += traits.block_bytes) {
      for (;;) {
        DequantizeRow(type, &bytes[b], probe.data(), traits.block_elements);
        bool finite = true;
        for (float v : probe) finite = finite && std::isfinite(v);
        if (finite) break;
        for (std::size_t i = 0; i < static_cast<std::size_t>(traits.block_bytes); ++i)
          bytes[b + i] = static_cast<std::uint8_t>(rng() & 0xBF);
      }
    }
  }
  return WeightMatrix::FromBytes(type, rows, cols, std::move(bytes));
}

}  // namespace plumb::testing
