// PackedRowDots with AVX2 + F16C: the scalar definition (kernels/packed_dot.h), eight lanes at a time.
//
// Why the bits match the definition: one __m256 accumulator per row holds scalar::Dot's eight lanes
// (column i in lane i mod 8; every group of 8 columns is one vector, and groups start at multiples of 8);
// each step is _mm256_mul_ps then _mm256_add_ps (no FMA: the target leaves "fma" out and the build has
// -ffp-contract=off); a row's last cols mod 8 columns are added lane by lane in scalar code as scalar::Dot's
// tail loop does; the lanes are reduced by the definition's expression. Weights are made exactly as the
// definition makes them:
//   FP8 E5M2 is the top byte of an FP16 (same sign, exponent width and bias), so code << 8 converted by
//   F16C is Fp8ToF32 exactly, inf and NaN included. FP8 E4M3's sign, exponent and mantissa bits placed in an
//   FP16 (S.0EEEE.MMM0000000) give the value · 2^-8 exactly, subnormals included; the NaN codes (S.1111.111),
//   which would read as 480, are noted apart (see Fp8Dots). The 2^8 goes onto x instead of onto each weight:
//   h·(2^8·x) and (2^8·h)·x are the same real number, so the rounded product is the same bits, as long as
//   2^8·x is exact, i.e. finite; a row times an x with an element of magnitude ≥ 2^120 scales the weights
//   instead. INT4 codes are widened to int32 lanes by a variable shift of the row's 32-bit word (8 nibbles,
//   column c at bits 4c..4c+3), then float(q)·scale, float(q − z)·scale or (float(q) − z)·scale, in
//   formats/int4.h's order of float operations (sym takes q·2^28 and s·2^-28, exactly the same product).
// F16C conversions are exact and differ from F16ToF32 only in quieting a signalling NaN, which changes no
// result but a NaN's payload.
//
// Several rows are computed together (kRows accumulators, x loaded once for them): one row's adds form a
// single dependency chain (the definition fixes it), so interleaving rows keeps the adders busy.
#include "plumb/kernels/packed_dot.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "avx2_common.h"
#include "packed_dot_avx2.h"
#include "plumb/formats/dtype.h"

namespace plumb::kernels::avx2 {
namespace {

constexpr int kRows = 4;

// Each row is prefetched at the same column of the row kRows further on, the one the next pass will read:
// the kernel walks kRows rows of a few KiB side by side, the hardware prefetchers stop at page boundaries,
// and a new row would start on DRAM latency. One thread, FP8 E5M2 at 14336 x 4096: 9.2 GB/s with no
// prefetch, 9.5 with one 1 KiB ahead in the same row, 14.5 with this one (15.9 with W in cache).
// Past the last row it touches memory that is not the matrix's: a prefetch never faults (avx2_common.h).
using avx2_common::Prefetch;
using avx2_common::ReadU16;
using avx2_common::ReduceLanes;
using avx2_packed::CanScaleX;
using avx2_packed::Finish;
using avx2_packed::Int4Group;
using avx2_packed::Int4Groups8;
template <Int4Scheme S>
using Int4RowParams = Int4Groups8<S>;  // packed_dot_int4_body.h
using avx2_packed::Int4Weight;

// ---- FP8 --------------------------------------------------------------------------------------------

// 16 codes at p as FP16 bits, codes 0-7 in lo and 8-15 in hi: E5M2 code << 8; E4M3 the value · 2^-8,
// with its NaN codes (S.1111.111) read as the finite 1.875 (kernels that see them must note them apart:
// E4M3NanCodes).
struct Halves {
  __m128i lo, hi;
};
template <Fp8Format F>
PLUMB_AVX2 inline Halves Fp8ToHalf(const std::uint8_t* p) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (F == Fp8Format::kE5M2) {
    return {_mm_unpacklo_epi8(_mm_setzero_si128(), bytes), _mm_unpackhi_epi8(_mm_setzero_si128(), bytes)};
  } else {
    // Sign-extended and shifted: S.S.EEEE.MMM.0000000; clearing bit 14 leaves S.0EEEE.MMM0000000.
    const __m256i s = _mm256_slli_epi16(_mm256_cvtepi8_epi16(bytes), 7);
    const __m256i half = _mm256_and_si256(s, _mm256_set1_epi16(static_cast<short>(0xBF80)));
    return {_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1)};
  }
}

// kScaleX: E4M3 with x pre-multiplied by 2^8 (see the top of the file); otherwise E4M3 weights are
// multiplied by 2^8 themselves. E5M2 ignores it.
//
// E4M3 NaN codes: the definition's dot of a row holding one is NaN whatever x is (NaN · x is NaN, and a NaN
// lane makes the sum NaN). So the vector loop decodes them as finite values, notes per row whether it met
// one (E4M3NanTracker, cheaper than patching each decoded weight), and the row's result is then NaN.
// Columns past the last multiple of 32 go through the decode table, which has the NaNs.
template <Fp8Format F, bool kScaleX, int R>
PLUMB_AVX2 void Fp8Dots(const WeightMatrix& W, int r0, const float* x, float* y) {
  constexpr bool kE4M3 = F == Fp8Format::kE4M3;
  const int cols = W.cols;
  const __m256 two8 = _mm256_set1_ps(256.0f);
  const std::uint8_t* row[R];
  __m256 acc[R];
  avx2_packed::E4M3NanTracker nan[R];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    acc[r] = _mm256_setzero_ps();
    nan[r].Reset();
  }
  const int full32 = cols - cols % 32;
  for (int c = 0; c < full32; c += 32) {
    __m256 xv[4];
    for (int v = 0; v < 4; ++v) {
      xv[v] = _mm256_loadu_ps(x + c + 8 * v);
      if constexpr (kE4M3 && kScaleX) xv[v] = _mm256_mul_ps(xv[v], two8);
    }
    for (int r = 0; r < R; ++r) {
      if (c % 64 == 0) Prefetch(row[r], R * W.row_bytes + c);
      if constexpr (kE4M3) nan[r].Add(row[r] + c);
      for (int h = 0; h < 2; ++h) {
        const Halves half = Fp8ToHalf<F>(row[r] + c + 16 * h);
        __m256 w0 = _mm256_cvtph_ps(half.lo);
        __m256 w1 = _mm256_cvtph_ps(half.hi);
        if constexpr (kE4M3 && !kScaleX) {
          w0 = _mm256_mul_ps(w0, two8);
          w1 = _mm256_mul_ps(w1, two8);
        }
        acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(w0, xv[2 * h]));
        acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(w1, xv[2 * h + 1]));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const bool has_nan = kE4M3 && nan[r].Any();
    y[r0 + r] = avx2_packed::Fp8Finish(W, F, r0 + r, acc[r], full32, has_nan, x);
  }
}

// ---- INT4 -------------------------------------------------------------------------------------------

#define PLUMB_PD_TARGET PLUMB_AVX2
#include "packed_dot_int4_body.h"
#undef PLUMB_PD_TARGET

// ---- rows decoded for GEMM tiles ----------------------------------------------------------------------

template <Fp8Format F>
PLUMB_AVX2 void DecodeFp8Row(const WeightMatrix& W, int r, float* out) {
  const std::uint8_t* row = W.Row(r);
  const int cols = W.cols;
  const int full16 = cols - cols % 16;
  for (int c = 0; c < full16; c += 16) {
    const Halves half = Fp8ToHalf<F>(row + c);
    __m256 w0 = _mm256_cvtph_ps(half.lo);
    __m256 w1 = _mm256_cvtph_ps(half.hi);
    if constexpr (F == Fp8Format::kE4M3) {
      // Exact: the value · 2^-8, times 2^8. NaN codes (decoded as 1.875 · 2^-8) become NaN again.
      const __m256 nan_value = _mm256_set1_ps(480.0f);
      const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
      w0 = _mm256_mul_ps(w0, _mm256_set1_ps(256.0f));
      w1 = _mm256_mul_ps(w1, _mm256_set1_ps(256.0f));
      w0 = _mm256_or_ps(w0, _mm256_cmp_ps(_mm256_and_ps(w0, abs_mask), nan_value, _CMP_EQ_OQ));
      w1 = _mm256_or_ps(w1, _mm256_cmp_ps(_mm256_and_ps(w1, abs_mask), nan_value, _CMP_EQ_OQ));
    }
    _mm256_storeu_ps(out + c, w0);
    _mm256_storeu_ps(out + c + 8, w1);
  }
  const float* table = Fp8DecodeTable(F);
  for (int c = full16; c < cols; ++c) out[c] = table[row[c]];
}

template <Int4Scheme S>
PLUMB_AVX2 void DecodeInt4Row(const WeightMatrix& W, int r, float* out) {
  const std::uint8_t* row = W.Row(r);
  const int cols = W.cols;
  const int G = W.int4.group_size;
  const int groups = Int4Groups(cols, G);
  const std::size_t zero_row = Int4ZeroRowBytes(W.int4, cols);
  const int full = cols - cols % 8;
  for (int g8 = 0; g8 * G < full; g8 += 8) {
    Int4Groups8<S> params;
    params.Load(W, r, g8, groups, zero_row);
    for (int j = 0; j < 8 && (g8 + j) * G < full; ++j) {
      const Int4Group<S> group = params.Group(j);
      const int begin = (g8 + j) * G;
      const int end = begin + G < full ? begin + G : full;
      for (int c = begin; c < end; c += 8) _mm256_storeu_ps(out + c, group.Decode(row + c / 2));
    }
  }
  for (int c = full; c < cols; ++c) out[c] = Int4Weight(W, r, c);
}

// ---- dispatch ---------------------------------------------------------------------------------------

using RowsFn = void (*)(const WeightMatrix&, int, const float*, float*);

// Rows in groups of kRows, then one at a time.
void RunRows(RowsFn group, RowsFn single, const WeightMatrix& W, int row_begin, int row_end, const float* x,
             float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) group(W, r, x, y);
  for (; r < row_end; ++r) single(W, r, x, y);
}

template <Fp8Format F, bool kScaleX>
void RunFp8(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  RunRows(Fp8Dots<F, kScaleX, kRows>, Fp8Dots<F, kScaleX, 1>, W, row_begin, row_end, x, y);
}

template <Int4Scheme S>
void RunInt4(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  RunRows(Int4Dots<S, kRows>, Int4Dots<S, 1>, W, row_begin, row_end, x, y);
}

}  // namespace

void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  if (row_end <= row_begin) return;
  if (W.encoding == WeightEncoding::kFp8) {
    if (W.fp8_format == Fp8Format::kE5M2) return RunFp8<Fp8Format::kE5M2, false>(W, row_begin, row_end, x, y);
    if (CanScaleX(x, W.cols)) return RunFp8<Fp8Format::kE4M3, true>(W, row_begin, row_end, x, y);
    return RunFp8<Fp8Format::kE4M3, false>(W, row_begin, row_end, x, y);
  }
  if (W.encoding == WeightEncoding::kInt4) {
    switch (W.int4.scheme) {
      case Int4Scheme::kSymmetric:
        return RunInt4<Int4Scheme::kSymmetric>(W, row_begin, row_end, x, y);
      case Int4Scheme::kAsymmetric:
        return RunInt4<Int4Scheme::kAsymmetric>(W, row_begin, row_end, x, y);
      case Int4Scheme::kAsymmetricF16Zero:
        return RunInt4<Int4Scheme::kAsymmetricF16Zero>(W, row_begin, row_end, x, y);
    }
  }
  scalar::PackedRowDots(W, row_begin, row_end, x, y);  // not reached: the caller checked the encoding
}

void DecodePackedRow(const WeightMatrix& W, int r, float* out) {
  if (W.encoding == WeightEncoding::kFp8) {
    if (W.fp8_format == Fp8Format::kE5M2) return DecodeFp8Row<Fp8Format::kE5M2>(W, r, out);
    return DecodeFp8Row<Fp8Format::kE4M3>(W, r, out);
  }
  switch (W.int4.scheme) {
    case Int4Scheme::kSymmetric:
      return DecodeInt4Row<Int4Scheme::kSymmetric>(W, r, out);
    case Int4Scheme::kAsymmetric:
      return DecodeInt4Row<Int4Scheme::kAsymmetric>(W, r, out);
    case Int4Scheme::kAsymmetricF16Zero:
      return DecodeInt4Row<Int4Scheme::kAsymmetricF16Zero>(W, r, out);
  }
}

}  // namespace plumb::kernels::avx2

#endif  // defined(__x86_64__)
