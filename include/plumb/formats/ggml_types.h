// The tensor element types of GGUF files (ggml's type ids) and the size of their blocks.
//
// A quantized type stores a row as consecutive blocks; a block holds `block_elements` elements in
// `block_bytes` bytes. Layouts of the types plumb computes with are in docs/formats.md ("GGUF blocks").
// The table covers every id the gguf reference package (gguf-py 0.19) knows, so that a file with a type
// plumb cannot compute with still opens and the model loader can name the tensor and its type.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace plumb {

enum class GgmlType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct GgmlTypeTraits {
  std::string_view name;  // "Q4_1"
  int block_elements;     // elements per block (1 for plain types)
  int block_bytes;        // bytes per block
};

// Traits of a known type id; nullopt for an id not in the table (an unknown or retired type).
std::optional<GgmlTypeTraits> FindGgmlType(std::uint32_t id);

// Traits of a valid enum value.
GgmlTypeTraits GgmlTraits(GgmlType type);

inline std::string_view GgmlTypeName(GgmlType type) {
  return GgmlTraits(type).name;
}

}  // namespace plumb
