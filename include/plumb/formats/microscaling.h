// Microscaled weights: small blocks of FP4 or FP8 elements that share one scale each, as Blackwell's block-
// scaled MMAs read them. Layout, decoding and the quantizers: docs/formats.md ("Microscaled formats").
//
//   scheme       element          block  block scale  tensor scale
//   mxfp4        FP4 E2M1          32    E8M0         none           (OCP MX v1.0; gpt-oss)
//   nvfp4        FP4 E2M1          16    FP8 E4M3     FP32           (NVIDIA; TensorRT-LLM, vLLM)
//   mxfp8-e4m3   FP8 E4M3          32    E8M0         none           (OCP MX v1.0)
//   mxfp8-e5m2   FP8 E5M2          32    E8M0         none
//
// A matrix [rows][cols] stores, per row, its element codes (FP4 two to a byte, element 2i in the low nibble
// of byte i and 2i + 1 in the high one; FP8 one a byte), and one scale code per block of the row (a last
// block may be partial). Element c of row r is
//   Element(code) · BlockScale(scale code of block c / block size)
// which one FP32 multiplication computes exactly (it can only overflow, MXFP8 at scales near 2^127); NVFP4's
// tensor scale then multiplies each finished dot product, as a GPU kernel's epilogue applies it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace plumb {

enum class MicroscalingScheme : std::uint8_t { kMxfp4, kNvfp4, kMxfp8E4M3, kMxfp8E5M2 };

inline constexpr MicroscalingScheme kMicroscalingSchemes[] = {
    MicroscalingScheme::kMxfp4, MicroscalingScheme::kNvfp4, MicroscalingScheme::kMxfp8E4M3,
    MicroscalingScheme::kMxfp8E5M2};

// "mxfp4", "nvfp4", "mxfp8-e4m3", "mxfp8-e5m2": as `plumb pack --dtype` and the roofline spell them.
const char* MicroscalingSchemeName(MicroscalingScheme scheme);
// The scheme of that name; throws plumb::Error naming the schemes for any other.
MicroscalingScheme ParseMicroscalingScheme(std::string_view name);

int MicroscalingBlockSize(MicroscalingScheme scheme);  // 32, or 16 for NVFP4
bool MicroscalingElementIsFp4(MicroscalingScheme scheme);
int MicroscaledBlocks(MicroscalingScheme scheme, int cols);              // ⌈cols / block size⌉
std::size_t MicroscaledRowBytes(MicroscalingScheme scheme, int cols);    // ⌈cols / 2⌉ for FP4, else cols
float MicroscaledElement(MicroscalingScheme scheme, std::uint8_t code);
// Element c's code in a row's codes: byte c, or for FP4 the low (c even) or high (c odd) nibble of byte c
// / 2.
std::uint8_t MicroscaledElementCode(MicroscalingScheme scheme, const std::uint8_t* codes,
                                    std::int64_t c);                        // the element's value, exact
float MicroscaledBlockScale(MicroscalingScheme scheme, std::uint8_t code);  // the scale's value, exact

// Elements [begin, begin + count) of a row, decoded: out[i] = Element(element begin + i) · BlockScale(its
// block). `begin` is even (an FP4 byte boundary); `codes` and `scales` are the row's own.
void DecodeMicroscaledRow(MicroscalingScheme scheme, const std::uint8_t* codes, const std::uint8_t* scales,
                          std::int64_t begin, std::int64_t count, float* out);

// A quantized matrix and its scales (docs/formats.md, "Microscaled formats", for each scheme's rule).
struct MicroscaledMatrix {
  MicroscalingScheme scheme = MicroscalingScheme::kMxfp4;
  int rows = 0;
  int cols = 0;
  std::vector<std::uint8_t> codes;   // [rows][MicroscaledRowBytes]
  std::vector<std::uint8_t> scales;  // [rows][MicroscaledBlocks]
  float tensor_scale = 1.0f;         // NVFP4's; 1 for the MX schemes
};
// Quantizes w [rows][cols]: the MX schemes by the OCP v1.0 rule (the block's scale 2^(⌊log2 amax⌋ − emax of
// the element), elements rounded to nearest even and saturated), NVFP4 by the two-level rule of NVIDIA's
// Model Optimizer (tensor scale amax / (6 · 448), block scales in E4M3 rounded to nearest, elements to
// nearest even; plumb's FP32 arithmetic is its own, stated in the docs). Throws plumb::Error for a non-finite
// weight or a negative shape.
MicroscaledMatrix QuantizeMicroscaled(const float* w, int rows, int cols, MicroscalingScheme scheme);

}  // namespace plumb
