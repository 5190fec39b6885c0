// Which kernel variant runs: the CPU's features (read here, and nowhere else), PLUMB_ISA, SetIsa
// (include/plumb/kernels/isa.h).
#include "plumb/kernels/isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "plumb/core/error.h"

namespace plumb::kernels {
namespace {

constexpr int kIsaUnset = -1;
std::atomic<int> g_isa{kIsaUnset};

Isa DefaultIsa() {
  const char* env = std::getenv("PLUMB_ISA");
  const std::string_view requested = env == nullptr ? "" : env;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (requested != IsaName(isa)) continue;
    if (const std::string missing = IsaMissing(isa); !missing.empty()) {
      throw MakeError("PLUMB_ISA=", requested, ", but this machine cannot run it: ", missing);
    }
    return isa;
  }
  if (!requested.empty())
    throw MakeError("PLUMB_ISA=", requested, ": expected 'scalar', 'avx2', 'avx512' or 'neon' (or unset)");
  if (IsaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (IsaSupported(Isa::kAvx2)) return Isa::kAvx2;
  if (IsaSupported(Isa::kNeon)) return Isa::kNeon;
  return Isa::kScalar;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// CPUID leaf 1, ECX bit 29. Asked directly because Clang's __builtin_cpu_supports does not know "f16c".
// (The OS's saving of the YMM registers F16C needs is what __builtin_cpu_supports("avx2") checks.)
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

struct CpuFeature {
  const char* name;  // as /proc/cpuinfo spells it
  bool present;
};

// "CPU lacks avx512bw, avx512vl" for the features not present, "" when all are.
std::string Lacking(std::initializer_list<CpuFeature> features) {
  std::string lacking;
  for (const CpuFeature& feature : features) {
    if (feature.present) continue;
    lacking += lacking.empty() ? "CPU lacks " : ", ";
    lacking += feature.name;
  }
  return lacking;
}
// AMX, as "" or the reason it cannot run: CPUID leaf 7's AMX-TILE (EDX bit 24) and AMX-INT8 (bit 25); XCR0's
// tile configuration and data bits (17, 18: the OS saves them); and, on Linux, the process's permission to
// use the tile data, which the kernel grants only when asked (arch_prctl ARCH_REQ_XCOMP_PERM, 0x1023, for
// XFEATURE_XTILEDATA, 18; Linux 5.16 and later). Granted once, it holds for every thread of the process.
std::string ReadAmxMissing() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return "CPU lacks amx_tile, amx_int8";
  const bool tile = (edx & (1u << 24)) != 0, int8 = (edx & (1u << 25)) != 0;
  if (!tile || !int8) return Lacking({{"amx_tile", tile}, {"amx_int8", int8}});
  unsigned eax1 = 0, ebx1 = 0, ecx1 = 0, edx1 = 0;
  if (__get_cpuid(1, &eax1, &ebx1, &ecx1, &edx1) == 0 || (ecx1 & (1u << 27)) == 0)
    return "the OS does not enable XSAVE (CPUID.1:ECX.OSXSAVE)";
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & (3u << 17)) != (3u << 17))
    return "the OS does not save the AMX tile state (XCR0 bits 17, 18)";
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return "Linux refused this process the AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM)";
#endif
  return "";
}

// CPUID leaf 7's AMX-BF16 (EDX bit 22).
bool CpuHasAmxBf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (edx & (1u << 22)) != 0;
}

const std::string& AmxMissingOnce() {
  static const std::string missing = ReadAmxMissing();
  return missing;
}

// Every feature, once. __builtin_cpu_supports also checks that the OS saves the YMM registers (for avx2,
// fma) and the ZMM and mask registers (for the AVX-512 ones).
CpuFeatures ReadCpuFeatures() {
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2") != 0;
  f.fma = __builtin_cpu_supports("fma") != 0;
  f.f16c = HasF16c();
  f.avx512f = __builtin_cpu_supports("avx512f") != 0;
  f.avx512bw = __builtin_cpu_supports("avx512bw") != 0;
  f.avx512vl = __builtin_cpu_supports("avx512vl") != 0;
  f.avx512vnni = __builtin_cpu_supports("avx512vnni") != 0;
  f.gfni = __builtin_cpu_supports("gfni") != 0;
  f.avx512bf16 = f.avx512f && __builtin_cpu_supports("avx512bf16") != 0;
  f.amx_int8 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni && AmxMissingOnce().empty();
  f.amx_bf16 = f.avx512bf16 && f.avx512bw && f.avx512vl && CpuHasAmxBf16() && AmxMissingOnce().empty();
  return f;
}

#else
CpuFeatures ReadCpuFeatures() {
  return {};
}
#endif

}  // namespace

const CpuFeatures& HostCpuFeatures() {
  static const CpuFeatures features = ReadCpuFeatures();
  return features;
}

std::string AmxMissing() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  const CpuFeatures& f = HostCpuFeatures();
  if (!f.amx_int8 && AmxMissingOnce().empty()) return "CPU lacks avx512f, avx512bw, avx512vl or avx512vnni";
  return AmxMissingOnce();
#else
  return "not an x86-64 build";
#endif
}

std::string AmxBf16Missing() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (HostCpuFeatures().amx_bf16) return "";
  if (!CpuHasAmxBf16()) return "CPU lacks amx_bf16";
  if (const std::string& why = AmxMissingOnce(); !why.empty()) return why;
  return "CPU lacks avx512_bf16, avx512bw or avx512vl";
#else
  return "not an x86-64 build";
#endif
}

bool EnvTurnsOff(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string_view(value) == "0";
}

std::string IsaMissing(Isa isa) {
  [[maybe_unused]] const CpuFeatures& f = HostCpuFeatures();
  switch (isa) {
    case Isa::kScalar:
      return "";
    case Isa::kAvx2:
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
      // FMA is part of the level: every AVX2 CPU plumb has met has it, but the instruction set does not
      // promise it, and the FMA kernels (the fast family, the small-row GEMM, exp) run under kAvx2.
      return Lacking({{"avx2", f.avx2}, {"fma", f.fma}, {"f16c", f.f16c}});
#else
      return "not an x86-64 build";
#endif
    case Isa::kAvx512:
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
      return Lacking({{"avx2", f.avx2},
                      {"fma", f.fma},
                      {"f16c", f.f16c},
                      {"avx512f", f.avx512f},
                      {"avx512bw", f.avx512bw},
                      {"avx512vl", f.avx512vl}});
#else
      return "not an x86-64 build";
#endif
    case Isa::kNeon:
#if defined(__aarch64__)
      return "";  // Advanced SIMD is part of every AArch64 CPU
#else
      return "not an aarch64 build";
#endif
  }
  return "unknown variant";
}

bool IsaSupported(Isa isa) {
  return IsaMissing(isa).empty();
}

Isa ActiveIsa() {
  int isa = g_isa.load(std::memory_order_relaxed);
  if (isa == kIsaUnset) {
    int expected = kIsaUnset;
    g_isa.compare_exchange_strong(expected, static_cast<int>(DefaultIsa()));
    isa = g_isa.load(std::memory_order_relaxed);
  }
  return static_cast<Isa>(isa);
}

void SetIsa(Isa isa) {
  if (!IsaSupported(isa)) {
    throw MakeError("SetIsa: this machine cannot run ", IsaName(isa), ": ", IsaMissing(isa));
  }
  g_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kNeon:
      return "neon";
    case Isa::kScalar:
      break;
  }
  return "scalar";
}

}  // namespace plumb::kernels
