// The fast family's float kernels as Gemv and GemvBatch choose them (kernels/kernels.h): the FMA kernels
// (fma_dot_test.cpp checks their bits) in the fast family, the exact ones in the exact family and for a
// matrix marked exact_only, at any thread count, and GemvBatch's rows each bitwise their Gemv.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "plumb/kernels/kernels.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/float_cases.h"
#include "support/int8_rows.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using kernels::KernelFamily;
using testing::Cases;
using testing::FamilyGuard;
using testing::FloatCase;
using testing::RandomVector;
using testing::SameBits;

// Gemv at 1, 2 and 3 threads: the FMA kernels in the fast family, the exact ones in the exact family and for
// a matrix marked exact_only; GemvBatch row by row the same as Gemv in both families.
TEST(FmaFamily, GemvAndGemvBatchFollowTheFamily) {
  const int threads = kernels::NumThreads();
  for (FloatCase& c : Cases(37, 333, 900)) {
    const std::vector<float> x = RandomVector(333, 901);
    std::vector<float> fma(c.W.rows), exact(c.W.rows), y(c.W.rows);
    kernels::FmaRowDotsOf(c.W, 0, c.W.rows, x.data(), fma.data());
    kernels::RowDotsOf(c.W, 0, c.W.rows, x.data(), exact.data());
    for (int t : {1, 2, 3}) {
      kernels::SetNumThreads(t);
      for (KernelFamily family : {KernelFamily::kFast, KernelFamily::kExact}) {
        FamilyGuard guard(family);
        for (bool exact_only : {false, true}) {
          c.W.exact_only = exact_only;
          kernels::Gemv(c.W, x.data(), y.data());
          const bool fast = family == KernelFamily::kFast && !exact_only;
          EXPECT_EQ(kernels::UsesFmaRowDots(c.W), fast);
          for (int r = 0; r < c.W.rows; ++r) {
            ASSERT_TRUE(SameBits(y[r], fast ? fma[r] : exact[r]))
                << c.name << ", " << kernels::FamilyName(family) << (exact_only ? " exact_only" : "")
                << ", threads " << t << ", row " << r;
          }
        }
        c.W.exact_only = false;
        // Three rows of X, the middle one x: its row of the batch is Gemv's bits.
        std::vector<float> X = RandomVector(3 * 333, 902);
        std::copy(x.begin(), x.end(), X.begin() + 333);
        std::vector<float> Y(3 * static_cast<std::size_t>(c.W.rows));
        kernels::GemvBatch(c.W, X.data(), 3, Y.data());
        const std::vector<float>& want = family == KernelFamily::kFast ? fma : exact;
        for (int r = 0; r < c.W.rows; ++r) {
          ASSERT_TRUE(SameBits(Y[c.W.rows + r], want[r]))
              << c.name << ", GemvBatch, " << kernels::FamilyName(family) << ", threads " << t << ", row "
              << r;
        }
      }
    }
  }
  kernels::SetNumThreads(threads);
}

}  // namespace
}  // namespace plumb
