// The int8 panels' repacking (int8_panel.h): each GGUF type's codes and factors, as ggml_int8.cpp's
// definition reads them (docs/formats.md "GGUF blocks"), interleaved 16 rows at a time.
#include "int8_panel.h"

#include <cstring>

#include "../simd/bytes.h"
#include "ggml_kernels.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"

namespace plumb::kernels::ggml {
namespace {

float Half(const std::uint8_t* p) {
  return F16ToF32(ReadU16(p));
}

// Codes4<T>(block, e): the stored codes u = w + offset of elements e .. e + 3 of one block (Q4_0 .. Q8_0)
// or super-block (the K-quants), packed little-endian (element e in the low byte), e a multiple of 4. Four
// codes come out of one 32-bit read of the packed bits, a shift and a mask, where the layout puts 4
// consecutive elements in 4 consecutive bytes (docs/formats.md "GGUF blocks"): repacking costs about an
// operation per element, not several.
constexpr std::uint32_t kLowNibbles = 0x0F0F0F0Fu, kLowTwoBits = 0x03030303u, kLowBit = 0x01010101u;

// Bits e .. e + 3 of a 32-bit mask, each as bit 4 of its byte (the fifth bit of Q5_0 and Q5_1): the
// multiply puts copies of the 4 bits 7 apart, so bit i lands on bit 8i, with no carries between them.
std::uint32_t FifthBits4(std::uint32_t qh, int e) {
  return (((qh >> e) & 0x0Fu) * 0x00204081u & kLowBit) << 4;
}

template <GgmlType T>
std::uint32_t Codes4(const std::uint8_t* b, int e) {
  if constexpr (T == GgmlType::Q8_0) {
    return ReadU32(b + 2 + e) ^ 0x80808080u;  // w + 128
  } else if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q4_1 || T == GgmlType::Q5_0 ||
                       T == GgmlType::Q5_1) {
    constexpr Int8Layout layout = Int8LayoutOf(T);
    const std::uint32_t nibbles = (ReadU32(b + layout.qs + e % 16) >> (e < 16 ? 0 : 4)) & kLowNibbles;
    if constexpr (layout.five_bits) return nibbles | FifthBits4(ReadU32(b + layout.qs - 4), e);
    return nibbles;
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    const int t = e / 32, l = e % 32;  // sub-block t: nibbles of qs[32(t / 2) + l], Q5_K's bit t of qh[l]
    const std::uint8_t* qs = b + (T == GgmlType::Q5_K ? 48 : 16);
    const std::uint32_t nibbles = (ReadU32(qs + 32 * (t / 2) + l) >> (4 * (t % 2))) & kLowNibbles;
    if constexpr (T == GgmlType::Q5_K) return nibbles | ((ReadU32(b + 16 + l) >> t) & kLowBit) << 4;
    return nibbles;
  } else {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;  // element 128h + 32k + l
    if constexpr (T == GgmlType::Q2_K) return (ReadU32(b + 16 + 32 * h + l) >> (2 * k)) & kLowTwoBits;
    if constexpr (T == GgmlType::Q3_K) {  // low 2 bits, + 4 where hmask's bit 4h + k is set (u = w + 4)
      const std::uint32_t low = (ReadU32(b + 32 + 32 * h + l) >> (2 * k)) & kLowTwoBits;
      return low + (((ReadU32(b + l) >> (4 * h + k)) & kLowBit) << 2);
    }
    // Q6_K: 4 low bits from ql, 2 high from qh, the 6-bit q = w + 32
    const std::uint32_t low = (ReadU32(b + 64 * h + 32 * (k % 2) + l) >> (4 * (k / 2))) & kLowNibbles;
    return low | ((ReadU32(b + 128 + 32 * h + l) >> (2 * k)) & kLowTwoBits) << 4;
  }
}

// Each term's ws and wm for one row (the definition's products: ggml_int8.cpp).
void RowFactors(GgmlType type, const std::uint8_t* row, int cols, float* ws, float* wm) {
  const Int8Layout small = Int8LayoutOf(type);
  if (small.block_bytes != 0) {
    for (int b = 0; b < cols / 32; ++b) {
      const std::uint8_t* block = row + Extent(b, small.block_bytes);
      ws[b] = Half(block);
      if (small.has_min) wm[b] = Half(block + 2);
    }
    return;
  }
  const KLayout k = KLayoutOf(type);
  for (int B = 0; B < cols / 256; ++B) {
    const std::uint8_t* sb = row + Extent(B, k.block_bytes);
    const float d = Half(sb + k.d);
    const float dmin = k.dmin >= 0 ? Half(sb + k.dmin) : 0.0f;
    int scale[16], min[16];
    KSubBlockScales(type, sb, scale, min);
    if (type == GgmlType::Q2_K) {  // terms of 4, four to a 16-element sub-block
      for (int t = 0; t < 64; ++t) {
        ws[64 * B + t] = d * static_cast<float>(scale[t / 4]);
        wm[64 * B + t] = dmin * static_cast<float>(min[t / 4]);
      }
    } else if (type == GgmlType::Q3_K || type == GgmlType::Q6_K) {  // terms of 16
      for (int s = 0; s < 16; ++s) ws[16 * B + s] = d * static_cast<float>(scale[s]);
    } else {  // Q4_K, Q5_K: terms of 32, both halves of x block t with sub-block t's pair
      for (int t = 0; t < 8; ++t) {
        ws[8 * B + t] = d * static_cast<float>(scale[2 * t]);
        wm[8 * B + t] = dmin * static_cast<float>(min[2 * t]);
      }
    }
  }
}

// Row j of a group: every term's codes and factors at their places (int8_panel.h's layout).
template <GgmlType T>
void RepackRow(const std::uint8_t* row, const Panel& panel, const std::size_t* lane_offset, const float* ws,
               const float* wm, std::uint8_t* group, int j) {
  constexpr int kBlockElements = Int8LayoutOf(T).block_bytes != 0 ? 32 : 256;
  constexpr int kBlockBytes = kBlockElements == 32 ? Int8LayoutOf(T).block_bytes : KLayoutOf(T).block_bytes;
  const PanelShape& shape = panel.shape;
  const int G = shape.term_elements;
  const std::size_t term_bytes = shape.TermBytes();
  const std::size_t factors = std::size_t{16} * static_cast<std::size_t>(G);
  for (int lane = 0; lane < 8; ++lane) {
    std::uint8_t* term = group + lane_offset[lane];
    for (int tau = shape.FirstTerm(lane); tau < panel.terms; tau += 8, term += term_bytes) {
      const int e0 = tau * G;
      const std::uint8_t* block = row + Extent(e0 / kBlockElements, kBlockBytes);
      for (int c = 0; c < G / 4; ++c) {
        const std::uint32_t codes = Codes4<T>(block, e0 % kBlockElements + 4 * c);
        std::memcpy(term + 64 * c + 4 * j, &codes, 4);
      }
      std::memcpy(term + factors + 4 * j, &ws[tau], 4);
      if (shape.min != PanelMin::kNone) std::memcpy(term + factors + 64 + 4 * j, &wm[tau], 4);
    }
  }
}

using RepackRowFn = void (*)(const std::uint8_t*, const Panel&, const std::size_t*, const float*,
                             const float*, std::uint8_t*, int);

RepackRowFn RepackRowFor(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return RepackRow<GgmlType::Q4_0>;
    case GgmlType::Q4_1:
      return RepackRow<GgmlType::Q4_1>;
    case GgmlType::Q5_0:
      return RepackRow<GgmlType::Q5_0>;
    case GgmlType::Q5_1:
      return RepackRow<GgmlType::Q5_1>;
    case GgmlType::Q8_0:
      return RepackRow<GgmlType::Q8_0>;
    case GgmlType::Q2_K:
      return RepackRow<GgmlType::Q2_K>;
    case GgmlType::Q3_K:
      return RepackRow<GgmlType::Q3_K>;
    case GgmlType::Q4_K:
      return RepackRow<GgmlType::Q4_K>;
    case GgmlType::Q5_K:
      return RepackRow<GgmlType::Q5_K>;
    case GgmlType::Q6_K:
      return RepackRow<GgmlType::Q6_K>;
    default:
      return nullptr;
  }
}

}  // namespace

PanelShape PanelShapeOf(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return {.term_elements = 32, .offset = 8};
    case GgmlType::Q5_0:
      return {.term_elements = 32, .offset = 16};
    case GgmlType::Q8_0:
      return {.term_elements = 32, .offset = 128};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return {.term_elements = 32, .min = PanelMin::kBlockSum};
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {.term_elements = 32, .min = PanelMin::kBlockSum, .min_subtracts = true};
    case GgmlType::Q3_K:
      return {.term_elements = 16, .offset = 4};
    case GgmlType::Q6_K:
      return {.term_elements = 16, .offset = 32};
    case GgmlType::Q2_K:
      return {.term_elements = 4, .min = PanelMin::kTermSum, .min_subtracts = true};
    default:
      return {};
  }
}

bool HasPanel(GgmlType type) {
  return PanelShapeOf(type).term_elements != 0;
}

int Panel::LaneTerms(int lane) const {
  const int first = shape.FirstTerm(lane);
  return first < terms ? (terms - first + 7) / 8 : 0;
}

std::size_t Panel::LaneOffset(int lane) const {
  std::size_t offset = 0;
  for (int l = 0; l < lane; ++l) offset += static_cast<std::size_t>(LaneTerms(l)) * shape.TermBytes();
  return offset;
}

const std::uint8_t* Panel::Data() const {
  const auto address = reinterpret_cast<std::uintptr_t>(bytes.data());
  return bytes.data() + ((64 - address % 64) % 64);
}
std::uint8_t* Panel::Data() {
  const auto address = reinterpret_cast<std::uintptr_t>(bytes.data());
  return bytes.data() + ((64 - address % 64) % 64);
}

void RepackRows(const WeightMatrix& W, int r0, int r1, Panel& panel) {
  const PanelShape shape = PanelShapeOf(W.type);
  if (shape.term_elements == 0 || !HasInt8(W)) {
    throw MakeError("RepackRows: no int8 panel for a ", GgmlTypeName(W.type), " matrix of ", W.cols,
                    " columns");
  }
  const int G = shape.term_elements;
  panel.shape = shape;
  panel.terms = W.cols / G;
  panel.groups = (r1 - r0 + kPanelRows - 1) / kPanelRows;
  panel.group_bytes = static_cast<std::size_t>(panel.terms) * shape.TermBytes();
  const std::size_t needed = Extent(panel.groups, panel.group_bytes) + 64;
  if (panel.bytes.size() < needed) panel.bytes.resize(needed);
  if ((r1 - r0) % kPanelRows != 0) {  // the last group's missing rows are zeros
    std::memset(panel.Group(panel.groups - 1), 0, panel.group_bytes);
  }
  thread_local std::vector<float> ws, wm;
  if (ws.size() < static_cast<std::size_t>(panel.terms)) {
    ws.resize(panel.terms);
    wm.resize(panel.terms);
  }
  std::size_t lane_offset[8];
  for (int lane = 0; lane < 8; ++lane) lane_offset[lane] = panel.LaneOffset(lane);
  const RepackRowFn repack = RepackRowFor(W.type);
  for (int r = r0; r < r1; ++r) {
    RowFactors(W.type, W.Row(r), W.cols, ws.data(), wm.data());
    repack(W.Row(r), panel, lane_offset, ws.data(), wm.data(), panel.Group((r - r0) / kPanelRows),
           (r - r0) % kPanelRows);
  }
}

void CheckGroupSums(const PanelShape& shape, const Int8Activations* xs, int m) {
  if (shape.term_elements == 32) return;
  for (int i = 0; i < m; ++i) {
    const std::size_t needed = Extent(Int8Activations::Blocks(xs[i].n), 32 / shape.term_elements);
    const std::size_t have = shape.term_elements == 16 ? xs[i].sum16.size() : xs[i].sum4.size();
    if (have < needed) {
      throw MakeError("int8 panels: x row ", i, " has ", have, " sums of ", shape.term_elements,
                      " elements where ", needed, " are needed (AddGroupSums)");
    }
  }
}

}  // namespace plumb::kernels::ggml
