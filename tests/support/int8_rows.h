// The fast family's row-dot variants against their scalar definition (kernels/weight_format.h's
// int8_row_dots), as every *int8*_test checks them.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/weight_samples.h"

namespace plumb::testing {

// Switches the kernel family for its scope and restores the one before.
class FamilyGuard {
 public:
  explicit FamilyGuard(kernels::KernelFamily family) : previous_(kernels::ActiveFamily()) {
    kernels::SetFamily(family);
  }
  ~FamilyGuard() { kernels::SetFamily(previous_); }

 private:
  kernels::KernelFamily previous_;
};

// `variant` over rows [begin, W.rows) for begin = 0 and 1: the rows before begin untouched, every other row
// bitwise what `definition` gives it. `what` names the case in the failure message.
inline ::testing::AssertionResult RowsAreTheDefinitions(kernels::Int8RowDotsFn variant,
                                                        kernels::Int8RowDotsFn definition,
                                                        const WeightMatrix& W,
                                                        const kernels::Int8Activations& x,
                                                        const std::string& what) {
  constexpr float kUntouched = -7.0f;
  std::vector<float> expected(W.rows);
  definition(W, 0, W.rows, x, expected.data());
  for (int begin : {0, 1}) {
    if (begin >= W.rows) continue;
    std::vector<float> got(W.rows, kUntouched);
    variant(W, begin, W.rows, x, got.data());
    for (int r = 0; r < W.rows; ++r) {
      const std::string where = what + " row " + std::to_string(r) + " from " + std::to_string(begin);
      if (r < begin && !SameBits(got[r], kUntouched)) {
        return ::testing::AssertionFailure() << where << ": written, but outside the range";
      }
      if (r >= begin && !SameBits(got[r], expected[r])) {
        return ::testing::AssertionFailure() << where << ": " << got[r] << ", the definition " << expected[r];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// kernels::Gemv of W (whose format has int8 kernels for it) at 1, 2 and 3 threads: bitwise its int8 row dots
// in the fast family, bitwise its exact row dots in the exact one.
inline void ExpectGemvFollowsTheFamily(const WeightMatrix& W, const std::vector<float>& x) {
  kernels::Int8Activations q;
  kernels::QuantizeActivations(x.data(), W.cols, q);
  std::vector<float> fast(W.rows), exact(W.rows), y(W.rows);
  kernels::Int8RowDotsOf(W, 0, W.rows, q, fast.data());
  kernels::RowDotsOf(W, 0, W.rows, x.data(), exact.data());
  const int threads = kernels::NumThreads();
  for (int t : {1, 2, 3}) {
    kernels::SetNumThreads(t);
    for (kernels::KernelFamily family : {kernels::KernelFamily::kFast, kernels::KernelFamily::kExact}) {
      FamilyGuard guard(family);
      kernels::Gemv(W, x.data(), y.data());
      const std::vector<float>& want = family == kernels::KernelFamily::kFast ? fast : exact;
      for (int r = 0; r < W.rows; ++r)
        ASSERT_TRUE(SameBits(y[r], want[r]))
            << kernels::FamilyName(family) << ", threads " << t << " row " << r;
    }
  }
  kernels::SetNumThreads(threads);
}

}  // namespace plumb::testing
