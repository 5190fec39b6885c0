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

ModelPathKind DetectModelPath(const std::string& path) {
  const fs::path p(path);
  std::error_code error;
  if (!fs::exists(p, error)) throw MakeError(path, ": model path does not exist");
  if (fs::is_directory(p, error)) return ModelPathKind::kCheckpointDir;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MakeError(path, ": cannot open the model file");
  unsigned char head[9] = {};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const auto got = static_cast<std::size_t>(in.gcount());
  if (got >= 4 && head[0] == 'G' && head[1] == 'G' && head[2] == 'U' && head[3] == 'F')
    return ModelPathKind::kGguf;
  // safetensors: the JSON header's length (little-endian u64; a header is never near 2^32 bytes), then '{'.
  if (got == 9 && head[8] == '{' && head[4] == 0 && head[5] == 0 && head[6] == 0 && head[7] == 0) {
    return ModelPathKind::kSafetensorsFile;
  }
  std::string bytes;
  for (std::size_t i = 0; i < got; ++i) {
    static const char* const kHex = "0123456789abcdef";
    bytes += i ? " " : "";
    bytes += kHex[head[i] >> 4];
    bytes += kHex[head[i] & 15];
  }
  throw MakeError(path, ": not a GGUF or safetensors file (",
                  got == 0 ? std::string("empty") : "first bytes " + bytes, ") and not a directory");
}

Model Model::Load(const std::string& path) {
  const ModelPathKind kind = DetectModelPath(path);
  if (kind == ModelPathKind::kGguf) return FromGguf(std::make_shared<const GgufFile>(GgufFile::Open(path)));
  const fs::path p(path);
  const fs::path dir = kind == ModelPathKind::kCheckpointDir ? p : p.parent_path();
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) {
    if (kind == ModelPathKind::kCheckpointDir) throw MakeError(path, ": a directory with no config.json");
    throw MakeError(path, ": a safetensors file with no config.json beside it in ", dir.string());
  }
  ModelConfig config = LoadConfigJson(config_path.string());
  std::vector<std::string> files =
      kind == ModelPathKind::kCheckpointDir ? SafetensorsFilesIn(p) : std::vector<std::string>{path};
  ModelWeights weights = LoadSafetensorsWeights(config, files);
  return Model(std::move(config), std::move(weights));
}

}  // namespace plumb
