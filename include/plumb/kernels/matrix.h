// MatrixF32: a weight matrix as the kernels see it.
//
// A Linear layer y = W·x stores W as [rows = out_features][cols = in_features], row-major, exactly as
// Hugging Face checkpoints do. Model code passes these to kernels::Gemv / kernels::Gemm and never touches
// the layout itself, so that packed formats (FP16, FP8, INT4, GGUF blocks) can later replace it without
// changing model/.
#pragma once

#include <cstddef>
#include <vector>

#include "plumb/core/extent.h"

namespace plumb {

struct MatrixF32 {
  int rows = 0;               // out_features
  int cols = 0;               // in_features
  std::vector<float> values;  // [rows][cols]

  const float* Row(int r) const { return values.data() + Extent(r, cols); }
  std::size_t Bytes() const { return values.size() * sizeof(float); }
};

}  // namespace plumb
