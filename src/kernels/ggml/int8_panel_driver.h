// The walk every int8 panel kernel shares (int8_panel.h): repack the tile's rows, then for each block of up
// to Kernel::kX x rows and each 16-row group, the ISA's kernel runs the 8 lane chains into a buffer, and the
// lanes reduce to Y as the definition reduces them. Included by each ISA's panel file, whose Kernel is
//   template <int RX> static void Lanes(const PanelArgs& a, const std::uint8_t* group, int x0,
//                                       float* lanes, float* m_lanes)
// writing lanes[i][L][j] (and m_lanes, where the type has a minimum) for x rows x0 + i, i < RX, lane L and
// the group's row j, FinishLanes's signature as Finish (FinishLanes itself, or the same in vectors), and
// GroupCodesFor(type): RepackRows's group_codes for the type, or null for its row-by-row codes.
// Internal to src/kernels/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../simd/chunked_dot.h"
#include "int8_panel.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels::ggml {

inline constexpr int kPanelMaxX = 8;  // the most x rows a kernel takes per call (Kernel::kX)

struct PanelArgs {
  const Panel* panel;
  const Int8Activations* xs;
  std::size_t lane_offset[8];  // Panel::LaneOffset
  int lane_terms[8];           // Panel::LaneTerms
};

// Y[i][r] for rows r of one group (r0 its first, `rows` of them valid) from the lanes of x rows i < rx.
inline void FinishLanes(const PanelShape& shape, const float* lanes, const float* m_lanes, int rx, int rows,
                        float* Y, std::size_t ldy, int r0) {
  for (int i = 0; i < rx; ++i) {
    for (int j = 0; j < rows; ++j) {
      float lane[8], m_lane[8];
      for (int L = 0; L < 8; ++L) {
        lane[L] = lanes[(i * 8 + L) * kPanelRows + j];
        m_lane[L] = m_lanes[(i * 8 + L) * kPanelRows + j];
      }
      const float dot = ReduceLanes(lane);
      float y = dot;
      if (shape.min != PanelMin::kNone)
        y = shape.min_subtracts ? dot - ReduceLanes(m_lane) : dot + ReduceLanes(m_lane);
      Y[Extent(i, ldy) + r0 + j] = y;
    }
  }
}

// Kernel::Lanes<rx>, for rx in 1 .. RX.
template <class Kernel, int RX>
void LanesOf(int rx, const PanelArgs& a, const std::uint8_t* group, int x0, float* lanes, float* m_lanes) {
  if constexpr (RX > 1) {
    if (rx < RX) return LanesOf<Kernel, RX - 1>(rx, a, group, x0, lanes, m_lanes);
  }
  Kernel::template Lanes<RX>(a, group, x0, lanes, m_lanes);
}

// The x rows' group sums where the type's terms need them (AddGroupSums), or an Error.
void CheckGroupSums(const PanelShape& shape, const Int8Activations* xs, int m);

// An Int8GemmFn on panels: rows [row_begin, row_end) against x rows xs[0 .. m).
template <class Kernel>
void PanelGemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
               std::size_t ldy) {
  if (row_end <= row_begin || m <= 0) return;
  thread_local Panel panel;
  RepackRows(W, row_begin, row_end, panel, Kernel::GroupCodesFor(W.type));
  CheckGroupSums(panel.shape, xs, m);
  PanelArgs a{&panel, xs, {}, {}};
  for (int L = 0; L < 8; ++L) {
    a.lane_offset[L] = panel.LaneOffset(L);
    a.lane_terms[L] = panel.LaneTerms(L);
  }
  constexpr int kX = Kernel::kX;
  static_assert(kX <= kPanelMaxX);
  alignas(64) float lanes[kX * 8 * kPanelRows];
  alignas(64) float m_lanes[kX * 8 * kPanelRows] = {};
  for (int x0 = 0; x0 < m; x0 += kX) {
    const int rx = m - x0 < kX ? m - x0 : kX;
    for (int g = 0; g < panel.groups; ++g) {
      const std::uint8_t* group = panel.Group(g);
      LanesOf<Kernel, kX>(rx, a, group, x0, lanes, m_lanes);
      const int r0 = row_begin + g * kPanelRows;
      const int rows = row_end - r0 < kPanelRows ? row_end - r0 : kPanelRows;
      Kernel::Finish(panel.shape, lanes, m_lanes, rx, rows, Y + Extent(x0, ldy), ldy, r0);
    }
  }
}

}  // namespace plumb::kernels::ggml
