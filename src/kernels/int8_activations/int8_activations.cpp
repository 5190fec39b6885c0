// The fast family's switch and its activation quantizer (include/plumb/kernels/int8_activations.h).
#include "plumb/kernels/int8_activations.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "int8_activations_blocks.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/isa.h"

namespace plumb::kernels {
namespace {

constexpr int kFamilyUnset = -1;
std::atomic<int> g_family{kFamilyUnset};

}  // namespace

std::optional<KernelFamily> FamilyFromEnvironment() {
  const char* env = std::getenv("PLUMB_KERNELS");
  if (env == nullptr || *env == '\0') return std::nullopt;
  const std::optional<KernelFamily> family = ParseFamily(env);
  if (!family) throw MakeError("PLUMB_KERNELS=", env, ": expected 'exact' or 'fast' (or unset)");
  return family;
}

std::optional<KernelFamily> ParseFamily(std::string_view name) {
  if (name == "exact") return KernelFamily::kExact;
  if (name == "fast") return KernelFamily::kFast;
  return std::nullopt;
}

KernelFamily ActiveFamily() {
  int family = g_family.load(std::memory_order_relaxed);
  if (family == kFamilyUnset) {
    family = static_cast<int>(FamilyFromEnvironment().value_or(KernelFamily::kExact));
    g_family.store(family, std::memory_order_relaxed);
  }
  return static_cast<KernelFamily>(family);
}

void SetFamily(KernelFamily family) {
  g_family.store(static_cast<int>(family), std::memory_order_relaxed);
}

const char* FamilyName(KernelFamily family) {
  return family == KernelFamily::kFast ? "fast" : "exact";
}

namespace scalar {

void QuantizeBlock(const float* x, int count, std::int8_t* q, float* d, float* s, std::int32_t* sum) {
  float amax = 0.0f;
  bool finite = true;
  for (int i = 0; i < count; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::fmax(amax, std::fabs(x[i]));
  }
  if (!finite) {
    // A block with an inf or NaN has no int8 form: d = NaN makes every dot with it NaN, as the exact
    // family's would be (or ±inf there: the fast family does not keep an infinity's sign).
    std::fill(q, q + 32, std::int8_t{0});
    *d = *s = std::numeric_limits<float>::quiet_NaN();
    *sum = 0;
    return;
  }
  const float scale = amax / 127.0f;
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  int total = 0;
  for (int i = 0; i < 32; ++i) {
    const int v = i < count ? static_cast<int>(std::round(x[i] * inverse)) : 0;
    q[i] = static_cast<std::int8_t>(v);
    total += v;
  }
  *d = scale;
  *s = scale * static_cast<float>(total);
  *sum = total;
}

}  // namespace scalar

void QuantizeActivations(const float* x, int n, Int8Activations& out) {
  static std::atomic<std::uint64_t> last_serial{0};
  const int blocks = Int8Activations::Blocks(n);
  out.n = n;
  out.serial = last_serial.fetch_add(1, std::memory_order_relaxed) + 1;
  if (out.q.size() < static_cast<std::size_t>(blocks) * 32)
    out.q.resize(static_cast<std::size_t>(blocks) * 32);
  if (out.d.size() < static_cast<std::size_t>(blocks)) {
    out.d.resize(static_cast<std::size_t>(blocks));
    out.s.resize(static_cast<std::size_t>(blocks));
    out.sum.resize(static_cast<std::size_t>(blocks));
  }
  int b = 0;
#if defined(__x86_64__)
  if (ActiveIsa() != Isa::kScalar)
    b = avx2::QuantizeBlocks(x, n / 32, out.q.data(), out.d.data(), out.s.data(), out.sum.data());
#elif defined(__aarch64__)
  if (ActiveIsa() == Isa::kNeon)
    b = neon::QuantizeBlocks(x, n / 32, out.q.data(), out.d.data(), out.s.data(), out.sum.data());
#endif
  for (; b < blocks; ++b) {
    const int begin = 32 * b;
    scalar::QuantizeBlock(x + begin, std::min(32, n - begin), out.q.data() + begin, &out.d[b], &out.s[b],
                          &out.sum[b]);
  }
}

void AddGroupSums(Int8Activations& x) {
  const int blocks = Int8Activations::Blocks(x.n);
  x.sum16.resize(Extent(blocks, 2));
  x.sum4.resize(Extent(blocks, 8));
  for (int g = 0; g < 8 * blocks; ++g) {
    const std::int8_t* q = x.q.data() + Extent(g, 4);
    x.sum4[g] = q[0] + q[1] + q[2] + q[3];
  }
  for (int h = 0; h < 2 * blocks; ++h) {
    x.sum16[h] = x.sum4[4 * h] + x.sum4[4 * h + 1] + x.sum4[4 * h + 2] + x.sum4[4 * h + 3];
  }
}

}  // namespace plumb::kernels
