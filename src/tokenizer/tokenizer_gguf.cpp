// TokenizerSpec from GGUF metadata: the tokenizer.ggml.* keys llama.cpp's convert_hf_to_gguf.py writes.
#include <limits>
#include <string>

#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb {
namespace {

std::int32_t OptionalId(const GgufFile& file, const char* key, std::int32_t fallback,
                        std::size_t vocab_size) {
  const std::optional<std::uint64_t> value = file.FindUint(key);
  if (!value) return fallback;
  if (*value >= vocab_size) {
    throw MakeError(file.path(), ": metadata key '", key, "' = ", *value, " is out of range (vocabulary of ",
                    vocab_size, " tokens)");
  }
  return static_cast<std::int32_t>(*value);
}

}  // namespace

TokenizerSpec TokenizerSpecFromGguf(const GgufFile& file) {
  TokenizerSpec spec;
  spec.model = file.GetString("tokenizer.ggml.model");
  if (spec.model != "gpt2" && spec.model != "llama") {
    throw MakeError(file.path(), ": metadata key 'tokenizer.ggml.model' is '", spec.model,
                    "', supported: gpt2, llama");
  }
  spec.pre = file.FindString("tokenizer.ggml.pre").value_or(spec.model == "gpt2" ? "default" : "");
  spec.tokens = file.GetStringArray("tokenizer.ggml.tokens");
  const std::size_t n = spec.tokens.size();
  if (n == 0 || n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw MakeError(file.path(), ": metadata key 'tokenizer.ggml.tokens' has ", n, " tokens");
  }
  if (file.Has("tokenizer.ggml.scores")) {
    const std::vector<double> scores = file.GetFloatArray("tokenizer.ggml.scores");
    if (scores.size() != n) {
      throw MakeError(file.path(), ": metadata key 'tokenizer.ggml.scores' has ", scores.size(),
                      " values for ", n, " tokens");
    }
    spec.scores.assign(scores.begin(), scores.end());
  }
  if (file.Has("tokenizer.ggml.token_type")) {
    const std::vector<std::int64_t> types = file.GetIntArray("tokenizer.ggml.token_type");
    if (types.size() != n) {
      throw MakeError(file.path(), ": metadata key 'tokenizer.ggml.token_type' has ", types.size(),
                      " values for ", n, " tokens");
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (types[i] < kTokenUndefined || types[i] > kTokenByte) {
        throw MakeError(file.path(), ": metadata key 'tokenizer.ggml.token_type' [", i, "] = ", types[i],
                        ", expected 0..6");
      }
      spec.token_types.push_back(static_cast<std::int32_t>(types[i]));
    }
  }
  if (spec.model == "gpt2") {
    spec.merges = file.GetStringArray("tokenizer.ggml.merges");
  } else if (file.Has("tokenizer.ggml.merges")) {
    spec.merges = file.GetStringArray("tokenizer.ggml.merges");
  }
  if (spec.model == "llama" && spec.scores.empty() && spec.merges.empty()) {
    throw MakeError(file.path(),
                    ": metadata key 'tokenizer.ggml.scores' is missing (a llama tokenizer needs it)");
  }

  // Defaults as llama.cpp's llama_vocab::impl::load sets them before reading the keys.
  const bool llama = spec.model == "llama";
  const bool llama3 = spec.pre == "llama-bpe" || spec.pre == "llama3" || spec.pre == "llama-v3";
  spec.bos_id = OptionalId(file, "tokenizer.ggml.bos_token_id", llama && n > 1 ? 1 : -1, n);
  spec.eos_id = OptionalId(file, "tokenizer.ggml.eos_token_id", llama && n > 2 ? 2 : -1, n);
  spec.unk_id = OptionalId(file, "tokenizer.ggml.unknown_token_id", llama ? 0 : -1, n);
  spec.pad_id = OptionalId(file, "tokenizer.ggml.padding_token_id", -1, n);
  spec.eot_id = OptionalId(file, "tokenizer.ggml.eot_token_id", -1, n);
  spec.add_bos = file.FindBool("tokenizer.ggml.add_bos_token").value_or(llama || llama3);
  spec.add_eos = file.FindBool("tokenizer.ggml.add_eos_token").value_or(false);
  spec.add_space_prefix = file.FindBool("tokenizer.ggml.add_space_prefix").value_or(llama);
  spec.ignore_merges = !llama && llama3;
  if (spec.add_bos && spec.bos_id < 0) {
    throw MakeError(file.path(),
                    ": metadata key 'tokenizer.ggml.add_bos_token' is true but "
                    "'tokenizer.ggml.bos_token_id' is missing");
  }
  if (spec.add_eos && spec.eos_id < 0) {
    throw MakeError(file.path(),
                    ": metadata key 'tokenizer.ggml.add_eos_token' is true but "
                    "'tokenizer.ggml.eos_token_id' is missing");
  }
  spec.chat_template = file.FindString("tokenizer.chat_template").value_or("");
  return spec;
}

Tokenizer Tokenizer::FromGguf(const GgufFile& file) {
  TokenizerSpec spec = TokenizerSpecFromGguf(file);
  try {
    return Tokenizer(std::move(spec));
  } catch (const Error& e) {
    throw MakeError(file.path(), ": ", e.what());
  }
}

}  // namespace plumb
