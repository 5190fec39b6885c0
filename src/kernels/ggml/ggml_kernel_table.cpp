// The GGUF format's [GgmlType][Isa] kernel table: built once from every ISA file's column, with the
// fallback resolved then (ggml_kernel_table.h).
#include "ggml_kernel_table.h"

#include <initializer_list>

#include "../isa_fallback.h"
#include "ggml_kernels.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/row_dot.h"

namespace plumb::kernels::ggml {
namespace {

// What each ISA file entered, before the fallback, and the resolved lookup.
struct Tables {
  GgmlKernelTable own, resolved;
};

Tables Build() {
  Tables t;
  scalar::FillKernels(t.own);
#if defined(__x86_64__)
  avx2::FillRowDots(t.own);
  avx2::FillDecodeRows(t.own);
  avx2::FillInt8(t.own);
  avx2::FillFma(t.own);
  avx2::FillInt8Panels(t.own);
  avx512::FillRowDots(t.own);
  avx512::FillInt8(t.own);
  avx512::FillInt8Panels(t.own);
#endif
#if defined(__aarch64__)
  neon::FillRowDots(t.own);
  neon::FillFma(t.own);
  neon::FillInt8(t.own);
  neon::FillInt8Panels(t.own);
#endif
  for (int id = 0; id < kGgmlTypeSlots; ++id) {
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kNeon, Isa::kAvx512}) {
      const auto type = static_cast<GgmlType>(id);
      t.resolved.At(type, isa) =
          WithFallback<GgmlKernels>(isa, [&](Isa at) -> const GgmlKernels& { return t.own.At(type, at); });
    }
  }
  return t;
}

const Tables& TheTables() {
  static const Tables tables = Build();
  return tables;
}

}  // namespace

namespace scalar {

void FillKernels(GgmlKernelTable& table) {
  for (int id = 0; id < kGgmlTypeSlots; ++id) {
    const auto type = static_cast<GgmlType>(id);
    GgmlKernels& k = table.At(type, Isa::kScalar);
    if (HasRowDot(type)) {
      k.row_dots = RowDots;
      k.decode_rows = DecodeRows;
    }
    if (HasInt8Type(type)) {
      k.int8_row_dots = Int8RowDots;
      k.int8_gemm = Int8GemmByRows<Int8RowDots>;
      k.int8_panel_gemm = Int8GemmByRowChunks<Int8RowDots>;  // the definition, where no ISA has panels
    }
    if (HasFmaType(type)) k.fma_row_dots = FmaRowDots;
  }
}

}  // namespace scalar

const GgmlKernels& GgmlKernelsFor(GgmlType type, Isa isa) {
  static const GgmlKernels kNone;
  if (static_cast<std::uint32_t>(type) >= static_cast<std::uint32_t>(kGgmlTypeSlots)) return kNone;
  return TheTables().resolved.At(type, isa);
}

bool HasVectorRowDots(GgmlType type) {
  if (static_cast<std::uint32_t>(type) >= static_cast<std::uint32_t>(kGgmlTypeSlots)) return false;
#if defined(__x86_64__)
  return TheTables().own.At(type, Isa::kAvx2).row_dots != nullptr;
#elif defined(__aarch64__)
  return TheTables().own.At(type, Isa::kNeon).row_dots != nullptr;
#else
  return false;
#endif
}

}  // namespace plumb::kernels::ggml
