// Prefill's int8 GEMM for the GGUF types (internal to src/kernels/): rows repacked, per call, into panels of
// 16 interleaved rows that a vector kernel multiplies with many x rows at once, each (x row, weight row)
// pair bitwise ggml_int8.cpp's definition, the same bits as the row dots of decode. docs/formats.md
// "Int8 panels" has the layout; docs/performance.md "Prefill on int8 panels" why it is built this way.
//
// The definition, restated as terms. ggml_int8.cpp sums each row's codes against x in terms of G elements
// (G = 32 for Q4_0 .. Q8_0, Q4_K and Q5_K; 16 for Q3_K and Q6_K; 4 for Q2_K) and adds term τ, with its own
// float factor, into one of 8 float lanes. Every lane L takes the terms τ = τ0(L) + 8k, k = 0, 1, ..., in
// ascending order (PanelShape::FirstTerm), so a lane is a chain of its own: a kernel may run the 8 chains one
// after the other, and each chain's terms are stored one after the other in the panel. Per term:
//   s    = Σ u_e · q_x[e] − o · Σ q_x[e] over its G elements e   (u the stored code, 0..255, o the type's
//          offset: u − o is the definition's w; exact in int32 either way)
//   lane = fma(ws · d_x[b], float(s), lane)                    (b = the term's x block; ws the weight's
//   factor) and where the type has a minimum (PanelMin):
//     kBlockSum:  m_lane = fma(wm, s_x[b], m_lane)             (Q4_1, Q5_1; Q4_K, Q5_K with wm = dmin·min)
//     kTermSum:   m_lane = fma(wm · d_x[b], float(σ), m_lane)   (Q2_K; σ = Σ q_x over the term)
//   y    = tree(lane), + tree(m_lane) (Q4_1, Q5_1) or − tree(m_lane) (the K-quants with a minimum).
// ws and wm are the definition's own products (d, d·scale, dmin·min, each exact in float), so every float
// operation is the definition's, in its order, and the kernels are bitwise scalar::Int8RowDots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plumb/formats/ggml_types.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels::ggml {

enum class PanelMin { kNone, kBlockSum, kTermSum };

// How one GGUF type's rows become panel terms. term_elements 0: not a type the panels cover.
struct PanelShape {
  int term_elements = 0;  // G
  int offset = 0;         // o: the stored code u is w + o, in 0..255
  PanelMin min = PanelMin::kNone;
  bool min_subtracts = false;  // y = tree(lane) − tree(m_lane), else +

  // The first term of lane L (the next ones follow 8 terms apart): lane L is term L's for G = 32 (block
  // b mod 8) and G = 4 (Q2_K's group of 4 within its block); for G = 16, x block b's half h goes to lane
  // (b mod 4) + 4h, so lane L starts at block L mod 4's half L / 4.
  int FirstTerm(int lane) const { return term_elements == 16 ? 2 * (lane % 4) + lane / 4 : lane; }
  // Codes of term τ for 16 rows, then ws[16] and, with a minimum, wm[16] (floats).
  std::size_t TermBytes() const {
    return std::size_t{16} * static_cast<std::size_t>(term_elements) + (min == PanelMin::kNone ? 64 : 128);
  }
};

PanelShape PanelShapeOf(GgmlType type);
bool HasPanel(GgmlType type);

inline constexpr int kPanelRows = 16;  // rows interleaved in one group

// A tile of up to `groups` groups of kPanelRows rows, each group every term of its rows in lane order
// (lane 0's terms, then lane 1's, ...). A term's codes are its G / 4 chunks of 4 elements, each chunk the 16
// rows' 4 bytes in row order (64 bytes: one 512-bit register, two 256-bit ones, four NEON ones). Rows past
// the matrix are zeros.
struct Panel {
  PanelShape shape;
  int terms = 0;  // per row: cols / G
  int groups = 0;
  std::size_t group_bytes = 0;
  std::vector<std::uint8_t> bytes;  // [groups][group_bytes], 64-byte aligned in use (Data())

  const std::uint8_t* Group(int g) const { return Data() + static_cast<std::size_t>(g) * group_bytes; }
  std::uint8_t* Group(int g) { return Data() + static_cast<std::size_t>(g) * group_bytes; }
  // The first term of lane L in a group, at this offset from the group's start.
  std::size_t LaneOffset(int lane) const;
  // Terms in lane L: τ0(L) + 8k < terms.
  int LaneTerms(int lane) const;

  const std::uint8_t* Data() const;
  std::uint8_t* Data();
};

// An ISA's way to write the codes of one whole group: the 16 rows from r0 at `group`, as RepackRows writes
// them row by row (Panel::LaneOffset's offsets in lane_offset).
using GroupCodesFn = void (*)(const WeightMatrix& W, int r0, const Panel& panel,
                              const std::size_t* lane_offset, std::uint8_t* group);

// Rows [r0, r1) of W (any count: the groups follow from it) into `panel`, grown as needed, never shrunk,
// the codes of whole groups by group_codes where given. W's type must have a panel and W.cols be whole
// blocks (HasInt8); throws plumb::Error otherwise.
void RepackRows(const WeightMatrix& W, int r0, int r1, Panel& panel, GroupCodesFn group_codes = nullptr);

// Σ q_x over term τ of x, the sums a term takes its offset off with (and Q2_K's σ): Int8Activations::sum
// for G = 32, sum16 and sum4 (AddGroupSums, which the panels' callers run) for 16 and 4.
inline std::int32_t TermSum(const Int8Activations& x, int term_elements, int tau) {
  if (term_elements == 32) return x.sum[static_cast<std::size_t>(tau)];
  return term_elements == 16 ? x.sum16[static_cast<std::size_t>(tau)] : x.sum4[static_cast<std::size_t>(tau)];
}

}  // namespace plumb::kernels::ggml
