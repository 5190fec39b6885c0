#include "plumb/engine/model_identity.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "plumb/core/mapped_file.h"
#include "plumb/core/sha256.h"

namespace plumb {

std::string ModelFingerprint(const std::string& model_path) {
  namespace fs = std::filesystem;
  Sha256 sha;
  if (!fs::is_directory(model_path)) {
    sha.Update(MappedFile::Open(model_path).bytes());
    return sha.HexDigest();
  }
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(model_path)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.ends_with(".safetensors")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.insert(names.begin(), "config.json");
  for (const std::string& name : names) {
    sha.Update({reinterpret_cast<const std::uint8_t*>(name.data()), name.size() + 1});  // with its 0 byte
    sha.Update(MappedFile::Open((fs::path(model_path) / name).string()).bytes());
  }
  return sha.HexDigest();
}

KvHandoffModel ModelIdentity(const ModelConfig& config, const std::string& model_path) {
  KvHandoffModel m;
  m.architecture = config.model_type;
  m.n_layers = config.num_layers;
  m.n_heads = config.num_heads;
  m.n_kv_heads = config.num_kv_heads;
  m.head_dim = config.head_dim;
  m.hidden_size = config.hidden_size;
  m.vocab_size = config.vocab_size;
  m.weights_sha256 = ModelFingerprint(model_path);
  return m;
}

}  // namespace plumb
