// plumb's float -> FP16 / BF16 / FP8 / FP4 / E8M0 conversions against CUDA's own host-callable ones, over
// every one of the 2^32 float bit patterns (docs/formats.md "FP16 (IEEE binary16)", "BF16", "FP8",
// "FP4 E2M1", "E8M0"):
//   F32ToF16                      vs __float2half_rn                       (cuda_fp16.h)
//   F32ToBF16                     vs __float2bfloat16_rn                   (cuda_bf16.h)
//   F32ToFp8(x, E4M3/E5M2, mode)  vs __nv_cvt_float_to_fp8(x, SATFINITE/NOSAT, __NV_E4M3/__NV_E5M2)
//                                                                          (cuda_fp8.h)
//   F32ToFp4(x, rounding)         vs __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest/Zero)
//                                                                          (cuda_fp4.h)
//   F32ToE8M0(x, rounding, mode)  vs __nv_cvt_float_to_e8m0(x, SATFINITE/NOSAT, cudaRoundZero/PosInf)
//                                                                          (cuda_fp8.h)
// and, before them, the decoders over every code: Fp4ToF32 vs __nv_cvt_fp4_to_halfraw, E8M0ToF32 vs
// __nv_cvt_e8m0_to_bf16raw.
// The toolkit headers are compiled as plain host C++ (no GPU, no nvcc): outside __CUDA_ARCH__ they are
// ordinary inline functions, and on sm_89+ the device instructions (cvt.rn.*) are specified to round the
// same way. Built only where the headers are found (CMakeLists.txt, label cuda-headers); elsewhere a test
// of the same name is skipped and says why. Not a GoogleTest: one pass over 2^32 inputs checks all twelve.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <omp.h>

#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "plumb/formats/dtype.h"
#include "plumb/formats/e8m0.h"
#include "plumb/formats/fp4.h"
#include "plumb/formats/fp8.h"

namespace {

struct Conversion {
  const char* name;
  std::uint32_t (*plumb)(float);
  std::uint32_t (*cuda)(float);
};

template <typename T>
std::uint32_t Raw16(T value) {
  std::uint16_t bits;
  static_assert(sizeof(T) == sizeof bits);
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

template <plumb::Fp8Format F, plumb::Fp8Overflow O>
std::uint32_t PlumbFp8(float x) {
  return plumb::F32ToFp8(x, F, O);
}
template <__nv_fp8_interpretation_t F, __nv_saturation_t O>
std::uint32_t CudaFp8(float x) {
  return __nv_cvt_float_to_fp8(x, O, F);
}

template <plumb::Fp4Rounding R>
std::uint32_t PlumbFp4(float x) {
  return plumb::F32ToFp4(x, R);
}
template <cudaRoundMode R>
std::uint32_t CudaFp4(float x) {
  return __nv_cvt_float_to_fp4(x, __NV_E2M1, R);
}
template <plumb::E8M0Rounding R, plumb::Fp8Overflow O>
std::uint32_t PlumbE8M0(float x) {
  return plumb::F32ToE8M0(x, R, O);
}
template <cudaRoundMode R, __nv_saturation_t O>
std::uint32_t CudaE8M0(float x) {
  return __nv_cvt_float_to_e8m0(x, O, R);
}

using plumb::E8M0Rounding;
using plumb::Fp4Rounding;
using plumb::Fp8Format;
using plumb::Fp8Overflow;
constexpr std::array<Conversion, 12> kConversions = {{
    {"F32ToF16 vs __float2half_rn", [](float x) -> std::uint32_t { return plumb::F32ToF16(x); },
     [](float x) { return Raw16(__float2half_rn(x)); }},
    {"F32ToBF16 vs __float2bfloat16_rn", [](float x) -> std::uint32_t { return plumb::F32ToBF16(x); },
     [](float x) { return Raw16(__float2bfloat16_rn(x)); }},
    {"F32ToFp8 E4M3 kSaturate vs __nv_cvt_float_to_fp8 __NV_E4M3 __NV_SATFINITE",
     PlumbFp8<Fp8Format::kE4M3, Fp8Overflow::kSaturate>, CudaFp8<__NV_E4M3, __NV_SATFINITE>},
    {"F32ToFp8 E4M3 kNoSaturate vs __nv_cvt_float_to_fp8 __NV_E4M3 __NV_NOSAT",
     PlumbFp8<Fp8Format::kE4M3, Fp8Overflow::kNoSaturate>, CudaFp8<__NV_E4M3, __NV_NOSAT>},
    {"F32ToFp8 E5M2 kSaturate vs __nv_cvt_float_to_fp8 __NV_E5M2 __NV_SATFINITE",
     PlumbFp8<Fp8Format::kE5M2, Fp8Overflow::kSaturate>, CudaFp8<__NV_E5M2, __NV_SATFINITE>},
    {"F32ToFp8 E5M2 kNoSaturate vs __nv_cvt_float_to_fp8 __NV_E5M2 __NV_NOSAT",
     PlumbFp8<Fp8Format::kE5M2, Fp8Overflow::kNoSaturate>, CudaFp8<__NV_E5M2, __NV_NOSAT>},
    {"F32ToFp4 kNearestEven vs __nv_cvt_float_to_fp4 __NV_E2M1 cudaRoundNearest",
     PlumbFp4<Fp4Rounding::kNearestEven>, CudaFp4<cudaRoundNearest>},
    {"F32ToFp4 kTowardZero vs __nv_cvt_float_to_fp4 __NV_E2M1 cudaRoundZero",
     PlumbFp4<Fp4Rounding::kTowardZero>, CudaFp4<cudaRoundZero>},
    {"F32ToE8M0 kTowardZero kSaturate vs __nv_cvt_float_to_e8m0 cudaRoundZero __NV_SATFINITE",
     PlumbE8M0<E8M0Rounding::kTowardZero, Fp8Overflow::kSaturate>, CudaE8M0<cudaRoundZero, __NV_SATFINITE>},
    {"F32ToE8M0 kTowardZero kNoSaturate vs __nv_cvt_float_to_e8m0 cudaRoundZero __NV_NOSAT",
     PlumbE8M0<E8M0Rounding::kTowardZero, Fp8Overflow::kNoSaturate>, CudaE8M0<cudaRoundZero, __NV_NOSAT>},
    {"F32ToE8M0 kTowardPosInf kSaturate vs __nv_cvt_float_to_e8m0 cudaRoundPosInf __NV_SATFINITE",
     PlumbE8M0<E8M0Rounding::kTowardPosInf, Fp8Overflow::kSaturate>,
     CudaE8M0<cudaRoundPosInf, __NV_SATFINITE>},
    {"F32ToE8M0 kTowardPosInf kNoSaturate vs __nv_cvt_float_to_e8m0 cudaRoundPosInf __NV_NOSAT",
     PlumbE8M0<E8M0Rounding::kTowardPosInf, Fp8Overflow::kNoSaturate>, CudaE8M0<cudaRoundPosInf, __NV_NOSAT>},
}};

constexpr std::size_t kShown = 8;  // mismatches printed per conversion

struct Mismatch {
  std::uint32_t input;
  std::uint32_t plumb;
  std::uint32_t cuda;
};

// Converts the 2^16 inputs (high << 16) | low, low = 0 .. 0xFFFF, both ways into two arrays, each in a loop
// of its own, and records any difference. flatten inlines CUDA's conversions (GCC otherwise leaves
// __nv_cvt_double_to_fp8 out of line, its format and saturation arguments unknown): the run takes half
// the time, which matters for 2^32 inputs in CI.
template <std::size_t K>
[[gnu::flatten]] void CheckChunk(std::uint32_t high, std::array<std::uint16_t, 0x10000>& ours,
                                 std::array<std::uint16_t, 0x10000>& theirs, std::uint64_t& count,
                                 std::vector<Mismatch>& examples) {
  constexpr Conversion conversion = kConversions[K];
  for (std::uint32_t low = 0; low < 0x10000; ++low) {
    ours[low] = static_cast<std::uint16_t>(conversion.plumb(std::bit_cast<float>((high << 16) | low)));
  }
  for (std::uint32_t low = 0; low < 0x10000; ++low) {
    theirs[low] = static_cast<std::uint16_t>(conversion.cuda(std::bit_cast<float>((high << 16) | low)));
  }
  if (ours == theirs) return;
  for (std::uint32_t low = 0; low < 0x10000; ++low) {
    if (ours[low] == theirs[low]) continue;
    ++count;
    if (examples.size() < kShown) examples.push_back({(high << 16) | low, ours[low], theirs[low]});
  }
}

// The decoders over every code, bit for bit against CUDA's: FP4 to FP16 (every FP4 value is an FP16 value),
// E8M0 to BF16 (every E8M0 value is a BF16 value; NaN as any NaN). Prints and counts the mismatches.
int CheckDecoders() {
  int mismatches = 0;
  for (unsigned code = 0; code < 16; ++code) {
    const std::uint16_t ours = plumb::F32ToF16(plumb::Fp4ToF32(static_cast<std::uint8_t>(code)));
    const std::uint16_t theirs = __nv_cvt_fp4_to_halfraw(static_cast<__nv_fp4_storage_t>(code), __NV_E2M1).x;
    if (ours == theirs) continue;
    ++mismatches;
    std::printf("    Fp4ToF32 code 0x%X: plumb (as FP16) 0x%04X, __nv_cvt_fp4_to_halfraw 0x%04X\n", code,
                ours, theirs);
  }
  for (unsigned code = 0; code < 256; ++code) {
    const float ours = plumb::E8M0ToF32(static_cast<std::uint8_t>(code));
    const std::uint16_t theirs = __nv_cvt_e8m0_to_bf16raw(static_cast<__nv_fp8_storage_t>(code)).x;
    const bool both_nan = ours != ours && (theirs & 0x7FFFu) > 0x7F80u;
    if (both_nan || plumb::F32ToBF16(ours) == theirs) continue;
    ++mismatches;
    std::printf("    E8M0ToF32 code 0x%02X: plumb %a, __nv_cvt_e8m0_to_bf16raw 0x%04X\n", code, ours, theirs);
  }
  std::printf("%-76s %s: %d of 272 codes differ\n",
              "Fp4ToF32, E8M0ToF32 vs __nv_cvt_fp4_to_halfraw, __nv_cvt_e8m0_to_bf16raw",
              mismatches == 0 ? "OK  " : "FAIL", mismatches);
  return mismatches;
}

}  // namespace

// With two arguments FIRST LAST (hex), checks only the inputs whose upper 16 bits are in [FIRST, LAST]:
// for looking into a failure, or timing.
int main(int argc, char** argv) {
  std::uint32_t first = 0;
  std::uint32_t last = 0xFFFF;
  if (argc == 3) {
    first = static_cast<std::uint32_t>(std::strtoul(argv[1], nullptr, 16)) & 0xFFFF;
    last = static_cast<std::uint32_t>(std::strtoul(argv[2], nullptr, 16)) & 0xFFFF;
  }
  const bool decoders_equal = CheckDecoders() == 0;
  std::array<std::uint64_t, kConversions.size()> counts{};
  std::array<std::vector<Mismatch>, kConversions.size()> examples;
  const auto start = std::chrono::steady_clock::now();

  // Chunks of 2^16 consecutive bit patterns; each thread counts its own mismatches, merged at the end.
#pragma omp parallel
  {
    std::array<std::uint64_t, kConversions.size()> local_counts{};
    std::array<std::vector<Mismatch>, kConversions.size()> local_examples;
    auto ours = std::make_unique<std::array<std::uint16_t, 0x10000>>();
    auto theirs = std::make_unique<std::array<std::uint16_t, 0x10000>>();
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t high = first; high <= last; ++high) {
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (CheckChunk<K>(static_cast<std::uint32_t>(high), *ours, *theirs, local_counts[K], local_examples[K]),
         ...);
      }
      (std::make_index_sequence<kConversions.size()>());
    }
#pragma omp critical
    for (std::size_t k = 0; k < kConversions.size(); ++k) {
      counts[k] += local_counts[k];
      for (const Mismatch& m : local_examples[k]) {
        if (examples[k].size() < kShown) examples[k].push_back(m);
      }
    }
  }

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::uint64_t inputs = (static_cast<std::uint64_t>(last) - first + 1) << 16;
  bool all_equal = decoders_equal;
  for (std::size_t k = 0; k < kConversions.size(); ++k) {
    std::printf("%-76s %s: %llu of %llu inputs differ\n", kConversions[k].name,
                counts[k] == 0 ? "OK  " : "FAIL", static_cast<unsigned long long>(counts[k]),
                static_cast<unsigned long long>(inputs));
    for (const Mismatch& m : examples[k]) {
      std::printf("    input 0x%08X (%a): plumb 0x%04X, CUDA 0x%04X\n", m.input,
                  std::bit_cast<float>(m.input), m.plumb, m.cuda);
    }
    all_equal = all_equal && counts[k] == 0;
  }
  std::printf("%d threads, %.1f s\n", omp_get_max_threads(), seconds);
  return all_equal && inputs == (std::uint64_t{1} << 32) ? 0 : 1;
}
