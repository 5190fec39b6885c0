// The fast kernel family (issue 17): activations quantized to int8 once per GEMV, weights used as stored,
// integer dot products per 32-element block, then per-block scaling in float. It is not the exact family's
// definition (kernels/scalar.h); it has a scalar definition of its own, stated here and in each format's
// int8 kernels, and every SIMD variant computes that definition's bits (the integer sums are exact, and the
// float steps are the same operations in the same order), on every CPU and at every thread count. The
// fixture suite judges it against the exact family as it would judge a GPU engine.
//
// Which family runs: ActiveFamily(), the exact one unless PLUMB_KERNELS=fast in the environment, SetFamily,
// or a command's --kernels flag chose the fast one. A matrix whose format has no fast kernels runs the exact
// ones in either family, and so does one marked WeightMatrix::exact_only (a fixture op's threaded
// definition).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace plumb::kernels {

enum class KernelFamily { kExact, kFast };

// "exact" or "fast" (PLUMB_KERNELS, --kernels); nullopt for anything else.
std::optional<KernelFamily> ParseFamily(std::string_view name);
KernelFamily ActiveFamily();
// PLUMB_KERNELS's choice; nullopt when unset or empty. Throws plumb::Error for another value.
std::optional<KernelFamily> FamilyFromEnvironment();
void SetFamily(KernelFamily family);
const char* FamilyName(KernelFamily family);  // "exact", "fast"
// What `family` does on this host that the fixture suite's checks allow for (docs/fixtures.md "Allowances"):
// nothing for the exact family; int8_activations for the fast one, and bf16_activations where its prefill
// of a float matrix runs the BF16 panels (kernels.h, UsesBf16Panels). The --allow list that judges plumb's
// own results as another engine's.
std::vector<std::string> DeclaredAllowances(KernelFamily family);

// x[n] in blocks of 32 (the last one zero-padded), as GGUF's Q8_1 stores them (docs/formats.md "GGUF
// blocks"). For block b, with amax = max |x[i]| over its elements:
//   d[b] = amax / 127                         (one float division)
//   q[i] = round(x[i] · (1 / d[b]))           (1 / d[b] one float division, then the product; round half away
//                                              from zero; q = 0 when d[b] = 0), so |q[i]| ≤ 127
//   sum[b] = Σ q[i]                           (exact)
//   s[b] = d[b] · float(sum[b])               (one float product)
// s is what a weight format with a minimum (Q4_1: w = q·d + m) needs: Σ m·x = m·s; sum what one with an
// offset (Q4_0: w = nibble − 8) needs: Σ w·q = Σ nibble·q − 8·sum. A block holding an inf or NaN gets d = s =
// NaN and q = 0 (so sum = 0), and every dot with it is NaN.
struct Int8Activations {
  int n = 0;                      // elements
  std::vector<std::int8_t> q;     // [Blocks(n) × 32]
  std::vector<float> d;           // [Blocks(n)]
  std::vector<float> s;           // [Blocks(n)]
  std::vector<std::int32_t> sum;  // [Blocks(n)]
  // Σ q over each 16-element and each 4-element group, [Blocks(n) × 2] and [Blocks(n) × 8]: what the
  // int8 panels of Q3_K and Q6_K (16) and Q2_K (4) take off or scale per term
  // (src/kernels/ggml/int8_panel.h). Filled by AddGroupSums; QuantizeActivations leaves them as they were.
  std::vector<std::int32_t> sum16, sum4;
  // A number no other QuantizeActivations call of this process gave (0: filled by other means): a kernel
  // that keeps a copy of q across calls (the AMX panels' x tiles) knows by it that the copy is still these
  // codes. Whoever writes q other than through QuantizeActivations sets it to 0.
  std::uint64_t serial = 0;

  static int Blocks(int n) { return (n + 31) / 32; }
};

// Quantizes x[n] into `out` (its vectors grown as needed, never shrunk), as defined above.
void QuantizeActivations(const float* x, int n, Int8Activations& out);
// Fills x.sum16 and x.sum4 from x.q (exact integer sums), for a caller of the int8 panels.
void AddGroupSums(Int8Activations& x);

}  // namespace plumb::kernels
