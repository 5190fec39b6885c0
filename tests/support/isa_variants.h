// The kernel variants (kernels/row_dot.h's RowDotIsa) compiled for this target, for tests parametrised by
// variant: an x86-64 build has scalar, AVX2 and AVX-512, an aarch64 build scalar and NEON, so no test is
// instantiated for a variant the build cannot have. One this CPU cannot run (AVX-512 on most x86-64 laptops,
// AVX2 on an old one) says so: PLUMB_REQUIRE_ISA skips the test with the reason, or fails it when the
// environment variable CI is set, so that a CI machine without the instructions cannot pass silently.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "plumb/kernels/row_dot.h"

namespace plumb::testing {

inline constexpr kernels::RowDotIsa kIsasOfThisBuild[] = {
    kernels::RowDotIsa::kScalar,
#if defined(__x86_64__)
    kernels::RowDotIsa::kAvx2,
    kernels::RowDotIsa::kAvx512,
#endif
#if defined(__aarch64__)
    kernels::RowDotIsa::kNeon,
#endif
};

inline bool RunningInCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0';
}

}  // namespace plumb::testing

// In a test's body or SetUp: returns from it, skipped (or failed under CI) with the reason, unless this CPU
// and build can run `isa`.
#define PLUMB_REQUIRE_ISA(isa)                                                                          \
  do {                                                                                                  \
    if (!::plumb::kernels::RowDotIsaSupported(isa)) {                                                   \
      if (::plumb::testing::RunningInCi()) {                                                            \
        FAIL() << ::plumb::kernels::RowDotIsaName(isa)                                                  \
               << " is not available on this CPU or build, and CI is set: this machine cannot test it"; \
      }                                                                                                 \
      GTEST_SKIP() << ::plumb::kernels::RowDotIsaName(isa) << " is not available on this CPU or build"; \
    }                                                                                                   \
  } while (false)
