// scalar::Dot (kernels/scalar.h) of a stored row and x, the row decoded a chunk at a time into a buffer on
// the stack: how every weight format's scalar definition computes its row dots without decoding the row
// into memory. Internal to src/kernels/.
#pragma once

#include <algorithm>
#include <cstdint>

namespace plumb::kernels {

// scalar::Dot's reduction tree over its eight lanes.
inline float ReduceLanes(const float* lane) {
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

// Elements decoded at a time: a multiple of 8 (each chunk starts in lane 0, so element i lands in lane
// i mod 8 as scalar::Dot puts it), of every GGUF block size (1, 32, 256) and of every INT4 group size
// (32, 64, 128: a chunk is whole groups, starting at an even group); 1 KiB of stack.
constexpr std::int64_t kDecodeChunk = 256;

// Σ w[i]·x[i] over n elements in scalar::Dot's order, where decode(begin, count, out) writes the row's
// elements [begin, begin + count) to out (count ≤ kDecodeChunk; begin a multiple of kDecodeChunk).
template <class Decode>
float ChunkedDot(std::int64_t n, const float* x, Decode decode) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float w[kDecodeChunk];
  for (std::int64_t begin = 0; begin < n; begin += kDecodeChunk) {
    const std::int64_t count = std::min(kDecodeChunk, n - begin);
    decode(begin, count, w);
    for (std::int64_t i = 0; i < count; ++i) lane[i % 8] += w[i] * x[begin + i];
  }
  return ReduceLanes(lane);
}

}  // namespace plumb::kernels
