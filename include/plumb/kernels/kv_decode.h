// KV cache elements to FP32, vectorised: what attention reads a non-f32 cache through.
//
// Definition (what every variant returns, bit for bit, NaN payloads included):
//   DecodeKvRow(dtype, src, n, scale, dst) == DecodeKv(dtype, src, n, scale, dst)   (formats/kv_dtype.h)
// f16, bf16 and the FP8 codes convert to FP32 exactly (docs/formats.md: "FP16 (IEEE binary16)", "BF16",
// "FP8"), so the one rounding is FP8's multiplication by its scale, which every variant does as one FP32
// multiply. Variants: scalar:: is DecodeKv itself; avx2:: (x86-64 with AVX2 and F16C; avx512:: the same
// on 512-bit registers for f16 and E4M3) and neon:: (aarch64)
// convert eight elements (E4M3 on AVX2: sixteen) at a time with integer bit operations and the hardware FP16
// conversion, patching the lanes where the hardware's rule differs from the definition's (it quiets a
// signalling FP16 NaN; FP8 NaNs are the canonical quiet NaN of their sign). DecodeKvRow picks one by
// ActiveIsa() (kernels/isa.h), so PLUMB_ISA and SetIsa choose it as they choose the row dots.
#pragma once

#include <cstddef>

#include "plumb/formats/kv_dtype.h"

namespace plumb::kernels {

// n elements of dtype at src (any alignment) -> n floats at dst; scale as DecodeKv takes it (FP8 only).
// n <= 0 writes nothing.
void DecodeKvRow(KvDtype dtype, const void* src, int n, float scale, float* dst);

// The variant DecodeKvRow calls now, for a loop that converts many short rows (attention stages a few dozen
// elements per KV head and position) and should choose once, not per row. Same contract as DecodeKvRow.
using DecodeKvRowFn = void (*)(KvDtype dtype, const void* src, int n, float scale, float* dst);
DecodeKvRowFn ActiveDecodeKvRow();

// DecodeKvRow of `count` rows of n elements, row i at src + i · src_stride bytes, into dst + i · n: one call
// for a tile of positions (attention decodes sixteen positions of one KV head at a time, and a call per
// 64-element row spent more on the call and its set-up than on the conversion). The variant of ActiveIsa().
using DecodeKvRowsFn = void (*)(KvDtype dtype, const void* src, std::size_t src_stride, int count, int n,
                                float scale, float* dst);
DecodeKvRowsFn ActiveDecodeKvRows();

#if defined(__x86_64__)
namespace avx2 {
// Requires IsaSupported(Isa::kAvx2). Same contract as kernels::DecodeKvRow.
void DecodeKvRow(KvDtype dtype, const void* src, int n, float scale, float* dst);
}  // namespace avx2
namespace avx512 {
// Requires IsaSupported(Isa::kAvx512). Same contract as kernels::DecodeKvRow (f16 and fp8-e4m3 on 512-bit
// registers, the rest through avx2::).
void DecodeKvRow(KvDtype dtype, const void* src, int n, float scale, float* dst);
// DecodeKvRowsFn: the same conversions, their constants set up once for all the rows.
void DecodeKvRows(KvDtype dtype, const void* src, std::size_t src_stride, int count, int n, float scale,
                  float* dst);
}  // namespace avx512
#endif

#if defined(__aarch64__)
namespace neon {
// Same contract as kernels::DecodeKvRow.
void DecodeKvRow(KvDtype dtype, const void* src, int n, float scale, float* dst);
}  // namespace neon
#endif

}  // namespace plumb::kernels
