// The fast family's switch and its activation quantizer (include/plumb/kernels/int8_activations.h).
#include "plumb/kernels/int8_activations.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "plumb/core/error.h"

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

void QuantizeActivations(const float* x, int n, Int8Activations& out) {
  const int blocks = Int8Activations::Blocks(n);
  out.n = n;
  if (out.q.size() < static_cast<std::size_t>(blocks) * 32)
    out.q.resize(static_cast<std::size_t>(blocks) * 32);
  if (out.d.size() < static_cast<std::size_t>(blocks)) {
    out.d.resize(static_cast<std::size_t>(blocks));
    out.s.resize(static_cast<std::size_t>(blocks));
  }
  for (int b = 0; b < blocks; ++b) {
    const int begin = 32 * b;
    const int count = n - begin < 32 ? n - begin : 32;
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < count; ++i) {
      finite = finite && std::isfinite(x[begin + i]);
      amax = std::fmax(amax, std::fabs(x[begin + i]));
    }
    // A block with an inf or NaN has no int8 form: d = NaN makes every dot with it NaN, as the exact
    // family's would be (or ±inf there: the fast family does not keep an infinity's sign).
    const float d = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
    const float inverse = finite && d != 0.0f ? 1.0f / d : 0.0f;
    std::int8_t* q = out.q.data() + begin;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int v = i < count ? static_cast<int>(std::round(x[begin + i] * inverse)) : 0;
      q[i] = static_cast<std::int8_t>(v);
      sum += v;
    }
    out.d[b] = d;
    out.s[b] = d * static_cast<float>(sum);
  }
}

}  // namespace plumb::kernels
