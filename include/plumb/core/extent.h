// Element counts and offsets from the int dimensions shapes are given in (rows, cols, heads, head_dim):
// their product taken in std::size_t, so that rows × cols cannot overflow int and an offset reads as the math
// (X + Extent(i, k): row i of a [m][k] matrix) instead of as a cast on every factor. The factors must be
// non-negative.
#pragma once

#include <concepts>
#include <cstddef>

namespace plumb {

template <std::integral... Factors>
constexpr std::size_t Extent(Factors... factors) {
  return (std::size_t{1} * ... * static_cast<std::size_t>(factors));
}

}  // namespace plumb
