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

// One row's 32 bits as the Word of int8_panel_codes_body.h.
struct RowWord {
  using Word = std::uint32_t;
  static Word Load(const std::uint8_t* p) { return ReadU32(p); }
  static void Store(std::uint8_t* p, Word w) { std::memcpy(p, &w, 4); }
  static Word Set(std::uint32_t v) { return v; }
  static Word Shr(Word x, int n) { return x >> n; }
  static Word Shl(Word x, int n) { return x << n; }
  static Word And(Word x, Word y) { return x & y; }
  static Word Or(Word x, Word y) { return x | y; }
  static Word Xor(Word x, Word y) { return x ^ y; }
  static Word Add(Word x, Word y) { return x + y; }
  static Word Mul(Word x, Word y) { return x * y; }
};

#define PLUMB_BODY_TARGET
#include "int8_panel_codes_body.h"
#undef PLUMB_BODY_TARGET

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

// Row j of a group: every term's factors at their places (int8_panel.h's layout).
void RowFactorsAt(const Panel& panel, const std::size_t* lane_offset, const float* ws, const float* wm,
                  std::uint8_t* group, int j) {
  const PanelShape& shape = panel.shape;
  const std::size_t term_bytes = shape.TermBytes();
  const std::size_t factors = std::size_t{16} * static_cast<std::size_t>(shape.term_elements);
  for (int lane = 0; lane < 8; ++lane) {
    std::uint8_t* term = group + lane_offset[lane];
    for (int tau = shape.FirstTerm(lane); tau < panel.terms; tau += 8, term += term_bytes) {
      std::memcpy(term + factors + 4 * j, &ws[tau], 4);
      if (shape.min != PanelMin::kNone) std::memcpy(term + factors + 64 + 4 * j, &wm[tau], 4);
    }
  }
}

using RowCodesFn = void (*)(const std::uint8_t* row, const Panel& panel, const std::size_t* lane_offset,
                            std::uint8_t* group, int j);

template <GgmlType T>
void RowCodes(const std::uint8_t* row, const Panel& panel, const std::size_t* lane_offset,
              std::uint8_t* group, int j) {
  GroupCodes<T>(RowWord{}, row, panel, lane_offset, group, 4 * j);
}

RowCodesFn RowCodesFor(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return RowCodes<GgmlType::Q4_0>;
    case GgmlType::Q4_1:
      return RowCodes<GgmlType::Q4_1>;
    case GgmlType::Q5_0:
      return RowCodes<GgmlType::Q5_0>;
    case GgmlType::Q5_1:
      return RowCodes<GgmlType::Q5_1>;
    case GgmlType::Q8_0:
      return RowCodes<GgmlType::Q8_0>;
    case GgmlType::Q2_K:
      return RowCodes<GgmlType::Q2_K>;
    case GgmlType::Q3_K:
      return RowCodes<GgmlType::Q3_K>;
    case GgmlType::Q4_K:
      return RowCodes<GgmlType::Q4_K>;
    case GgmlType::Q5_K:
      return RowCodes<GgmlType::Q5_K>;
    case GgmlType::Q6_K:
      return RowCodes<GgmlType::Q6_K>;
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

void RepackRows(const WeightMatrix& W, int r0, int r1, Panel& panel, GroupCodesFn group_codes) {
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
  const RowCodesFn row_codes = RowCodesFor(W.type);
  for (int r = r0; r < r1; ++r) {
    std::uint8_t* group = panel.Group((r - r0) / kPanelRows);
    const int j = (r - r0) % kPanelRows;
    RowFactors(W.type, W.Row(r), W.cols, ws.data(), wm.data());
    RowFactorsAt(panel, lane_offset, ws.data(), wm.data(), group, j);
    const bool whole_group = r0 + (r - r0) / kPanelRows * kPanelRows + kPanelRows <= r1;
    if (group_codes != nullptr && whole_group) {
      if (j == 0) group_codes(W, r, panel, lane_offset, group);
    } else {
      row_codes(W.Row(r), panel, lane_offset, group, j);
    }
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
