// Which of OpenBLAS's kernels prefill's GEMMs run on (kernels::Gemm hands them to cblas_sgemm).
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels once, when it is loaded: from the CPU's model, or from
// the environment variable OPENBLAS_CORETYPE when that is set. The choice sets prefill's speed: on a Zen 5
// core the AVX2 ("Haswell") kernels run sgemm at half the rate of the AVX-512 ones ("SkylakeX",
// "Cooperlake") the library picks there by itself (docs/performance.md, "An AVX-512 host"), so plumb
// bench, explain and roofline name them beside the kernel family.
#pragma once

#include <string>

namespace plumb::kernels {

// "OpenBLAS 0.3.21, Cooperlake kernels", and " (set by OPENBLAS_CORETYPE)" when the variable chose them.
std::string BlasDescription();

}  // namespace plumb::kernels
