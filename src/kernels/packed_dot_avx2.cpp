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

// The eight lanes of acc, plus columns [full, cols) of the row added lane by lane (w(c) gives the weight),
// reduced: scalar::Dot's tail and reduction.
template <class Weight>
PLUMB_AVX2 float Finish(__m256 acc, int full, int cols, const float* x, Weight w) {
  alignas(32) float lane[8];
  _mm256_store_ps(lane, acc);
  for (int c = full; c < cols; ++c) lane[c - full] += w(c) * x[c];
  return ReduceLanes(lane);
}

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

// All-ones bytes where the 32 E4M3 codes at p are NaN (S.1111.111), zero elsewhere.
PLUMB_AVX2 inline __m256i E4M3NanCodes(const std::uint8_t* p) {
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_cmpeq_epi8(_mm256_or_si256(bytes, _mm256_set1_epi8(static_cast<char>(0x80))),
                           _mm256_set1_epi8(static_cast<char>(0xFF)));
}

// kScaleX: E4M3 with x pre-multiplied by 2^8 (see the top of the file); otherwise E4M3 weights are
// multiplied by 2^8 themselves. E5M2 ignores it.
//
// E4M3 NaN codes: the definition's dot of a row holding one is NaN whatever x is (NaN · x is NaN, and a NaN
// lane makes the sum NaN). So the vector loop decodes them as finite values, notes per row whether it met
// one (a byte compare over 32 codes at a time, cheaper than patching each decoded weight), and the row's
// result is then NaN. Columns past the last multiple of 32 go through the decode table, which has the NaNs.
template <Fp8Format F, bool kScaleX, int R>
PLUMB_AVX2 void Fp8Dots(const WeightMatrix& W, int r0, const float* x, float* y) {
  constexpr bool kE4M3 = F == Fp8Format::kE4M3;
  const int cols = W.cols;
  const __m256 two8 = _mm256_set1_ps(256.0f);
  const std::uint8_t* row[R];
  __m256 acc[R];
  __m256i nan[R];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    acc[r] = _mm256_setzero_ps();
    nan[r] = _mm256_setzero_si256();
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
      if constexpr (kE4M3) nan[r] = _mm256_or_si256(nan[r], E4M3NanCodes(row[r] + c));
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
  // Up to three more whole vectors, then the tail, through the decode table (exact values, NaNs included).
  const float* table = Fp8DecodeTable(F);
  const int full = cols - cols % 8;
  for (int r = 0; r < R; ++r) {
    for (int c = full32; c < full; c += 8) {
      alignas(32) float w[8];
      for (int j = 0; j < 8; ++j) w[j] = table[row[r][c + j]];
      acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(_mm256_load_ps(w), _mm256_loadu_ps(x + c)));
    }
    const std::uint8_t* codes = row[r];
    float dot = Finish(acc[r], full, cols, x, [&](int c) { return table[codes[c]]; });
    if (kE4M3 && !_mm256_testz_si256(nan[r], nan[r])) dot = table[0x7F];  // NaN, as the definition gives
    y[r0 + r] = W.fp8_scales[W.fp8_per_row ? r0 + r : 0] * dot;
  }
}

// True when 2^8·x[i] is exact for every i: no finite element of magnitude 2^120 or more.
PLUMB_AVX2 bool CanScaleX(const float* x, int n) {
  const __m256 limit = _mm256_set1_ps(0x1p120f);
  const __m256 inf = _mm256_set1_ps(__builtin_inff());
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 bad = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
    bad = _mm256_or_ps(bad,
                       _mm256_and_ps(_mm256_cmp_ps(a, limit, _CMP_GE_OQ), _mm256_cmp_ps(a, inf, _CMP_LT_OQ)));
  }
  bool ok = _mm256_movemask_ps(bad) == 0;
  for (; i < n; ++i) {
    const float a = __builtin_fabsf(x[i]);
    ok = ok && !(a >= 0x1p120f && a < __builtin_inff());
  }
  return ok;
}

// ---- INT4 -------------------------------------------------------------------------------------------

inline std::uint32_t ReadU32(const std::uint8_t* p) {
  std::uint32_t value;
  std::memcpy(&value, p, sizeof value);  // little-endian, as the layout: column c at bits 4c..4c+3
  return value;
}

// A group's parameters as vectors, and the decoding of 8 columns from their 32-bit word (nibble i is column
// i of the 8, at bits 4i..4i+3). Every step is exact (4-bit codes, 11-bit scales) but the f16-zero scheme's
// subtraction, which is done as the definition does it; so the weights are the definition's to the bit.
template <Int4Scheme S>
struct Int4Group {
  __m256 scale{};   // sym: s·2^-28 (see Decode); else s
  __m256i zero{};   // kAsymmetric
  __m256 zero_f{};  // kAsymmetricF16Zero

  PLUMB_AVX2 __m256 Decode(const std::uint8_t* p) const {
    const __m256i w = _mm256_set1_epi32(static_cast<int>(ReadU32(p)));
    if constexpr (S == Int4Scheme::kSymmetric) {
      // Nibble i to the top of lane i and masked: the two's-complement q·2^28, converted exactly; the 2^-28
      // is in the scale (exact: s ≥ 2^-24), so the product is float(q)·s. (A mask instead of an arithmetic
      // shift back: shifts have fewer ports.)
      const __m256i top = _mm256_sllv_epi32(w, _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0));
      const __m256i q = _mm256_and_si256(top, _mm256_set1_epi32(static_cast<int>(0xF0000000u)));
      return _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale);
    } else {
      const __m256i q = _mm256_and_si256(_mm256_srlv_epi32(w, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                         _mm256_set1_epi32(0xF));
      if constexpr (S == Int4Scheme::kAsymmetric) {
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, zero)), scale);
      } else {
        return _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(q), zero_f), scale);
      }
    }
  }
};

// The parameters of 8 consecutive groups g8 .. g8+7 of one row, converted together (one F16C conversion
// for 8 scales instead of 8), from which each group's vectors are one permute away.
template <Int4Scheme S>
struct Int4Groups8 {
  __m256 scales;
  __m256i zeros;   // kAsymmetric
  __m256 zeros_f;  // kAsymmetricF16Zero

  PLUMB_AVX2 void Load(const WeightMatrix& W, int r, int g8, int groups, std::size_t zero_row) {
    const std::uint16_t* s = W.int4_scales + static_cast<std::size_t>(r) * groups + g8;
    const std::uint8_t* z = W.int4_zeros + static_cast<std::size_t>(r) * zero_row;
    if (g8 + 8 <= groups) {
      scales = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
      if constexpr (S == Int4Scheme::kAsymmetric) {  // 8 zero nibbles: bytes g8/2 .. g8/2 + 3
        const __m256i w = _mm256_set1_epi32(static_cast<int>(ReadU32(z + g8 / 2)));
        zeros = _mm256_and_si256(_mm256_srlv_epi32(w, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                 _mm256_set1_epi32(0xF));
      } else if constexpr (S == Int4Scheme::kAsymmetricF16Zero) {
        zeros_f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(z + 2 * std::size_t(g8))));
      }
    } else {  // the row's last, partial block of groups: read no further than the arrays go
      alignas(32) float sf[8] = {}, zf[8] = {};
      alignas(32) int zi[8] = {};
      for (int j = 0; g8 + j < groups; ++j) {
        sf[j] = _cvtsh_ss(s[j]);
        if constexpr (S == Int4Scheme::kAsymmetric) zi[j] = static_cast<int>(Int4Code(z, g8 + j));
        if constexpr (S == Int4Scheme::kAsymmetricF16Zero)
          zf[j] = _cvtsh_ss(ReadU16(z + 2 * std::size_t(g8 + j)));
      }
      scales = _mm256_load_ps(sf);
      zeros = _mm256_load_si256(reinterpret_cast<const __m256i*>(zi));
      zeros_f = _mm256_load_ps(zf);
    }
    if constexpr (S == Int4Scheme::kSymmetric) scales = _mm256_mul_ps(scales, _mm256_set1_ps(0x1p-28f));
  }

  PLUMB_AVX2 Int4Group<S> Select(int j) const {
    const __m256i index = _mm256_set1_epi32(j);
    Int4Group<S> group;
    group.scale = _mm256_permutevar8x32_ps(scales, index);
    if constexpr (S == Int4Scheme::kAsymmetric) group.zero = _mm256_permutevar8x32_epi32(zeros, index);
    if constexpr (S == Int4Scheme::kAsymmetricF16Zero)
      group.zero_f = _mm256_permutevar8x32_ps(zeros_f, index);
    return group;
  }
};

// The definition's weight of column c of row r (formats/int4.h), for the few columns past the last whole
// vector of a row.
float Int4Weight(const WeightMatrix& W, int r, int c) {
  const int G = W.int4.group_size, g = c / G;
  const float s = F16ToF32(W.int4_scales[static_cast<std::size_t>(r) * Int4Groups(W.cols, G) + g]);
  const unsigned n = Int4Code(W.Row(r), c);
  const std::uint8_t* z = W.int4_zeros + static_cast<std::size_t>(r) * Int4ZeroRowBytes(W.int4, W.cols);
  switch (W.int4.scheme) {
    case Int4Scheme::kSymmetric:
      return static_cast<float>(static_cast<int>(n ^ 8u) - 8) * s;
    case Int4Scheme::kAsymmetric:
      return static_cast<float>(static_cast<int>(n) - static_cast<int>(Int4Code(z, g))) * s;
    case Int4Scheme::kAsymmetricF16Zero:
      return (static_cast<float>(n) - F16ToF32(ReadU16(z + 2 * static_cast<std::size_t>(g)))) * s;
  }
  return 0.0f;
}

template <Int4Scheme S, int R>
PLUMB_AVX2 void Int4Dots(const WeightMatrix& W, int r0, const float* x, float* y) {
  const int cols = W.cols;
  const int G = W.int4.group_size;
  const int groups = Int4Groups(cols, G);
  const std::size_t zero_row = Int4ZeroRowBytes(W.int4, cols);
  const int full = cols - cols % 8;
  const std::uint8_t* row[R];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    acc[r] = _mm256_setzero_ps();
  }
  for (int g8 = 0; g8 * G < full; g8 += 8) {
    Int4Groups8<S> params[R];
    for (int r = 0; r < R; ++r) params[r].Load(W, r0 + r, g8, groups, zero_row);
    for (int j = 0; j < 8 && (g8 + j) * G < full; ++j) {
      Int4Group<S> group[R];
      const int begin = (g8 + j) * G;
      for (int r = 0; r < R; ++r) {
        group[r] = params[r].Select(j);
        Prefetch(row[r], R * W.row_bytes + begin / 2);
      }
      const int end = begin + G < full ? begin + G : full;
      for (int c = begin; c < end; c += 8) {
        const __m256 xv = _mm256_loadu_ps(x + c);
        for (int r = 0; r < R; ++r) {
          acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(group[r].Decode(row[r] + c / 2), xv));
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    y[r0 + r] = Finish(acc[r], full, cols, x, [&](int c) { return Int4Weight(W, r0 + r, c); });
  }
}

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
      const Int4Group<S> group = params.Select(j);
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
