// The fast family's packed-INT4 row dots on NEON (src/kernels/int4/int4_int8_neon.cpp) against their scalar
// definition, bit for bit: the sdot path (where this CPU has dotprod), the plain-NEON path, and what the
// format registers for NEON, for every scheme and group size on awkward shapes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../src/kernels/ggml/ggml_kernels.h"
#include "../../src/kernels/int4/int4_kernels.h"
#include "../../src/kernels/int8_activations/int8_sums_neon.h"
#include "plumb/formats/int4.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/int8_rows.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using kernels::Int8Activations;
using kernels::Isa;
using PathFn = void (*)(const WeightMatrix&, int, int, const Int8Activations&, float*);

void ExpectBitwiseTheDefinition(PathFn path, const char* name) {
  const kernels::Int8RowDotsFn definition =
      kernels::kInt4Format.kernels[static_cast<int>(Isa::kScalar)].int8_row_dots;
  for (Int4Scheme scheme :
       {Int4Scheme::kSymmetric, Int4Scheme::kAsymmetric, Int4Scheme::kAsymmetricF16Zero}) {
    for (int G : {32, 64, 128}) {
      for (int rows : {1, 5, 11}) {
        for (int cols : {32, 96, 224, 608}) {
          // Codes and zero points one byte off alignment; x with ±127 codes and a zero block.
          const WeightMatrix W = testing::RandomInt4({scheme, G}, rows, cols, 7u * cols + rows + G, 1);
          std::vector<float> x = testing::RandomVector(cols, 5u * cols + rows, 4.0f);
          x[0] = 8.0f;
          x[1] = -8.0f;
          if (cols >= 96) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
          Int8Activations q;
          kernels::QuantizeActivations(x.data(), cols, q);
          ASSERT_TRUE(testing::RowsAreTheDefinitions(path, definition, W, q,
                                                     std::string(name) + " " + W.format->describe(W) + " " +
                                                         std::to_string(rows) + "x" + std::to_string(cols)));
        }
      }
    }
  }
}

TEST(Int4Int8RowDotsNeon, SdotIsBitwiseTheDefinition) {
  if (!kernels::int8_sums::HasDotprod()) GTEST_SKIP() << "this CPU has no dotprod: the sdot path cannot run";
  ExpectBitwiseTheDefinition(
      [](const WeightMatrix& W, int begin, int end, const Int8Activations& x, float* y) {
        kernels::int4::neon::Int8RowDotsPath(true, W, begin, end, x, y);
      },
      "sdot");
}

TEST(Int4Int8RowDotsNeon, PlainNeonIsBitwiseTheDefinition) {
  ExpectBitwiseTheDefinition(
      [](const WeightMatrix& W, int begin, int end, const Int8Activations& x, float* y) {
        kernels::int4::neon::Int8RowDotsPath(false, W, begin, end, x, y);
      },
      "plain");
}

TEST(Int4Int8RowDotsNeon, IsRegistered) {
  EXPECT_EQ(kernels::KernelsFor(kernels::kInt4Format, Isa::kNeon).int8_row_dots,
            &kernels::int4::neon::Int8RowDots);
  ExpectBitwiseTheDefinition(kernels::int4::neon::Int8RowDots, "dispatched");
}

}  // namespace
}  // namespace plumb
