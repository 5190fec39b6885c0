// Random GGUF block matrices for the benchmarks: random codes with finite FP16 scales, the shapes and types
// of real models without their files.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "plumb/formats/dtype.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::bench {

// A GGUF block matrix of random codes with finite FP16 scales in [0.001, 0.5).
inline WeightMatrix RandomBlocks(GgmlType type, int rows, int cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> bytes(GgmlRowBytes(type, cols) * rows);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  const std::size_t block_bytes = GgmlTraits(type).block_bytes;
  std::uniform_real_distribution<float> scale(0.001f, 0.5f);
  for (std::size_t block = 0; block < bytes.size(); block += block_bytes) {
    for (int offset : BlockScaleOffsets(type)) {
      const std::uint16_t h = F32ToF16(scale(rng));
      std::memcpy(&bytes[block + offset], &h, 2);
    }
  }
  return WeightMatrix::FromBytes(type, rows, cols, std::move(bytes));
}

}  // namespace plumb::bench
