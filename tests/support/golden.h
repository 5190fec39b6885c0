// Reads a golden fixture directory (docs/fixtures-golden-format.md): manifest.json + golden.safetensors.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/safetensors.h"

namespace plumb::testing {

inline std::string FixtureDir(const std::string& name) {
  return std::string(PLUMB_SOURCE_DIR) + "/fixtures/" + name;
}

struct GoldenCheck {
  std::string metric;  // "max_abs_err/max_abs_ref" or "exact"
  double threshold = 0;
};

class GoldenFixture {
 public:
  explicit GoldenFixture(const std::string& dir)
      : GoldenFixture(dir, dir + "/manifest.json", dir + "/golden.safetensors") {}
  // A fixture whose files have other names (e.g. fixtures/tiny-llama/gguf-goldens/model.q4_1.*).
  GoldenFixture(const std::string& dir, const std::string& manifest, const std::string& golden)
      : dir_(dir), golden_(SafetensorsFile::Open(golden)) {
    std::ifstream in(manifest);
    if (!in) throw MakeError(manifest, ": cannot open");
    manifest_ = nlohmann::json::parse(in);
    if (manifest_.contains("prompt_ids")) {
      for (int id : manifest_.at("prompt_ids")) prompt_ids_.push_back(id);
    }
  }

  const std::string& dir() const { return dir_; }
  const std::vector<int>& prompt_ids() const { return prompt_ids_; }
  int greedy_steps() const { return manifest_.at("greedy").at("steps").get<int>(); }

  std::vector<std::string> TensorNames() const {
    std::vector<std::string> names;
    for (const auto& t : manifest_.at("tensors")) names.push_back(t.at("name").get<std::string>());
    return names;
  }
  GoldenCheck Check(const std::string& name) const {
    for (const auto& t : manifest_.at("tensors")) {
      if (t.at("name") == name)
        return {t.at("check").at("metric"), t.at("check").at("threshold").get<double>()};
    }
    throw MakeError(dir_, "/manifest.json: no tensor ", name);
  }
  // Float tensors, stored as F64 or (smollm2, to stay small) F32.
  std::vector<double> Values(const std::string& name) const {
    if (golden_.Info(name).dtype == DType::F32) {
      const std::vector<float> values = golden_.ReadF32(name);
      return {values.begin(), values.end()};
    }
    return golden_.ReadF64(name);
  }
  const nlohmann::json& manifest() const { return manifest_; }
  std::vector<int> Ids(const std::string& name) const {
    const std::vector<std::int32_t> ids = golden_.ReadI32(name);
    return {ids.begin(), ids.end()};
  }

 private:
  std::string dir_;
  SafetensorsFile golden_;
  nlohmann::json manifest_;
  std::vector<int> prompt_ids_;
};

// The manifest's metric: max_i |actual_i − ref_i| / max_i |ref_i|.
inline double MaxAbsErrOverMaxAbsRef(std::span<const float> actual, std::span<const double> ref) {
  if (actual.size() != ref.size()) return INFINITY;
  double max_err = 0, max_ref = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(actual[i] - ref[i]);
    max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
    max_ref = std::max(max_ref, std::fabs(ref[i]));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

// "1.63e-06": an error for RecordProperty (which would truncate a double to an integer).
inline std::string FormatError(double error) {
  std::ostringstream out;
  out << std::setprecision(3) << error;
  return out.str();
}

}  // namespace plumb::testing
