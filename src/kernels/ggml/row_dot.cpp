// RowDot: the scalar definition, and the dispatch to the variant ActiveIsa() names (kernels/row_dot.h),
// through the GGUF kernel table (ggml_kernel_table.h).
#include "plumb/kernels/row_dot.h"

#include <algorithm>
#include <optional>
#include <string>

#include "../simd/chunked_dot.h"
#include "ggml_kernel_table.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/gguf_blocks.h"

namespace plumb::kernels {
namespace {

// Block size of a type RowDot handles, 0 for any other; a switch, because RowDot checks it per row.
int BlockElements(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
      return 1;
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::MXFP4:
      return 32;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return 256;
    default:
      return 0;
  }
}

void CheckArgs(const char* what, GgmlType type, std::int64_t n) {
  const int block = BlockElements(type);
  if (block == 0) {
    const auto id = static_cast<std::uint32_t>(type);
    const std::optional<GgmlTypeTraits> traits = FindGgmlType(id);
    throw MakeError(what, ": no dot product for ",
                    traits ? std::string(traits->name) : "an unknown ggml type", " (id ", id,
                    "); supported: ", DequantizableTypeNames());
  }
  if (n < 0) throw MakeError(what, ": ", GgmlTypeName(type), " row of n = ", n, " elements (negative)");
  if (n % block != 0) {
    throw MakeError(what, ": ", GgmlTypeName(type), " stores ", block, "-element blocks; n = ", n,
                    " is not a multiple of ", block);
  }
}

float ScalarRowDotUnchecked(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n) {
  const GgmlTypeTraits traits = GgmlTraits(type);
  // Chunks are whole blocks (kDecodeChunk is a multiple of every block size), each dequantized just before
  // its products are summed.
  return ChunkedDot(n, x, [&](std::int64_t begin, std::int64_t count, float* w) {
    DequantizeRow(type, row + begin / traits.block_elements * traits.block_bytes, w, count);
  });
}

}  // namespace

bool HasRowDot(GgmlType type) {
  return BlockElements(type) != 0;
}

float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n) {
  CheckArgs("RowDot", type, n);
  float y = 0.0f;
  ggml::GgmlKernelsFor(type, ActiveIsa()).row_dots(type, row, 0, 1, x, n, &y);
  return y;
}

void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y) {
  CheckArgs("RowDots", type, n);
  if (n_rows < 0) throw MakeError("RowDots: n_rows = ", n_rows, " (negative)");
  ggml::GgmlKernelsFor(type, ActiveIsa()).row_dots(type, rows, row_stride, n_rows, x, n, y);
}

#if defined(__x86_64__)
// The x86 variants named directly: their columns of the table.
namespace avx2 {
float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n) {
  float y = 0.0f;
  RowDots(type, row, 0, 1, x, n, &y);
  return y;
}
void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y) {
  ggml::GgmlKernelsFor(type, Isa::kAvx2).row_dots(type, rows, row_stride, n_rows, x, n, y);
}
}  // namespace avx2
namespace avx512 {
float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n) {
  float y = 0.0f;
  RowDots(type, row, 0, 1, x, n, &y);
  return y;
}
void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y) {
  ggml::GgmlKernelsFor(type, Isa::kAvx512).row_dots(type, rows, row_stride, n_rows, x, n, y);
}
}  // namespace avx512
#endif

#if defined(__aarch64__)
// The NEON variant named directly (neon_test.cpp): its column of the table.
namespace neon {
float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n) {
  float y = 0.0f;
  RowDots(type, row, 0, 1, x, n, &y);
  return y;
}
void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y) {
  ggml::GgmlKernelsFor(type, Isa::kNeon).row_dots(type, rows, row_stride, n_rows, x, n, y);
}
}  // namespace neon
#endif

namespace ggml::scalar {

void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y) {
  for (std::int64_t r = 0; r < n_rows; ++r) {
    y[r] = ScalarRowDotUnchecked(type, rows + Extent(r, row_stride), x, n);
  }
}

}  // namespace ggml::scalar

namespace scalar {

float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n) {
  CheckArgs("scalar::RowDot", type, n);
  return ScalarRowDotUnchecked(type, row, x, n);
}

}  // namespace scalar
}  // namespace plumb::kernels
