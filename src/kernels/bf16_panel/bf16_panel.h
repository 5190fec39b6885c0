// Prefill's BF16 GEMM for the float weight formats (internal to src/kernels/): the fast family's Gemm of an
// F32, F16, BF16 or FP8 matrix on a CPU with BF16 dot products (AVX512-BF16's vdpbf16ps), issue 53. x and
// the weights are rounded to BF16, each product of two BF16 values is exact in FP32, and the sums are FP32:
// twice the multiply-adds of an FP32 FMA per instruction. The engine declares it as bf16_activations (the
// fixture suite's allowance for matmul inputs rounded to BF16). docs/formats.md "BF16 panels" has the layout.
//
// The definition, one output y = Y[i][r] (x = row i of X, w = row r of W decoded exactly, both k long):
//   xb[e] = F32ToBF16(x[e]), wb[e] = F32ToBF16(w[e])   (round to nearest even, NaN → 0x7FFF; formats/dtype.h;
//            exact for BF16 and FP8 weights, a rounding for F32 and F16 ones), both padded with one +0 to
//            an even length 2P
//   acc = +0; for p = 0 .. P − 1:
//     acc = Ftz(fma(Daz(wb[2p + 1]), Daz(xb[2p + 1]), acc))     (the odd element of the pair first)
//     acc = Ftz(fma(Daz(wb[2p]),     Daz(xb[2p]),     acc))
//   y = acc, then × the row's scale where the format has one (FP8), one rounding (ApplyRowScales)
// Daz: a subnormal BF16 input read as zero of its sign; Ftz: a subnormal result written as zero of its sign.
// This is vdpbf16ps's lane as Intel's SDM defines it (two FMAs in that order, DAZ in, FTZ out, round to
// nearest even, MXCSR not read), which an AMD Zen 5 computes bit for bit (checked once over 3.2 M random
// lanes with subnormal and huge operands; fma_family_test holds the kernels to this definition, on the flush
// cases too). One chain per output, so a kernel may split k into blocks and carry acc
// through Y between them without changing a bit. NaN payloads are not part of the definition.
//
// Where AMX-BF16 runs the panels (bf16_panel_amx.cpp), the sums are its tile product's instead, tdpbf16ps as
// an Intel Xeon (Emerald Rapids) computes it, measured here since the SDM's pseudocode (one chain, even
// element first) is not what the hardware does (docs/formats.md, "BF16 tiles"). The same xb and wb, each
// padded with +0 pairs to a multiple of kTileBlockPairs, then per block of 16 pairs p0 .. p0 + 15:
//   even = +0, odd = +0; for p = p0 .. p0 + 15:
//     even = Ftz(fma(Daz(wb[2p]),     Daz(xb[2p]),     even))
//     odd  = Ftz(fma(Daz(wb[2p + 1]), Daz(xb[2p + 1]), odd))
//   acc = Ftz(acc + Ftz(even + odd))
// Two chains per block, joined once and added to acc; acc carries through memory between blocks as above.
// A CPU whose tdpbf16ps disagrees on the probe cases keeps the vdpbf16ps panels (TileSumsMismatch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels::bf16 {

// X[m][k] rounded to BF16 (xb above), each row P = ⌈k / 2⌉ words: word p holds element 2p in its low half
// and 2p + 1 in its high half, as vdpbf16ps reads a lane.
struct Bf16Rows {
  int m = 0, k = 0, pairs = 0;
  std::vector<std::uint32_t> words;  // [m][pairs]

  const std::uint32_t* Row(int i) const { return words.data() + static_cast<std::size_t>(i) * pairs; }
  std::uint32_t* Row(int i) { return words.data() + static_cast<std::size_t>(i) * pairs; }
  void Resize(int rows, int cols);
};

inline constexpr int kPanelRows = 16;  // weight rows interleaved in a group: one 512-bit register's lanes

// A tile of `groups` groups of kPanelRows weight rows (wb above): group g's word (p, j) = pair p of row
// 16g + j, at Group(g)[16p + j], so one 64-byte load is pair p of all 16 rows. Rows past the matrix are +0.
struct Panel {
  int groups = 0, pairs = 0;
  std::vector<std::uint32_t> storage;  // 64-byte aligned in use (Group)

  const std::uint32_t* Group(int g) const;
  std::uint32_t* Group(int g);
  void Resize(int group_count, int pair_count);
};

// Which definition a kernel's sums follow: vdpbf16ps's lanes or tdpbf16ps's blocks.
enum class Sums { kPairLanes, kTileBlocks };
inline constexpr int kTileBlockPairs = 16;  // a tile row's 64 bytes: the depth of one tdpbf16ps

// The definition's dot of one weight row and one x row, each `pairs` words as above: PairDot with the
// lanes' sums, TileDot with the tiles'.
float PairDot(const std::uint32_t* w, const std::uint32_t* x, int pairs);
float TileDot(const std::uint32_t* w, const std::uint32_t* x, int pairs);

// The definition's rounding of one row x[k] into its ⌈k / 2⌉ words at out; RoundRows: X's m rows into `out`
// (resized).
void RoundRow(const float* x, int k, std::uint32_t* out);
void RoundRows(const float* X, int m, int k, Bf16Rows& out);
// `rows` (≤ kPanelRows) exactly decoded rows of k floats at `decoded` (row stride k) into group g of
// `panel`, which Resize made for k's pairs.
void PackGroup(const float* decoded, int rows, int k, Panel& panel, int g);

// Y[i][r] (row stride ldy) for i < X.m and r in [row_begin, row_end): the definition, element by element,
// with W's row scale after. What the kernels are tested against.
void GemmDefinition(const WeightMatrix& W, int row_begin, int row_end, const Bf16Rows& X, float* Y,
                    std::size_t ldy, Sums sums = Sums::kPairLanes);

// An ISA's kernels: RoundRow's and PackGroup's bits, and the tile product: Y[i][r0 + 16g + j] for i < X.m,
// g < panel.groups and j < kPanelRows with r0 + 16g + j < rows_end, each the definition's acc (no row scale).
struct Kernels {
  void (*round_row)(const float* x, int k, std::uint32_t* out) = nullptr;
  void (*pack_group)(const float* decoded, int rows, int k, Panel& panel, int g) = nullptr;
  // PackGroup of rows r0 .. r0 + rows − 1 of W decoded, read from W's stored rows where W is GGUF F32, F16
  // or BF16 (true); false, with nothing written, for another format.
  bool (*pack_stored)(const WeightMatrix& W, int r0, int rows, Panel& panel, int g) = nullptr;
  void (*tile)(const Panel& panel, const Bf16Rows& X, int r0, int rows_end, float* Y,
               std::size_t ldy) = nullptr;
};

// AVX512-BF16's kernels (bf16_panel_avx512.cpp); null members on a CPU or build without it.
Kernels Avx512Bf16Kernels();

// AMX-BF16's GEMM (bf16_panel_amx.cpp): Y[m][W.rows] with the tiles' sums, W's rows as tdpbf16ps's first
// operand (read as stored where W is GGUF BF16, else decoded and rounded a tile of rows at a time) and X's
// rows packed as panels, its second. Null on a CPU or build without it.
using GemmFn = void (*)(const WeightMatrix& W, const float* X, int m, float* Y);
GemmFn AmxBf16Gemm();
// Why this CPU's tdpbf16ps does not compute TileDot on the probe cases (random pairs over a wide range of
// magnitudes, sums near the smallest normal, signed zeros), or "" where it does; "CPU lacks ..." where it
// has no AMX-BF16. Asked once, by the first caller.
const std::string& TileSumsMismatch();

// Whether kernels::Gemm of W runs the panels for a prefill (kernels.h, UsesBf16Panels): the fast family's
// float kernels cover W (UsesFmaRowDots), the active ISA is AVX-512 on a CPU with AVX512-BF16, and the
// environment does not say PLUMB_BF16=0 (an A/B of this path against FP32 on one host).
bool PanelsRun(const WeightMatrix& W);
// The same without the matrix: the ISA, the CPU and the environment allow the panels.
bool PanelsAvailable();
// The sums PanelGemm computes here: the tiles' where AMX-BF16 runs (TileSumsMismatch() empty, PLUMB_AMX not
// 0), else the lanes'.
Sums ActiveSums();
// Y[m][W.rows] = the definition with ActiveSums() for every (i, r), by AmxBf16Gemm or LanesGemm. W must
// pass PanelsRun.
void PanelGemm(const WeightMatrix& W, const float* X, int m, float* Y);
// The lanes' GEMM (AVX512-BF16): W's rows decoded, rounded and packed a tile at a time by the pool's
// threads, X rounded once. Where HasAvx512Bf16().
void LanesGemm(const WeightMatrix& W, const float* X, int m, float* Y);

}  // namespace plumb::kernels::bf16
