// The float weight formats' awkward cases (F32, F16, BF16 with any bits, FP8 with its special codes and odd
// addresses) and an x with signed zeros, subnormals and large values: what the fast family's FMA kernels are
// tested on (tests/kernels/fma_dot_test.cpp, fma_family_test.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plumb/kernels/weight_matrix.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb::testing {

// An F16 or BF16 matrix of random bits, infinities, NaNs, subnormals and −0 included.
inline WeightMatrix AnyBits16(GgmlType type, int rows, int cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows) * cols * 2);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  return WeightMatrix::FromBytes(type, rows, cols, std::move(bytes));
}

// Every float format and its awkward cases, as (name, matrix) at a given shape.
struct FloatCase {
  std::string name;
  WeightMatrix W;
};
inline std::vector<FloatCase> Cases(int rows, int cols, std::uint32_t seed) {
  std::vector<FloatCase> cases;
  cases.push_back({"F32", RandomGgml(GgmlType::F32, rows, cols, seed)});
  cases.push_back({"F16", RandomGgml(GgmlType::F16, rows, cols, seed + 1)});
  cases.push_back({"BF16", RandomGgml(GgmlType::BF16, rows, cols, seed + 2)});
  cases.push_back({"F16 any bits", AnyBits16(GgmlType::F16, rows, cols, seed + 3)});
  cases.push_back({"BF16 any bits", AnyBits16(GgmlType::BF16, rows, cols, seed + 4)});
  cases.push_back({"E4M3 per row", RandomFp8(Fp8Format::kE4M3, rows, cols, true, seed + 5)});
  cases.push_back({"E5M2 per tensor", RandomFp8(Fp8Format::kE5M2, rows, cols, false, seed + 6)});
  cases.push_back(
      {"E4M3 specials, odd address", RandomFp8(Fp8Format::kE4M3, rows, cols, false, seed + 7, true, 1)});
  cases.push_back(
      {"E5M2 specials, odd address", RandomFp8(Fp8Format::kE5M2, rows, cols, true, seed + 8, true, 3)});
  return cases;
}

// x with signed zeros, subnormals, large values and a value whose products overflow against large weights.
inline std::vector<float> AwkwardX(int n, std::uint32_t seed) {
  std::vector<float> x = RandomVector(n, seed);
  for (int i = 0; i < n; i += 5) x[i] = (i / 5) % 2 == 0 ? 0.0f : -0.0f;
  for (int i = 3; i < n; i += 11) x[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i);
  for (int i = 7; i < n; i += 13) x[i] = 3.0e4f;
  return x;
}

// x with one element past 2^120, so that 2^8·x would not be exact: the FP8 E4M3 kernels that fold 2^8 into x
// must take their other road for it.
inline std::vector<float> HugeX(int n, std::uint32_t seed) {
  std::vector<float> x = RandomVector(n, seed);
  x[n / 2] = 0x1p121f;
  return x;
}

}  // namespace plumb::testing
