#include "plumb/formats/ggml_types.h"

#include <array>
#include <cstdlib>

namespace plumb {
namespace {

struct Row {
  std::uint32_t id;
  GgmlTypeTraits traits;
};

// Block sizes as gguf-py's GGML_QUANT_SIZES gives them (checked against it by tools/reference).
constexpr std::array<Row, 32> kTypes = {{
    {0, {"F32", 1, 4}},         {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},      {6, {"Q5_0", 32, 22}},      {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},      {9, {"Q8_1", 32, 40}},      {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}},   {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},   {15, {"Q8_K", 256, 292}},   {16, {"IQ2_XXS", 256, 66}},
    {17, {"IQ2_XS", 256, 74}},  {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},
    {20, {"IQ4_NL", 32, 18}},   {21, {"IQ3_S", 256, 110}},  {22, {"IQ2_S", 256, 82}},
    {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},         {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},        {27, {"I64", 1, 8}},        {28, {"F64", 1, 8}},
    {29, {"IQ1_M", 256, 56}},   {30, {"BF16", 1, 2}},       {34, {"TQ1_0", 256, 54}},
    {35, {"TQ2_0", 256, 66}},   {39, {"MXFP4", 32, 17}},
}};

}  // namespace

std::optional<GgmlTypeTraits> FindGgmlType(std::uint32_t id) {
  for (const Row& row : kTypes) {
    if (row.id == id) return row.traits;
  }
  return std::nullopt;
}

GgmlTypeTraits GgmlTraits(GgmlType type) {
  std::optional<GgmlTypeTraits> traits = FindGgmlType(static_cast<std::uint32_t>(type));
  if (!traits) std::abort();  // every enumerator is in the table
  return *traits;
}

}  // namespace plumb
