// FP8 E4M3 (OCP "e4m3fn") and E5M2: decoding, encoding as CUDA's __nv_cvt_float_to_fp8 does, and the scales
// that make an FP8 weight matrix. Bit layouts, rounding and NaN rules: docs/formats.md ("FP8").
//
//   E4M3: S EEEE MMM, bias 7, largest finite ±448, no infinities, NaN = S.1111.111 (0x7F / 0xFF).
//   E5M2: S EEEEE MM, bias 15, largest finite ±57344, ±inf = S.11111.00, NaN = S.11111.{01,10,11}.
#pragma once

#include <cstdint>
#include <vector>

namespace plumb {

enum class Fp8Format : std::uint8_t { kE4M3, kE5M2 };

// What a finite value too large for the format becomes (CUDA's __nv_saturation_t).
enum class Fp8Overflow : std::uint8_t {
  kSaturate,    // __NV_SATFINITE: ±max finite (±448 / ±57344)
  kNoSaturate,  // __NV_NOSAT: NaN for E4M3, ±inf for E5M2
};

const char* Fp8FormatName(Fp8Format format);  // "e4m3", "e5m2"
float Fp8MaxFinite(Fp8Format format);         // 448, 57344

// FP8 bits -> float. Exact: every FP8 value is a binary32 value. NaN codes give a quiet NaN with the code's
// sign; E5M2's infinity codes give ±inf.
float Fp8ToF32(std::uint8_t bits, Fp8Format format);

// The 256 values Fp8ToF32 gives, indexed by code (built once; kernels decode with it).
const float* Fp8DecodeTable(Fp8Format format);

// float -> FP8 bits, round to nearest, ties to even, subnormals included, exactly as CUDA's host-callable
// __nv_cvt_float_to_fp8(x, saturation, interpretation) (cuda_fp8.hpp); NaN inputs as CUDA maps them.
std::uint8_t F32ToFp8(float value, Fp8Format format, Fp8Overflow overflow);
// out[i] = F32ToFp8(x[i] / divisor, format, overflow) for i < n: the FP8 KV cache's write (EncodeKv), with
// the conversion inlined into the loop rather than called per element.
void F32ToFp8Divided(const float* x, int n, float divisor, Fp8Format format, Fp8Overflow overflow,
                     std::uint8_t* out);

// An FP8 weight matrix [rows][cols] and its FP32 scales, as vLLM quantizes weights: per output channel
// (scales [rows]) or per tensor (scales [1]), scale = amax / Fp8MaxFinite(format) over the row or tensor
// (1 where amax is 0, or so small that 1 / scale overflows), codes = F32ToFp8(w · (1 / scale), format,
// kSaturate); dequantized w ≈ q · scale. Throws plumb::Error for a non-finite weight or a negative shape.
struct Fp8Matrix {
  Fp8Format format = Fp8Format::kE4M3;
  int rows = 0;
  int cols = 0;
  bool per_row = true;
  std::vector<std::uint8_t> codes;  // [rows][cols]
  std::vector<float> scales;        // [rows] when per_row, else [1]
};
Fp8Matrix QuantizeFp8(const float* w, int rows, int cols, Fp8Format format, bool per_row);

}  // namespace plumb
