// Dequantization of ggml blocks. Every layout and every float operation below is specified in
// docs/formats.md ("GGUF blocks"); the loops follow ggml-quants.c's dequantize_row_* so that each element is
// the same sequence of float32 operations there, here and in gguf-py (and so the same bits).
//
// A recurring argument: a product of an f16 value (11 significant bits) and small integers (here at most
// 13 bits in all) is exact in float32 (24 bits), so where ggml and gguf-py group such products differently
// the result cannot differ. Only the final add or subtract of a min rounds; its operands are kept in the
// reference order anyway.
#include "plumb/formats/gguf_blocks.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"

namespace plumb {
namespace {

constexpr int kQK = 32;     // elements per block of Q4_0 .. Q8_0
constexpr int kQK_K = 256;  // elements per super-block of the K-quants

std::uint16_t ReadU16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));  // little-endian on every host
}
float Half(const std::uint8_t* p) {
  return F16ToF32(ReadU16(p));
}

// ---- plain types: one element per "block" -----------------------------------------------------------

void RowF32(const std::uint8_t* src, float* dst, std::int64_t n) {
  if (n > 0) std::memcpy(dst, src, Extent(n, sizeof(float)));  // src may be unaligned
}
void RowF16(const std::uint8_t* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(ReadU16(src + 2 * i));
}
void RowBF16(const std::uint8_t* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = BF16ToF32(ReadU16(src + 2 * i));
}

// ---- 32-element blocks ------------------------------------------------------------------------------
// Element j < 16 is the low nibble of qs[j], element j + 16 its high nibble.

// [d f16][qs 16 B]: d · (q − 8)
void BlockQ4_0(const std::uint8_t* b, float* y) {
  const float d = Half(b);
  const std::uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// [d f16][m f16][qs 16 B]: d · q + m (d · q exact; the add rounds)
void BlockQ4_1(const std::uint8_t* b, float* y) {
  const float d = Half(b);
  const float m = Half(b + 2);
  const std::uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + kQK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// [e u8][qs 16 B] (GGUF type 39, ggml's block_mxfp4): ggml's arithmetic, which defines the type: the E2M1
// codes doubled to integers (kvalues_mxfp4) times d = 2^(e − 128) (ggml_e8m0_to_fp32_half: e = 0 and 1 give
// the subnormals 2^−128 and 2^−127, and e = 255 gives 2^127, not the OCP scale's NaN). Each product is exact,
// or ±inf past FP32's range (kvalue ≥ 2 at e = 255). Elements in Q4_0's order: j low nibble, j + 16 high.
void BlockMxfp4(const std::uint8_t* b, float* y) {
  constexpr std::int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const std::uint32_t e = b[0];
  const float d = std::bit_cast<float>(e < 2 ? std::uint32_t{0x00200000} << e : (e - 1) << 23);
  const std::uint8_t* qs = b + 1;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(kValues[qs[j] & 0x0F]) * d;
    y[j + kQK / 2] = static_cast<float>(kValues[qs[j] >> 4]) * d;
  }
}

// The fifth bits of Q5_0 / Q5_1: bit j of the little-endian uint32 qh belongs to element j.
std::uint32_t ReadU32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

// [d f16][qh 4 B][qs 16 B]: d · (q − 16)
void BlockQ5_0(const std::uint8_t* b, float* y) {
  const float d = Half(b);
  const std::uint32_t qh = ReadU32(b + 2);
  const std::uint8_t* qs = b + 6;
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = static_cast<int>((qs[j] & 0x0F) | (((qh >> j) & 1u) << 4));
    const int q1 = static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
    y[j] = static_cast<float>(q0 - 16) * d;
    y[j + kQK / 2] = static_cast<float>(q1 - 16) * d;
  }
}

// [d f16][m f16][qh 4 B][qs 16 B]: d · q + m
void BlockQ5_1(const std::uint8_t* b, float* y) {
  const float d = Half(b);
  const float m = Half(b + 2);
  const std::uint32_t qh = ReadU32(b + 4);
  const std::uint8_t* qs = b + 8;
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = static_cast<int>((qs[j] & 0x0F) | (((qh >> j) & 1u) << 4));
    const int q1 = static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
    y[j] = static_cast<float>(q0) * d + m;
    y[j + kQK / 2] = static_cast<float>(q1) * d + m;
  }
}

// [d f16][qs 32 × int8]: d · q
void BlockQ8_0(const std::uint8_t* b, float* y) {
  const float d = Half(b);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(b[2 + j])) * d;
}

// ---- 256-element super-blocks (K-quants) ------------------------------------------------------------

// [scales 16 B][qs 64 B][d f16][dmin f16]. 16 sub-blocks of 16; scales[s] = min·16 + scale (4 bits each).
// Element 128h + 32k + l is bits 2k..2k+1 of qs[32h + l]; value (d·scale)·q − dmin·min.
void BlockQ2_K(const std::uint8_t* b, float* y) {
  const std::uint8_t* scales = b;
  const std::uint8_t* qs = b + 16;
  const float d = Half(b + 80);
  const float dmin = Half(b + 82);
  for (int e = 0; e < kQK_K; ++e) {
    const int half = e / 128, k = (e % 128) / 32, l = e % 32;
    const std::uint8_t sc = scales[e / 16];
    const float dl = d * static_cast<float>(sc & 0x0F);
    const float ml = dmin * static_cast<float>(sc >> 4);
    const int q = (qs[32 * half + l] >> (2 * k)) & 3;
    y[e] = dl * static_cast<float>(q) - ml;
  }
}

// The 16 six-bit scales of Q3_K, stored as 12 bytes: the low 4 bits of scale s in byte s % 8 (low nibble for
// s < 8, high nibble for s >= 8), the high 2 bits in byte 8 + s % 4 at bit 2·(s / 4).
int Q3KScale(const std::uint8_t* scales, int s) {
  const int low = s < 8 ? (scales[s] & 0x0F) : (scales[s - 8] >> 4);
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// [hmask 32 B][qs 64 B][scales 12 B][d f16]. Element 128h + 32k + l: low 2 bits as in Q2_K, the third bit is
// bit 4h + k of hmask[l]; q = low − (bit ? 0 : 4) ∈ [−4, 3]; value (d·scale)·q.
void BlockQ3_K(const std::uint8_t* b, float* y) {
  const std::uint8_t* hmask = b;
  const std::uint8_t* qs = b + 32;
  const std::uint8_t* scales = b + 96;
  const float d = Half(b + 108);
  for (int e = 0; e < kQK_K; ++e) {
    const int half = e / 128, k = (e % 128) / 32, l = e % 32;
    const float dl = d * static_cast<float>(Q3KScale(scales, e / 16));
    const int low = (qs[32 * half + l] >> (2 * k)) & 3;
    const int high_bit = (hmask[l] >> (4 * half + k)) & 1;
    y[e] = dl * static_cast<float>(low - (high_bit ? 0 : 4));
  }
}

// The eight 6-bit (scale, min) pairs of Q4_K and Q5_K, packed in 12 bytes (ggml's get_scale_min_k4):
// j < 4: scale = q[j] & 63, min = q[j + 4] & 63; j >= 4: the low 4 bits in q[j + 4] (scale low nibble, min
// high nibble) and the high 2 bits in the top bits of q[j − 4] (scale) and q[j] (min).
void ScaleMinK4(int j, const std::uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// [d f16][dmin f16][scales 12 B][qs 128 B]. Sub-block s = 2c + h (32 elements) is the low (h = 0) or high
// (h = 1) nibbles of qs[32c .. 32c + 32); value (d·scale)·q − dmin·min.
void BlockQ4_K(const std::uint8_t* b, float* y) {
  const float d = Half(b);
  const float dmin = Half(b + 2);
  const std::uint8_t* scales = b + 4;
  const std::uint8_t* qs = b + 16;
  for (int s = 0; s < 8; ++s) {
    int sc = 0, m = 0;
    ScaleMinK4(s, scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(m);
    const std::uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) y[32 * s + l] = d1 * static_cast<float>((q[l] >> shift) & 0x0F) - m1;
  }
}

// [d f16][dmin f16][scales 12 B][qh 32 B][qs 128 B]: Q4_K's nibbles plus a fifth bit, bit s of qh[l] for
// element 32s + l.
void BlockQ5_K(const std::uint8_t* b, float* y) {
  const float d = Half(b);
  const float dmin = Half(b + 2);
  const std::uint8_t* scales = b + 4;
  const std::uint8_t* qh = b + 16;
  const std::uint8_t* qs = b + 48;
  for (int s = 0; s < 8; ++s) {
    int sc = 0, m = 0;
    ScaleMinK4(s, scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(m);
    const std::uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) {
      const int value = ((q[l] >> shift) & 0x0F) | (((qh[l] >> s) & 1) << 4);
      y[32 * s + l] = d1 * static_cast<float>(value) - m1;
    }
  }
}

// [ql 128 B][qh 64 B][scales 16 × int8][d f16]. In half h (128 elements): element 128h + 32k + l takes its
// low 4 bits from ql[64h + l + 32·(k % 2)] (low nibble for k < 2, high for k >= 2) and its high 2 bits from
// bits 2k..2k+1 of qh[32h + l]; q = that − 32; value (d·scale)·q with scale = scales[e / 16].
void BlockQ6_K(const std::uint8_t* b, float* y) {
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const std::uint8_t* scales = b + 192;
  const float d = Half(b + 208);
  for (int e = 0; e < kQK_K; ++e) {
    const int half = e / 128, k = (e % 128) / 32, l = e % 32;
    const int low = (ql[64 * half + l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0F;
    const int high = (qh[32 * half + l] >> (2 * k)) & 3;
    const int q = (low | (high << 4)) - 32;
    const float scale = static_cast<float>(static_cast<std::int8_t>(scales[e / 16]));
    y[e] = d * scale * static_cast<float>(q);  // (d·scale)·q, ggml's order
  }
}

// ---- the table ----------------------------------------------------------------------------------------

using BlockFn = void (*)(const std::uint8_t* block, float* out);
using RowFn = void (*)(const std::uint8_t* src, float* dst, std::int64_t n);

struct Format {
  GgmlType type;
  int block_elements;
  int block_bytes;
  RowFn row;      // plain types (block of 1)
  BlockFn block;  // block types
};

// Block sizes as in ggml_types.cpp (checked against it by the test).
constexpr Format kFormats[] = {
    {GgmlType::F32, 1, 4, RowF32, nullptr},         {GgmlType::F16, 1, 2, RowF16, nullptr},
    {GgmlType::BF16, 1, 2, RowBF16, nullptr},       {GgmlType::Q4_0, 32, 18, nullptr, BlockQ4_0},
    {GgmlType::Q4_1, 32, 20, nullptr, BlockQ4_1},   {GgmlType::Q5_0, 32, 22, nullptr, BlockQ5_0},
    {GgmlType::Q5_1, 32, 24, nullptr, BlockQ5_1},   {GgmlType::Q8_0, 32, 34, nullptr, BlockQ8_0},
    {GgmlType::Q2_K, 256, 84, nullptr, BlockQ2_K},  {GgmlType::Q3_K, 256, 110, nullptr, BlockQ3_K},
    {GgmlType::Q4_K, 256, 144, nullptr, BlockQ4_K}, {GgmlType::Q5_K, 256, 176, nullptr, BlockQ5_K},
    {GgmlType::Q6_K, 256, 210, nullptr, BlockQ6_K}, {GgmlType::MXFP4, 32, 17, nullptr, BlockMxfp4},
};

// A linear search: DequantizeRow is called per chunk of a row by the scalar RowDot, so this stays cheap.
const Format* FindFormat(GgmlType type) {
  for (const Format& format : kFormats) {
    if (format.type == type) return &format;
  }
  return nullptr;
}

std::string TypeLabel(GgmlType type) {
  const auto id = static_cast<std::uint32_t>(type);
  const std::optional<GgmlTypeTraits> traits = FindGgmlType(id);
  return traits ? std::string(traits->name) + " (id " + std::to_string(id) + ")"
                : "type id " + std::to_string(id) + " (not a known ggml type)";
}

}  // namespace

std::string DequantizableTypeNames() {
  std::string list;
  for (const Format& format : kFormats) {
    if (!list.empty()) list += ", ";
    list += GgmlTypeName(format.type);
  }
  return list;
}

namespace {

// n elements of a type stored in `block_elements`-element blocks make whole blocks, or an Error naming
// `what` (the caller), the type and n.
void CheckLength(const char* what, GgmlType type, int block_elements, std::int64_t n) {
  if (n < 0) throw MakeError(what, ": ", GgmlTypeName(type), " row of n = ", n, " elements (negative)");
  if (n % block_elements != 0) {
    throw MakeError(what, ": ", GgmlTypeName(type), " stores ", block_elements, "-element blocks; n = ", n,
                    " is not a multiple of ", block_elements);
  }
}

}  // namespace

bool CanDequantize(GgmlType type) {
  return FindFormat(type) != nullptr;
}

std::int64_t GgmlRowBytes(GgmlType type, std::int64_t n) {
  const std::optional<GgmlTypeTraits> traits = FindGgmlType(static_cast<std::uint32_t>(type));
  if (!traits) throw MakeError("GgmlRowBytes: ", TypeLabel(type));
  CheckLength("GgmlRowBytes", type, traits->block_elements, n);
  return n / traits->block_elements * traits->block_bytes;
}

void DequantizeRow(GgmlType type, const std::uint8_t* src, float* dst, std::int64_t n) {
  const Format* format = FindFormat(type);
  if (format == nullptr) {
    throw MakeError("DequantizeRow: cannot dequantize ", TypeLabel(type),
                    "; supported: ", DequantizableTypeNames());
  }
  CheckLength("DequantizeRow", type, format->block_elements, n);
  if (format->row != nullptr) {
    format->row(src, dst, n);
    return;
  }
  const std::int64_t n_blocks = n / format->block_elements;
  for (std::int64_t i = 0; i < n_blocks; ++i) {
    format->block(src + i * format->block_bytes, dst + i * format->block_elements);
  }
}

std::vector<int> BlockScaleOffsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
      return {0};  // d
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};  // d, then m (Q4_1, Q5_1) or dmin (Q4_K, Q5_K)
    case GgmlType::Q2_K:
      return {80, 82};  // after scales[16] and qs[64]: d, dmin
    case GgmlType::Q3_K:
      return {108};  // after hmask[32], qs[64], scales[12]: d
    case GgmlType::Q6_K:
      return {208};  // after ql[128], qh[64], scales[16]: d
    default:
      return {};
  }
}

}  // namespace plumb
