// The kernel variants (kernels/isa.h's Isa) compiled for this target, for tests parametrised by
// variant: an x86-64 build has scalar, AVX2 and AVX-512, an aarch64 build scalar and NEON, so no test is
// instantiated for a variant the build cannot have. One this CPU cannot run (AVX-512 on most x86-64 laptops,
// AVX2 on an old one) is skipped with the reason, never failed because of the host: scripts/test's summary
// lists every variant it tested and every one it skipped with that reason (docs/architecture.md, "ISA
// variants"), so a host that lacks one cannot pass silently either.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <type_traits>

#include "plumb/kernels/isa.h"

namespace plumb::testing {

inline constexpr kernels::Isa kIsasOfThisBuild[] = {
    kernels::Isa::kScalar,
#if defined(__x86_64__)
    kernels::Isa::kAvx2,
    kernels::Isa::kAvx512,
#endif
#if defined(__aarch64__)
    kernels::Isa::kNeon,
#endif
};

}  // namespace plumb::testing

// In a test's body or SetUp: returns from it, skipped with the reason ("avx512: CPU lacks avx512bw,
// avx512vl"), unless this CPU and build can run `isa`. scripts/test's summary reads that line.
#define PLUMB_REQUIRE_ISA(isa)                                                                         \
  do {                                                                                                 \
    if (const std::string plumb_missing = ::plumb::kernels::IsaMissing(isa); !plumb_missing.empty()) { \
      GTEST_SKIP() << ::plumb::kernels::IsaName(isa) << ": " << plumb_missing;                         \
    }                                                                                                  \
  } while (false)

namespace plumb::testing {

// Base of a test parametrised by variant (Param = Isa, or a tuple whose first element is the Isa): each test
// runs with that variant active, or is skipped with the reason when this CPU cannot run it; the variant
// before it is restored afterwards.
template <class Param = kernels::Isa>
class IsaTest : public ::testing::TestWithParam<Param> {
 protected:
  kernels::Isa isa() const {
    if constexpr (std::is_same_v<Param, kernels::Isa>) {
      return this->GetParam();
    } else {
      return std::get<0>(this->GetParam());
    }
  }
  void SetUp() override {
    PLUMB_REQUIRE_ISA(isa());
    previous_ = kernels::ActiveIsa();
    kernels::SetIsa(isa());
    switched_ = true;
  }
  void TearDown() override {
    if (switched_) kernels::SetIsa(previous_);
  }

 private:
  kernels::Isa previous_ = kernels::Isa::kScalar;
  bool switched_ = false;
};

}  // namespace plumb::testing
