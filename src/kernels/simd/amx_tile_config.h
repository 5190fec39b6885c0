// LDTILECFG's 64-byte operand (Intel SDM, "Tile configuration"), for the AMX kernels
// (ggml/int8_panel_amx.cpp, bf16_panel/bf16_panel_amx.cpp): palette 1, then each tile's bytes per row and its
// rows; a tile left at 0 is unused. Internal to src/kernels/.
#pragma once

#include <cstdint>

namespace plumb::kernels {

struct alignas(64) AmxTileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

}  // namespace plumb::kernels
