// The AVX-512 int8 panels' parts that both of its paths use, VNNI (int8_panel_avx512.cpp) and AMX
// (int8_panel_amx.cpp). Internal to src/kernels/; x86-64 only.
#pragma once

#include <cstddef>

#include "int8_panel.h"
#include "plumb/formats/ggml_types.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels::ggml::avx512 {

// RepackRows's group_codes for `type`: a group's 16 rows read by gathers (null for a type without panels).
GroupCodesFn GatheredGroupCodesFor(GgmlType type);

// int8_panel_driver.h's FinishLanes with a group's 16 rows in one register: the same tree, lane by lane.
void FinishLanes16(const PanelShape& shape, const float* lanes, const float* m_lanes, int rx, int rows,
                   float* Y, std::size_t ldy, int r0);

// The AMX path's kernel for `type` (int8_panel_amx.cpp): the G = 32 types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q4_K, Q5_K); null for the others, which stay on VNNI. Runs only where HasAmxInt8().
Int8GemmFn AmxPanelGemmFor(GgmlType type);

// The panel kernel of either path, for the tests: AMX (where it has one for the type) or VNNI. Null for a
// type without panels. The table takes AMX where HasAmxInt8() and PLUMB_AMX is not "0".
Int8GemmFn Int8PanelGemmPath(bool amx, GgmlType type);

}  // namespace plumb::kernels::ggml::avx512
