// The fast family's dot product for float weight formats (F32, F16, BF16, FP8; kernels/weight_format.h's
// fma_row_dots), and its definition in plain C++. Internal to src/kernels/.
//
// Definition. FmaDot(w, x, n), w the row's weights decoded exactly (docs/formats.md: F16, BF16 and FP8 values
// are all exact in FP32), x in FP32:
//   - both vectors are taken as zero-padded to a multiple of 32 elements;
//   - 32 lanes, each starting at +0: element i goes to lane i mod 32, in ascending i,
//     lane = fma(w[i], x[i], lane) (one rounding per element, IEEE fusedMultiplyAdd);
//   - the lanes are summed by halving: for h = 16, 8, 4, 2, 1: lane[j] = lane[j] + lane[j + h] for j < h;
//     the result is lane[0].
// Why this shape: 32 lanes are two AVX-512 registers, four AVX2 ones or eight NEON ones, so every ISA holds
// the same lanes with enough independent chains to hide the FMA latency, and the halving reduction is the
// one each of them does naturally (upper half onto lower half). The zero padding makes a row's tail the same
// vector step on every ISA: a padded element adds fma(0, 0, lane) = lane + 0 to its lane, which is not always
// a no-op (−0 + 0 = +0), so it is part of the definition rather than left to each variant.
// A format with a row scale (FP8's) multiplies the finished dot by it, one rounded multiply, as the exact
// family does.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace plumb::kernels {

constexpr int kFmaLanes = 32;

// lane[0] after the definition's halving reduction of lane[0 .. 32) (which it overwrites).
inline float ReduceFmaLanes(float* lane) {
  for (int h = kFmaLanes / 2; h >= 1; h /= 2) {
    for (int j = 0; j < h; ++j) lane[j] = lane[j] + lane[j + h];
  }
  return lane[0];
}

// The definition, for a row decoded a chunk at a time: decode(begin, count, out) writes the row's elements
// [begin, begin + count) to out (count ≤ kChunk; begin a multiple of kChunk, itself a multiple of 32, so a
// chunk's element t lands in lane t mod 32).
template <class Decode>
float FmaChunkedDot(std::int64_t n, const float* x, Decode decode) {
  constexpr std::int64_t kChunk = 256;
  float lane[kFmaLanes] = {};
  float w[kChunk];
  for (std::int64_t begin = 0; begin < n; begin += kChunk) {
    const std::int64_t count = std::min(kChunk, n - begin);
    decode(begin, count, w);
    const std::int64_t padded = (count + kFmaLanes - 1) / kFmaLanes * kFmaLanes;
    for (std::int64_t i = 0; i < padded; ++i) {
      const float wi = i < count ? w[i] : 0.0f;
      const float xi = i < count ? x[begin + i] : 0.0f;
      lane[i % kFmaLanes] = std::fma(wi, xi, lane[i % kFmaLanes]);
    }
  }
  return ReduceFmaLanes(lane);
}

}  // namespace plumb::kernels
