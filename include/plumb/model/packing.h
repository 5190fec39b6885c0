// The weight formats of packed checkpoints: what `plumb pack --dtype` writes and the safetensors loader
// reads back. Tensor names, dtypes and config.json's quantization_config: docs/formats.md
// ("Packed checkpoints").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plumb/formats/block_fp8.h"
#include "plumb/formats/fp8.h"
#include "plumb/formats/int4.h"
#include "plumb/formats/microscaling.h"

namespace plumb {

enum class PackKind : std::uint8_t { kF32, kF16, kBF16, kFp8, kInt4, kMicroscaled, kBlockFp8 };

struct PackFormat {
  PackKind kind = PackKind::kF32;
  Fp8Format fp8 = Fp8Format::kE4M3;  // kFp8 only
  bool fp8_per_row = true;           // kFp8: a scale per output channel, or one for the tensor
  Int4Params int4;                   // kInt4 only
  MicroscalingScheme mx = MicroscalingScheme::kMxfp4;  // kMicroscaled only

  // The --dtype spelling: "f32", "f16", "bf16", "fp8-e4m3", "fp8-e5m2", "int4-sym-g32",
  // "int4-asym-g128", "int4-asym-f16zero-g64", ..., "mxfp4", "nvfp4", "mxfp8-e4m3", "mxfp8-e5m2",
  // "fp8-block128" (kBlockFp8: E4M3 with a scale per 128 × 128 block) (fp8_per_row is not part of it).
  std::string Name() const;
  // FP8 (per row, tensor or block), INT4 and the microscaled formats need a quantization_config in
  // config.json; F32/F16/BF16 are plain checkpoints.
  bool IsQuantized() const {
    return kind != PackKind::kF32 && kind != PackKind::kF16 && kind != PackKind::kBF16;
  }
};

// Inverse of Name(); nullopt for anything else.
std::optional<PackFormat> ParsePackFormat(std::string_view name);
// Every name ParsePackFormat accepts, in a fixed order (for --help and error messages).
const std::vector<std::string>& PackFormatNames();

// How a packed checkpoint stores its matrices (config.json "quantization_config").
struct WeightPacking {
  PackFormat format;  // IsQuantized()
  // The token embedding (and an untied LM head) packed like the Linear weights; false: stored as F16.
  bool embedding_packed = true;
};

}  // namespace plumb
