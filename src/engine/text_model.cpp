#include "plumb/engine/text_model.h"

#include <algorithm>
#include <filesystem>

#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"

namespace plumb {

namespace {

namespace fs = std::filesystem;

bool IsGgufPath(const fs::path& p) {
  return DetectModelPath(p.string()) == ModelPathKind::kGguf;
}

std::optional<Tokenizer> GgufTokenizer(const GgufFile& file) {
  if (!file.Has("tokenizer.ggml.model")) return std::nullopt;
  return Tokenizer::FromGguf(file);
}

// The tokenizer beside a checkpoint's weights. tokenizer.gguf is how plumb pack carries a SentencePiece GGUF
// tokenizer (docs/formats.md, "The tokenizer of a GGUF source"). It wins over a tokenizer.json beside it: it
// is the source's tokenizer verbatim, merged by piece score as llama.cpp does, where tokenizer.json can only
// say merge ranks, which order tied pairs differently. The chat template comes with it
// (tokenizer.chat_template), as from a model GGUF.
std::optional<Tokenizer> CheckpointTokenizer(const fs::path& p) {
  const fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  if (fs::exists(dir / "tokenizer.gguf"))
    return Tokenizer::FromGguf(GgufFile::Open((dir / "tokenizer.gguf").string()));
  if (fs::exists(dir / "tokenizer.json"))
    return Tokenizer::FromTokenizerJson((dir / "tokenizer.json").string());
  return std::nullopt;
}

}  // namespace

TextModel TextModel::Load(const std::string& path) {
  const fs::path p(path);
  if (IsGgufPath(p)) {
    auto file = std::make_shared<const GgufFile>(GgufFile::Open(path));
    Model model = Model::FromGguf(file);
    std::optional<Tokenizer> tokenizer = GgufTokenizer(*file);
    return TextModel{std::move(model), std::move(tokenizer)};
  }
  Model model = Model::Load(path);
  return TextModel{std::move(model), CheckpointTokenizer(p)};
}

std::optional<Tokenizer> TextModel::LoadTokenizer(const std::string& path) {
  const fs::path p(path);
  if (IsGgufPath(p)) return GgufTokenizer(GgufFile::Open(path));
  return CheckpointTokenizer(p);
}

const Tokenizer& TextModel::RequireTokenizer(const std::string& what) const {
  if (!tokenizer) {
    throw MakeError(what, " needs a tokenizer, and this model has none (no tokenizer.ggml.* metadata or ",
                    "tokenizer.json / tokenizer.gguf); give token ids with --prompt-ids instead");
  }
  if (tokenizer->vocab_size() > model.config().vocab_size) {
    throw MakeError("the tokenizer has ", tokenizer->vocab_size(), " tokens but the model only ",
                    model.config().vocab_size);
  }
  return *tokenizer;
}

std::vector<int> TextModel::StopIds() const {
  std::vector<int> ids = model.config().eos_token_ids;
  if (tokenizer) {
    for (int id = 0; id < tokenizer->vocab_size(); ++id) {
      if (tokenizer->IsEndOfGeneration(id) && std::find(ids.begin(), ids.end(), id) == ids.end()) {
        ids.push_back(id);
      }
    }
  }
  return ids;
}

}  // namespace plumb
