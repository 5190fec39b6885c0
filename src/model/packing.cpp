// Names of the packed weight formats (docs/formats.md "Packed checkpoints").
#include "plumb/model/packing.h"

namespace plumb {
namespace {

std::vector<PackFormat> AllFormats() {
  std::vector<PackFormat> all(3);
  all[0].kind = PackKind::kF32;
  all[1].kind = PackKind::kF16;
  all[2].kind = PackKind::kBF16;
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    PackFormat& p = all.emplace_back();
    p.kind = PackKind::kFp8;
    p.fp8 = f;
  }
  for (Int4Scheme s : {Int4Scheme::kSymmetric, Int4Scheme::kAsymmetric, Int4Scheme::kAsymmetricF16Zero}) {
    for (int g : {32, 64, 128}) {
      PackFormat& p = all.emplace_back();
      p.kind = PackKind::kInt4;
      p.int4 = {s, g};
    }
  }
  for (MicroscalingScheme scheme : kMicroscalingSchemes) {
    PackFormat& p = all.emplace_back();
    p.kind = PackKind::kMicroscaled;
    p.mx = scheme;
  }
  all.emplace_back().kind = PackKind::kBlockFp8;
  return all;
}

}  // namespace

std::string PackFormat::Name() const {
  switch (kind) {
    case PackKind::kF32:
      return "f32";
    case PackKind::kF16:
      return "f16";
    case PackKind::kBF16:
      return "bf16";
    case PackKind::kFp8:
      return std::string("fp8-") + Fp8FormatName(fp8);
    case PackKind::kInt4:
      return std::string("int4-") + Int4SchemeName(int4.scheme) + "-g" + std::to_string(int4.group_size);
    case PackKind::kMicroscaled:
      return MicroscalingSchemeName(mx);
    case PackKind::kBlockFp8:
      return "fp8-block128";
  }
  return "?";
}

std::optional<PackFormat> ParsePackFormat(std::string_view name) {
  for (const PackFormat& f : AllFormats()) {
    if (f.Name() == name) return f;
  }
  return std::nullopt;
}

const std::vector<std::string>& PackFormatNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const PackFormat& f : AllFormats()) out.push_back(f.Name());
    return out;
  }();
  return names;
}

}  // namespace plumb
