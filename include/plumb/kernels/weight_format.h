// WeightFormat: one weight format's codec, everything the kernels need to compute with a matrix stored in
// it, in one descriptor. A WeightMatrix (kernels/weight_matrix.h) holds a pointer to its format's descriptor
// and the data; Gemv, Gemm, GemvBatch and DequantizeRowOf look their kernels up in it and never ask which
// format they hold.
//
// The formats (docs/formats.md has every bit of each):
//   kGgmlFormat  plain FP32/FP16/BF16 rows and GGUF blocks (Q8_0, Q4_0, Q4_1, ... Q6_K); W.type says which.
//                src/kernels/ggml/.
//   kFp8Format   one FP8 code per element and an FP32 scale per row or per matrix. src/kernels/fp8/.
//   kInt4Format  4-bit codes in groups with FP16 scales (and zero points). src/kernels/int4/.
//   kMicroscaledFormat  MXFP4, NVFP4, MXFP8: FP4/FP8 codes in blocks sharing an E8M0 or E4M3 scale.
//                src/kernels/microscaled/.
//   kBlockFp8Format  fp8-block128: E4M3 codes with an FP32 scale per 128 × 128 block (DeepSeek-V3).
//                src/kernels/block_fp8/.
// WeightFormats() lists them; a new format is a folder of its own and one line there
// (docs/architecture.md, "How to add a weight format").
//
// The exact family. Every format's kernels compute its definition bit for bit, on every ISA:
//   row_dots     y[r] = RowScale(W, r) · scalar::Dot(row r decoded, x, W.cols), r in [row_begin, row_end)
//                (RowScale is 1 where the format has no row_scale; kernels/scalar.h gives Dot's order)
//   decode_rows  rows [r0, r0 + count) decoded exactly, without the row scale, at out + i · W.cols: the
//                tiles of the batched GEMMs (small_gemm.h, kernels::Gemm), which then apply the row scale
//                to the finished dots as row_dots does.
// kernels[Isa::kScalar] is the definition, written as plain C++, its row_dots and decode_rows always set;
// an ISA's entry may be null, and KernelsFor then takes the next one down (avx512 → avx2 → scalar,
// neon → scalar).
//
// The fast family (int8_row_dots: x quantized to int8 once per GEMV, kernels/int8_activations.h, integer
// dot products; issue 17) is a second set of kernels in the same descriptor, with a scalar definition of its
// own that its variants match bit for bit, judged against the exact family by the fixture suite's
// tolerances. has_int8 says which matrices of a format it covers (GGUF Q4_0 … Q8_0 and the K-quants, packed
// INT4; docs/architecture.md "Weight formats").
//   int8_row_dots  y[r] for r in [row_begin, row_end): the format's int8 definition, one x
//   int8_gemm      Y[i][r] (row stride ldy) for i < m and r in [row_begin, row_end): bitwise
//                  int8_row_dots(W, row_begin, row_end, xs[i], row i of Y) for every i, with no definition
//                  of its own. It exists for batched decode (kernels::Gemm, GemvBatch): a variant prepares
//                  each weight block's codes once and dots them with several x rows (INT4 on x86), or runs
//                  the row dots per x row over chunks of weight rows still in cache (the GGUF types, whose
//                  definition leaves one FMA per 8 blocks to share). The scalar entry is the plain loop
//                  over the scalar int8_row_dots (Int8GemmByRows).
//   int8_panel_gemm  the same contract as int8_gemm, for many x rows (prefill, kernels::Gemm): the GGUF
//                  types' rows repacked per call into panels of 16 interleaved rows that one vector
//                  instruction takes for all 16 (src/kernels/ggml/int8_panel.h), so the repacking pays
//                  only once many x rows share it. Null for a format without (INT4): Gemm then decodes
//                  tiles. The scalar entry is the definition's loop, so every host gives the same bits.
// The fast family's float formats (F32, F16, BF16 and FP8: fma_row_dots, x kept in FP32) decode each weight
// exactly, as the exact family does, and sum with fused multiply-adds in 32 lanes (kernels/simd/fma_dot.h
// states the order); has_fma says which matrices. A matrix in neither set runs the exact family.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/isa.h"

namespace plumb {
struct WeightMatrix;
}  // namespace plumb

namespace plumb::kernels {

using RowDotsFn = void (*)(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
using DecodeRowsFn = void (*)(const WeightMatrix& W, int r0, int count, float* out);

using Int8RowDotsFn = void (*)(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x,
                               float* y);
using Int8GemmFn = void (*)(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs,
                            int m, float* Y, std::size_t ldy);

// The int8_gemm that is its definition: `kDots` over rows [row_begin, row_end) for each x row in turn.
template <Int8RowDotsFn kDots>
void Int8GemmByRows(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m,
                    float* Y, std::size_t ldy) {
  for (int i = 0; i < m; ++i) kDots(W, row_begin, row_end, xs[i], Y + static_cast<std::size_t>(i) * ldy);
}

// The same loop a chunk of 32 weight rows at a time, so that the chunk's blocks are still in cache for the
// next x row: the GGUF types' int8_gemm, whose definition leaves a multi-row kernel little to share.
template <Int8RowDotsFn kDots>
void Int8GemmByRowChunks(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m,
                         float* Y, std::size_t ldy) {
  constexpr int kChunkRows = 32;
  for (int r = row_begin; r < row_end; r += kChunkRows) {
    const int end = r + kChunkRows < row_end ? r + kChunkRows : row_end;
    Int8GemmByRows<kDots>(W, r, end, xs, m, Y, ldy);
  }
}

// One ISA's kernels for one format. Null: not written for this ISA (see KernelsFor).
struct FormatKernels {
  RowDotsFn row_dots = nullptr;
  DecodeRowsFn decode_rows = nullptr;
  Int8RowDotsFn int8_row_dots = nullptr;  // the fast family, for the formats has_int8 covers
  Int8GemmFn int8_gemm = nullptr;         // the fast family, several x rows (see above)
  Int8GemmFn int8_panel_gemm = nullptr;   // the fast family, many x rows: prefill (see above)
  RowDotsFn fma_row_dots = nullptr;       // the fast family, for the formats has_fma covers
};

constexpr int kIsaCount = 4;  // the values of Isa

struct WeightFormat {
  const char* name;  // the family: "ggml", "fp8", "int4", "microscaled", "block-fp8"
  // This matrix's element format as `plumb pack --dtype` and the roofline spell it: "Q4_1", "F16",
  // "fp8-e4m3", "int4-asym-g128", "mxfp4".
  std::string (*describe)(const WeightMatrix& W);
  // Bytes the matrix keeps besides its rows (rows × row_bytes): scales and zero points.
  std::size_t (*side_bytes)(const WeightMatrix& W);
  // The factor row_dots multiplies row r's finished dot by (FP8's scale); null where there is none.
  float (*row_scale)(const WeightMatrix& W, int r);
  // Whether the fast family's int8_row_dots cover W; null: no matrix of this format.
  bool (*has_int8)(const WeightMatrix& W);
  // Whether the vector int8_gemm variants take W's weight blocks once for several x rows (rather than
  // running int8_row_dots per x row, as they do for the rest of has_int8); null: for no matrix.
  bool (*has_int8_gemm)(const WeightMatrix& W);
  // What has_int8 covers, for help and error text ("GGUF Q4_0, Q4_1, ..."); null where has_int8 is.
  const char* int8_covers;
  // Whether the fast family's fma_row_dots cover W (its float formats); null: no matrix of this format.
  bool (*has_fma)(const WeightMatrix& W);
  const char* fma_covers;  // what has_fma covers, for help and error text; null where has_fma is
  // Indexed by Isa. [Isa::kScalar] is the definition: every member set.
  std::array<FormatKernels, kIsaCount> kernels;
};

// Every weight format plumb computes with, in one table.
extern const WeightFormat kGgmlFormat;
extern const WeightFormat kFp8Format;
extern const WeightFormat kInt4Format;
extern const WeightFormat kMicroscaledFormat;
extern const WeightFormat kBlockFp8Format;
std::span<const WeightFormat* const> WeightFormats();

// The kernels `format` runs with on `isa`: each member the ISA's own, or the next one down that has it
// (avx512 → avx2 → scalar; neon → scalar). int8_gemm stops at the ISA that int8_row_dots comes from: where
// that one has no int8_gemm it is null, and the caller runs int8_row_dots per x row (Int8GemmOf does), rather
// than a lower ISA's slower loop.
FormatKernels KernelsFor(const WeightFormat& format, Isa isa);

// Every format's int8_covers, joined: the weight types the fast family has int8 kernels for.
std::string Int8Coverage();
// Every format's fma_covers, joined: the float weight types the fast family runs with FMA.
std::string FmaCoverage();

// W's row_dots on ActiveIsa(): y[row_begin .. row_end) written, as defined above. Throws plumb::Error for a
// row range outside the matrix.
void RowDotsOf(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
// W's decode_rows on ActiveIsa(). Throws plumb::Error for rows outside the matrix.
void DecodeRowsOf(const WeightMatrix& W, int r0, int count, float* out);
// Whether W runs the fast family's kernels: ActiveFamily() is kFast, W is not exact_only, and its format
// has int8 kernels for it.
bool UsesInt8RowDots(const WeightMatrix& W);
// Whether W's exact row dots are vector code on every ISA plumb builds (AVX2, AVX-512, NEON), so that keeping
// a matrix exact in the fast family costs little: every FP8 and INT4 matrix, and GGUF F32, F16, BF16, Q4_0,
// Q4_1 and Q8_0; not the other GGUF types (the K-quants, Q5_0, Q5_1), whose exact kernels are the scalar
// definition. Depends on W's type only, never on the CPU, so a choice made with it keeps the fast family's
// bits the same on every host. The model keeps its LM head exact where this holds (model.cpp).
bool ExactRowDotsAreVectorized(const WeightMatrix& W);
// Whether W runs the fast family's FMA kernels: ActiveFamily() is kFast, W is not exact_only, and its format
// has FMA kernels for it. (No matrix is covered by both has_int8 and has_fma.)
bool UsesFmaRowDots(const WeightMatrix& W);
// W's fma_row_dots on ActiveIsa(): y[r] = RowScale(W, r) · FmaDot(row r decoded, x) (kernels/simd/fma_dot.h)
// for r in [row_begin, row_end). Throws plumb::Error when W's format has none for W, or for rows outside it.
void FmaRowDotsOf(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
// Whether GemvBatch of `rows` rows is faster than Gemm's decoded tiles: the fast family runs W's int8
// kernels, the active ISA has an int8_gemm (WeightFormat::has_int8_gemm: GGUF Q4_0 … Q8_0 on AVX2, AVX-512
// VNNI and NEON, INT4 on AVX2 and VNNI; not the K-quants), and rows ≤ kInt8BatchMaxRows. So a step of that
// many sequences' decodes (Model::Step, a token each) takes GemvBatch where this holds. Measured on x86 when
// the GGUF int8_gemm prepared each block once for all rows (before the one-FMA-per-block definition; not
// re-measured since), each SmolLM2-135M Q4_1 projection shape and its Q8_0 LM head timed alone, 1 thread,
// against small_gemm: AVX-512 VNNI 0.63-0.78 of its time at 4 rows, 0.75-0.94 at 16; AVX2 0.66-0.74 at 4,
// 0.84-1.05 at 16 (and 32 rows are no faster: bench/batch_gemm_bench). NEON's are not measured yet.
bool Int8BatchPays(const WeightMatrix& W, int rows);
inline constexpr int kInt8BatchMaxRows = 16;
// W's int8_row_dots on ActiveIsa() over x quantized by QuantizeActivations (x.n == W.cols). Throws
// plumb::Error when W's format has none for W, or for rows outside the matrix.
void Int8RowDotsOf(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y);
// Y[i][r] = int8_row_dots(W, r, xs[i]) for i < m and r in [row_begin, row_end) (row stride ldy) on
// ActiveIsa(): its int8_gemm, or int8_row_dots per x row where it has none. Throws plumb::Error as
// Int8RowDotsOf does, for any xs[i].
void Int8GemmOf(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
                std::size_t ldy);
// The batched GEMMs' epilogue: Y[i][r] = row_scale(W, r) · Y[i][r] for i < m and r in [r0, r0 + count)
// (row stride ldy), one rounded multiply each; nothing for a format without a row_scale. Each row's scale is
// looked up once, not once per Y row.
void ApplyRowScales(const WeightMatrix& W, int r0, int count, float* Y, int m, std::size_t ldy);

}  // namespace plumb::kernels
