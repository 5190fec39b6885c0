// kernels::RopeRotateHalf (kernels/kernels.h): scalar::RopeRotateHalf on every row, with each position's
// cos and sin computed once and then looked up. A batched decode step rotates the same positions in every
// layer, for q and for k: 60 times per position for SmolLM2, where the definition computes a pow, a cos and a
// sin in double per pair each time (12x the step's rotation arithmetic). The values are
// scalar::RopeCosSin's, the function the definition itself calls, and the rotation is the definition's
// expressions element by element (FP32, no FMA), so every bit is the definition's.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "plumb/core/extent.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/scalar.h"
#include "plumb/kernels/thread_pool.h"

namespace plumb::kernels {
namespace {

// A direct-mapped table of the last positions rotated, position p in slot p mod kSlots: the rows of one call
// are consecutive positions, so up to kSlots of them never share a slot and can be filled in parallel.
constexpr int kSlots = 1024;

struct AngleCache {
  std::uint32_t theta_bits = 0;
  int head_dim = -1;
  std::vector<float> freq_factors;  // [head_dim / 2], or empty for none
  std::vector<int> position;        // [kSlots]: the position whose values the slot holds, or −1
  std::vector<float> values;        // [kSlots][head_dim]: cos of pairs 0 .. half − 1, then their sin
};

// Whether `cache` holds the angles of (head_dim, theta, freq_factors); the divisors are compared by value, a
// few dozen floats, since a caller's array may be freed and another put at its address.
bool Holds(const AngleCache& cache, int head_dim, std::uint32_t theta_bits, const float* freq_factors) {
  if (cache.head_dim != head_dim || cache.theta_bits != theta_bits) return false;
  if (freq_factors == nullptr) return cache.freq_factors.empty();
  return !cache.freq_factors.empty() &&
         std::equal(cache.freq_factors.begin(), cache.freq_factors.end(), freq_factors, [](float a, float b) {
           return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
         });
}

// The calling thread's table for (head_dim, theta, freq_factors) (the pool's workers fill and read it while
// that thread waits). A few are kept, the least recently used one replaced: Gemma 3 alternates two bases
// (its local and global layers), and one table would be cleared (a megabyte) at every switch.
AngleCache& CacheFor(int head_dim, float theta, const float* freq_factors) {
  constexpr std::size_t kTables = 4;
  thread_local std::array<AngleCache, kTables> tables;
  thread_local std::array<std::uint64_t, kTables> last_use{};
  thread_local std::uint64_t clock = 0;
  const auto bits = std::bit_cast<std::uint32_t>(theta);
  std::size_t pick = 0;
  for (std::size_t t = 0; t < kTables; ++t) {
    if (Holds(tables[t], head_dim, bits, freq_factors)) {
      pick = t;
      break;
    }
    if (last_use[t] < last_use[pick]) pick = t;
  }
  AngleCache& cache = tables[pick];
  last_use[pick] = ++clock;
  if (!Holds(cache, head_dim, bits, freq_factors)) {
    cache.head_dim = head_dim;
    cache.theta_bits = bits;
    cache.freq_factors.clear();
    if (freq_factors != nullptr) cache.freq_factors.assign(freq_factors, freq_factors + head_dim / 2);
    cache.position.assign(kSlots, -1);
    cache.values.assign(Extent(kSlots, head_dim), 0.0f);
  }
  return cache;
}

void RotateRow(float* x, int n_heads, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + Extent(h, head_dim);
    for (int i = 0; i < half; ++i) {
      const float a = v[i];
      const float b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

}  // namespace

void RopeRotateHalf(float* x, int rows, int n_heads, int head_dim, int first_pos, float theta,
                    const float* freq_factors) {
  const int half = head_dim / 2;
  AngleCache& cache = CacheFor(head_dim, theta, freq_factors);
  for (int r0 = 0; r0 < rows; r0 += kSlots) {
    const int count = std::min(kSlots, rows - r0);
    ParallelFor(count, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = r0 + begin; r < r0 + end; ++r) {
        const int pos = first_pos + static_cast<int>(r);
        const int slot = pos % kSlots;
        float* cos = cache.values.data() + Extent(slot, head_dim);
        if (cache.position[static_cast<std::size_t>(slot)] != pos) {
          for (int i = 0; i < half; ++i) {
            const float f = freq_factors != nullptr ? freq_factors[i] : 1.0f;
            scalar::RopeCosSin(pos, i, head_dim, theta, f, cos[i], cos[half + i]);
          }
          cache.position[static_cast<std::size_t>(slot)] = pos;
        }
        RotateRow(x + Extent(r, n_heads, head_dim), n_heads, head_dim, cos, cos + half);
      }
    });
  }
}

}  // namespace plumb::kernels
