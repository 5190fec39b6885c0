// Finding and loading a model's files: a GGUF file, or a Hugging Face checkpoint directory (config.json and
// its safetensors files) (include/plumb/model/model.h, Model::Load).
#include "plumb/model/model.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "plumb/core/error.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;

// The safetensors files of a checkpoint directory: the shards named by the index, or model.safetensors.
std::vector<std::string> SafetensorsFilesIn(const fs::path& dir) {
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    nlohmann::json root;
    try {
      root = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw MakeError(index.string(), ": invalid JSON: ", e.what());
    }
    if (!root.contains("weight_map") || !root["weight_map"].is_object()) {
      throw MakeError(index.string(), ": missing object \"weight_map\"");
    }
    std::set<std::string> shards;
    for (const auto& [tensor, file] : root["weight_map"].items()) {
      if (!file.is_string())
        throw MakeError(index.string(), ": weight_map[\"", tensor, "\"] is not a file name");
      shards.insert((dir / file.get<std::string>()).string());
    }
    return {shards.begin(), shards.end()};
  }
  const fs::path single = dir / "model.safetensors";
  if (!fs::exists(single))
    throw MakeError(dir.string(), ": no model.safetensors or model.safetensors.index.json");
  return {single.string()};
}

}  // namespace

Model Model::FromGguf(const std::shared_ptr<const GgufFile>& file) {
  ModelConfig config = ConfigFromGguf(*file);
  ModelWeights weights = LoadGgufWeights(config, file);
  return Model(std::move(config), std::move(weights));
}

Model Model::Load(const std::string& path) {
  const fs::path p(path);
  if (!fs::exists(p)) throw MakeError(path, ": model path does not exist");
  if (p.extension() == ".gguf") return FromGguf(std::make_shared<const GgufFile>(GgufFile::Open(path)));
  const fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) throw MakeError(path, ": no config.json in ", dir.string());
  ModelConfig config = LoadConfigJson(config_path.string());
  std::vector<std::string> files =
      fs::is_directory(p) ? SafetensorsFilesIn(p) : std::vector<std::string>{path};
  ModelWeights weights = LoadSafetensorsWeights(config, files);
  return Model(std::move(config), std::move(weights));
}

}  // namespace plumb
