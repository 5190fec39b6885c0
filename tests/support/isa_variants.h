// The kernel variants (kernels/row_dot.h's RowDotIsa) compiled for this target, for tests parametrised by
// variant: an x86-64 build has scalar and AVX2, an aarch64 build scalar and NEON, so no test is instantiated
// for a variant the build cannot have. (One this CPU cannot run, AVX2 on an old x86-64, says so and skips.)
#pragma once

#include "plumb/kernels/row_dot.h"

namespace plumb::testing {

inline constexpr kernels::RowDotIsa kIsasOfThisBuild[] = {
    kernels::RowDotIsa::kScalar,
#if defined(__x86_64__)
    kernels::RowDotIsa::kAvx2,
#endif
#if defined(__aarch64__)
    kernels::RowDotIsa::kNeon,
#endif
};

}  // namespace plumb::testing
