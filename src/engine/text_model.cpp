#include "plumb/engine/text_model.h"

#include <algorithm>
#include <filesystem>

#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"

namespace plumb {

TextModel TextModel::Load(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  if (p.extension() == ".gguf" && fs::exists(p)) {
    auto file = std::make_shared<const GgufFile>(GgufFile::Open(path));
    Model model = Model::FromGguf(file);
    std::optional<Tokenizer> tokenizer;
    if (file->Has("tokenizer.ggml.model")) tokenizer.emplace(Tokenizer::FromGguf(*file));
    return TextModel{std::move(model), std::move(tokenizer)};
  }
  Model model = Model::Load(path);
  const fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  std::optional<Tokenizer> tokenizer;
  // tokenizer.gguf is how plumb pack carries a SentencePiece GGUF tokenizer (docs/formats.md, "The tokenizer
  // of a GGUF source"). It wins over a tokenizer.json beside it: it is the source's tokenizer verbatim,
  // merged by piece score as llama.cpp does, where tokenizer.json can only say merge ranks, which order tied
  // pairs differently. The chat template comes with it (tokenizer.chat_template), as from a model GGUF.
  if (fs::exists(dir / "tokenizer.gguf")) {
    tokenizer.emplace(Tokenizer::FromGguf(GgufFile::Open((dir / "tokenizer.gguf").string())));
  } else if (fs::exists(dir / "tokenizer.json")) {
    tokenizer.emplace(Tokenizer::FromTokenizerJson((dir / "tokenizer.json").string()));
  }
  return TextModel{std::move(model), std::move(tokenizer)};
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
