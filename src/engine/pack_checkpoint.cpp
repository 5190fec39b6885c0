// A packed checkpoint directory from any model plumb loads (include/plumb/engine/pack_checkpoint.h).
#include "plumb/engine/pack_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "plumb/core/error.h"
#include "plumb/engine/text_model.h"
#include "plumb/formats/gguf.h"
#include "plumb/formats/safetensors.h"
#include "plumb/model/config.h"
#include "plumb/tokenizer/tokenizer_export.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;

// The names a packed checkpoint consists of; overwriting removes these (and other safetensors shards).
bool IsOutputName(const fs::path& file) {
  const std::string name = file.filename().string();
  return name == "config.json" || name == "tokenizer.json" || name == "tokenizer.gguf" ||
         name == "tokenizer_config.json" || name == "model.safetensors.index.json" ||
         file.extension() == ".safetensors";
}

void PrepareOutDir(const fs::path& dir, bool overwrite) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw MakeError("--out ", dir.string(), ": exists and is not a directory");
  }
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    if (!overwrite)
      throw MakeError("--out ", dir.string(), ": directory is not empty (use --force to write into it)");
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      if (entry.is_regular_file() && IsOutputName(entry.path())) fs::remove(entry.path());
    }
  }
  fs::create_directories(dir, ec);
  if (ec) throw MakeError("--out ", dir.string(), ": cannot create the directory: ", ec.message());
  if (access(dir.c_str(), W_OK) != 0) throw MakeError("--out ", dir.string(), ": directory is not writable");
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) throw MakeError("cannot write ", path.string());
}

// The directory a Hugging Face model path's tokenizer files lie in, or "" for a GGUF file.
fs::path HfDir(const std::string& model_path) {
  const fs::path p(model_path);
  switch (DetectModelPath(model_path)) {  // by content, as Model::Load
    case ModelPathKind::kGguf:
      return {};
    case ModelPathKind::kCheckpointDir:
      return p;
    case ModelPathKind::kSafetensorsFile:
      break;
  }
  return p.parent_path();
}

}  // namespace

PackedCheckpointSummary WritePackedCheckpoint(const std::string& model_path, const std::string& out_dir,
                                              const PackOptions& options, bool overwrite,
                                              const std::function<void(const PackProgress&)>& progress) {
  const fs::path out(out_dir);
  if (!fs::exists(model_path)) throw MakeError("--model ", model_path, ": does not exist");
  const fs::path hf_dir = HfDir(model_path);
  std::error_code ec;
  if (!hf_dir.empty() && fs::equivalent(hf_dir, out, ec)) {
    throw MakeError("--out ", out_dir, ": is the model's own directory; write the packed model elsewhere");
  }

  const TextModel loaded = TextModel::Load(model_path);
  // A GGUF source's tokenizer: tokenizer.json for byte-level BPE, tokenizer.gguf for SentencePiece
  // (tokenizer_export.h says why). The metadata is read again: TextModel keeps the spec, not the keys.
  std::vector<TokenizerFile> exported;
  if (hf_dir.empty() && loaded.tokenizer) exported = ExportGgufTokenizer(GgufFile::Open(model_path));
  PrepareOutDir(out, overwrite);

  PackedCheckpoint packed = PackModel(loaded.model.config(), loaded.model.weights(), options, progress);
  // tokenizer.json has no end-of-turn field: the GGUF's EOT goes among the ids plumb stops on.
  // (tokenizer.gguf keeps it, but config.json's list is what other tools read, so it goes there for either
  // tokenizer.)
  if (!exported.empty() && loaded.tokenizer->spec().eot_id >= 0) {
    std::vector<int>& eos = packed.config.eos_token_ids;
    const int eot = loaded.tokenizer->spec().eot_id;
    if (std::find(eos.begin(), eos.end(), eot) == eos.end()) eos.push_back(eot);
  }
  // Before any file is written: a config with no config.json form (a GGUF's per-pair RoPE factors) refuses.
  const std::string config_json = ConfigToJson(packed.config);
  PackedCheckpointSummary summary;
  for (const TensorToWrite& t : packed.tensors) summary.weight_bytes += t.bytes.size();
  summary.tensor_count = packed.tensors.size();
  summary.safetensors_path = (out / "model.safetensors").string();
  WriteSafetensors(summary.safetensors_path, std::move(packed.tensors), {{"format", "pt"}});
  WriteText(out / "config.json", config_json);
  summary.tokenizer_note = "no tokenizer (the source has none)";
  if (!exported.empty()) {
    for (const TokenizerFile& file : exported) WriteText(out / file.name, file.contents);
    summary.tokenizer_note = exported.front().name + " written from the GGUF vocabulary";
  } else if (!hf_dir.empty() &&
             (fs::exists(hf_dir / "tokenizer.json") || fs::exists(hf_dir / "tokenizer.gguf"))) {
    for (const char* name : {"tokenizer.json", "tokenizer.gguf", "tokenizer_config.json"}) {
      if (fs::exists(hf_dir / name))
        fs::copy_file(hf_dir / name, out / name, fs::copy_options::overwrite_existing);
    }
    summary.tokenizer_note = "tokenizer files copied";
  }
  return summary;
}

}  // namespace plumb
