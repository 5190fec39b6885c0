// The GGUF format's kernels in one table, [GgmlType][Isa], in the spirit of ggml's type traits (internal to
// src/kernels/; docs/architecture.md "Weight formats"). WeightFormat × Isa (kernels/weight_format.h) is the
// table across formats; inside the GGUF format the type picks the kernel, and this table is where it does,
// once per purpose: each ISA file fills its column with the one kernel per type it has (its Fill* function
// below), and no kernel switches on the type it was given. "Has a vector kernel" is a lookup
// (HasVectorRowDots), not a second list.
//
// The table is built once, at its first use. A null entry means "not written for this (type, ISA)", and the
// lookup (GgmlKernelsFor) gives the next ISA down's instead, as KernelsFor does across formats (avx512 →
// avx2 → scalar, neon → scalar); the scalar column is the definitions, which serve every type they cover.
// A column's entries depend on what the code has, never on the CPU, except where a feature beyond the ISA
// level picks the kernel: AVX-512's int8 dots are entered only where the CPU has VNNI (HasAvx512Vnni), so
// a CPU without it gets AVX2's by the fallback. Whether the CPU can run a column at all is the caller's
// check (IsaSupported; ActiveIsa never names one it cannot).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "plumb/formats/ggml_types.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels::ggml {

// kernels/row_dot.h's RowDots over raw rows: y[r] for the row at rows + r·row_stride, r in [0, n_rows), n
// elements each. The type is passed for the scalar definition, one function for every type; the vector
// kernels, one per type, ignore it (OneTypeRowDots).
using GgmlRowDotsFn = void (*)(GgmlType type, const std::uint8_t* rows, std::size_t row_stride,
                               std::int64_t n_rows, const float* x, std::int64_t n, float* y);

// One type's kernels on one ISA. Null: none written for it.
struct GgmlKernels {
  GgmlRowDotsFn row_dots = nullptr;    // the exact family (row_dot.h's definition)
  DecodeRowsFn decode_rows = nullptr;  // rows decoded exactly (DequantizeRow), for the batched GEMMs' tiles
  Int8RowDotsFn int8_row_dots = nullptr;  // the fast family (ggml_int8.cpp's definition): HasInt8's types
  Int8GemmFn int8_gemm = nullptr;         // the same for several x rows (weight_format.h's int8_gemm)
  Int8GemmFn int8_panel_gemm = nullptr;   // the same for many x rows, on repacked panels (int8_panel.h)
  RowDotsFn fma_row_dots = nullptr;       // the fast family's float rows (float_fma.cpp): F32, F16, BF16
};

// One more than the largest GgmlType id (MXFP4, 39): the table's rows, indexed by the id.
inline constexpr int kGgmlTypeSlots = 40;

struct GgmlKernelTable {
  std::array<std::array<GgmlKernels, kIsaCount>, kGgmlTypeSlots> entries{};  // [type id][isa]

  GgmlKernels& At(GgmlType type, Isa isa) {
    return entries[static_cast<std::size_t>(type)][static_cast<std::size_t>(isa)];
  }
  const GgmlKernels& At(GgmlType type, Isa isa) const {
    return entries[static_cast<std::size_t>(type)][static_cast<std::size_t>(isa)];
  }
};

// The kernels `type` runs with on `isa`: each member the ISA's own, or the next ISA down's that has it;
// int8_gemm no lower than the ISA int8_row_dots comes from (KernelsFor's rule). A member no ISA down to
// scalar has stays null (a type without that kernel: callers check HasRowDot, HasInt8, HasFma first); so
// does every member for a type id outside the table.
const GgmlKernels& GgmlKernelsFor(GgmlType type, Isa isa);

// Whether `type`'s exact row dots are vector code of this build's own: its entry in the base vector column
// (AVX2 on x86-64, which AVX-512 builds on; NEON on aarch64), never a fallback to the definition. A column is
// filled whatever the CPU, so the answer depends on the type and the build only. False on a build with no
// vector ISA.
bool HasVectorRowDots(GgmlType type);

// A per-type raw-row kernel as the table's row_dots (which passes the type for the definition's sake).
template <void (*kRun)(const std::uint8_t*, std::size_t, std::int64_t, const float*, std::int64_t, float*)>
void OneTypeRowDots(GgmlType, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
                    const float* x, std::int64_t n, float* y) {
  kRun(rows, row_stride, n_rows, x, n, y);
}

// The columns, each filled by the file that has its kernels.
namespace scalar {
// The definitions, for every type each covers (ggml_kernel_table.cpp, with row_dot.cpp's and
// ggml_int8.cpp's functions).
void FillKernels(GgmlKernelTable& table);
// row_dot.h's definition over raw rows, any type HasRowDot accepts (row_dot.cpp; arguments checked by the
// caller).
void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y);
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {
void FillRowDots(GgmlKernelTable& table);     // row_dot_avx2.cpp: F32, F16, BF16, Q4_0, Q4_1, Q8_0
void FillDecodeRows(GgmlKernelTable& table);  // ggml_decode_avx2.cpp: Q4_0, Q4_1, Q8_0, F16, BF16
void FillInt8(GgmlKernelTable& table);        // ggml_int8_avx2.cpp: every type HasInt8 accepts
void FillFma(GgmlKernelTable& table);         // float_fma_x86.cpp: F32, F16, BF16
void FillInt8Panels(GgmlKernelTable& table);  // int8_panel_avx2.cpp: every type HasInt8 accepts
}  // namespace avx2
namespace avx512 {
void FillRowDots(GgmlKernelTable& table);     // row_dot_avx512.cpp: Q4_0, Q4_1, Q8_0 (the rest are AVX2's)
void FillInt8(GgmlKernelTable& table);        // ggml_int8_avx512.cpp: HasInt8's types, where HasAvx512Vnni()
void FillInt8Panels(GgmlKernelTable& table);  // int8_panel_avx512.cpp: the same types, where HasAvx512Vnni()
}  // namespace avx512
#endif
#if defined(__aarch64__)
namespace neon {
void FillRowDots(GgmlKernelTable& table);  // row_dot_neon.cpp: F32, F16, BF16, Q4_0, Q4_1, Q8_0
void FillFma(GgmlKernelTable& table);      // float_fma_neon.cpp: F32, F16, BF16
// ggml_int8_neon.cpp: HasInt8's types, each its own kernel, with sdot where the CPU has dotprod (checked
// once, when the table is built).
void FillInt8(GgmlKernelTable& table);
// int8_panel_neon.cpp: HasInt8's types, with sdot where the CPU has dotprod.
void FillInt8Panels(GgmlKernelTable& table);
// The panel kernel of either path, for the tests (null for a type without panels).
Int8GemmFn Int8PanelGemmPath(bool sdot, GgmlType type);
}  // namespace neon
#endif

}  // namespace plumb::kernels::ggml
