// Dequantization of ggml's block formats: the weights of a GGUF file, turned back into float32.
//
// Each format's bytes, element by element, and the float operations that produce each value are in
// docs/formats.md ("GGUF blocks"). The results are bitwise those of ggml's dequantize_row_* and of gguf-py's
// gguf.quants.dequantize (tested against the latter on fixtures/blocks/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plumb/formats/ggml_types.h"

namespace plumb {

// True for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K; false for every
// other type, including a value that is not a known ggml type id.
bool CanDequantize(GgmlType type);
// The types CanDequantize accepts, by name, comma-separated (for error messages).
std::string DequantizableTypeNames();

// The bytes that n elements of `type` occupy: n / block_elements · block_bytes. Throws plumb::Error when n
// is negative or not a multiple of the type's block, or when the type is not a known ggml type id.
std::int64_t GgmlRowBytes(GgmlType type, std::int64_t n);

// Byte offsets, within one block, of the block's f16 scale fields (d, and m or dmin where the type has
// one), as docs/formats.md "GGUF blocks" lays them out; empty for F32, F16 and BF16. Tests and benchmarks
// that fill blocks with random bytes write finite scales there.
std::vector<int> BlockScaleOffsets(GgmlType type);

// Writes the n elements stored at src (GgmlRowBytes(type, n) bytes, any alignment) to dst as float32.
// Throws plumb::Error (naming the type, n and the block size) when CanDequantize(type) is false, or n is
// negative or not a multiple of the type's block_elements; nothing is read or written then.
void DequantizeRow(GgmlType type, const std::uint8_t* src, float* dst, std::int64_t n);

}  // namespace plumb
