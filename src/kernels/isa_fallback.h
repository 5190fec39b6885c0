// The fallback between ISA variants (internal to src/kernels/): one rule for the formats' table
// (weight_format.cpp, KernelsFor) and the GGUF types' (ggml/ggml_kernel_table.cpp, GgmlKernelsFor).
#pragma once

#include "plumb/kernels/isa.h"

namespace plumb::kernels {

// The ISA whose kernels stand in for a missing one: AVX-512 builds on AVX2, everything on the definition.
inline Isa NextDown(Isa isa) {
  return isa == Isa::kAvx512 ? Isa::kAvx2 : Isa::kScalar;
}

// `isa`'s kernel set with each missing member taken from the nearest ISA down that has it, where own(at) is
// what ISA `at` itself has. int8_gemm is the one of the first ISA down with either int8 kernel (null there:
// none), so it never comes from below the ISA int8_row_dots comes from.
template <class Kernels, class Own>
Kernels WithFallback(Isa isa, const Own& own) {
  const auto pick = [&](auto Kernels::*member) {
    for (Isa at = isa;; at = NextDown(at)) {
      const auto fn = own(at).*member;
      if (fn != nullptr || at == Isa::kScalar) return fn;
    }
  };
  Kernels k;
  k.row_dots = pick(&Kernels::row_dots);
  k.decode_rows = pick(&Kernels::decode_rows);
  k.int8_row_dots = pick(&Kernels::int8_row_dots);
  k.fma_row_dots = pick(&Kernels::fma_row_dots);
  k.int8_panel_gemm = pick(&Kernels::int8_panel_gemm);
  for (Isa at = isa;; at = NextDown(at)) {
    const Kernels& at_own = own(at);
    if (at_own.int8_gemm != nullptr || at_own.int8_row_dots != nullptr || at == Isa::kScalar) {
      k.int8_gemm = at_own.int8_gemm;
      break;
    }
  }
  return k;
}

}  // namespace plumb::kernels
