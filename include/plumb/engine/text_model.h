// TextModel: a model together with what turns text into its tokens and back: the tokenizer and the chat
// template, loaded from one GGUF file or one Hugging Face checkpoint directory.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plumb/model/model.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb {

struct TextModel {
  Model model;
  // Absent for a checkpoint without a vocabulary (the tiny fixtures have none): such a model can only be
  // driven with token ids.
  std::optional<Tokenizer> tokenizer;

  // *.gguf: weights, tokenizer and chat template from the one file. A directory or .safetensors file:
  // weights as Model::Load reads them, tokenizer (and chat template) from tokenizer.gguf beside them if
  // present (a packed SentencePiece tokenizer; preferred), else from tokenizer.json (if present).
  static TextModel Load(const std::string& path);

  // The tokenizer Load would find for `path`, without reading the weights (plumb tokenize); std::nullopt
  // where the model has none. Throws plumb::Error naming the path when there is nothing there.
  static std::optional<Tokenizer> LoadTokenizer(const std::string& path);

  // The tokenizer, or a plumb::Error saying that `what` needs one and this model has none.
  const Tokenizer& RequireTokenizer(const std::string& what) const;

  // Ids that end a reply: the config's EOS ids and the tokenizer's end-of-generation tokens.
  std::vector<int> StopIds() const;
};

}  // namespace plumb
