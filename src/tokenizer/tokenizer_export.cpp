// The tokenizer of a GGUF source as the files of a packed checkpoint (docs/formats.md, "The tokenizer of a
// GGUF source"): TokenizerSpec → tokenizer.json + tokenizer_config.json, the inverse of tokenizer_json.cpp
// for the byte-level BPE configurations it accepts; a SentencePiece tokenizer as a vocab-only tokenizer.gguf.
#include "plumb/tokenizer/tokenizer_export.h"

#include <nlohmann/json.hpp>

#include "hf_regexes.h"
#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"
#include "plumb/formats/gguf_writer.h"
#include "plumb/tokenizer/pre_tokenizer.h"

namespace plumb {
namespace {

using nlohmann::json;

json ByteLevel(bool use_regex) {
  return {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

// The pre_tokenizer that tokenizer_json.cpp maps back to `kind`.
json PreTokenizerJson(PreTokenizer kind) {
  auto split_then_byte_level = [](const char* regex) {
    return json{
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
          ByteLevel(false)}}};
  };
  switch (kind) {
    case PreTokenizer::kGpt2:
      return ByteLevel(true);
    case PreTokenizer::kSmolLm:
      return {{"type", "Sequence"},
              {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, ByteLevel(true)}}};
    case PreTokenizer::kLlama3:
      return split_then_byte_level(kLlama3Regex);
    case PreTokenizer::kQwen2:
      return split_then_byte_level(kQwen2Regex);
  }
  return nullptr;
}

// TokenizerSpec::pre and its aliases (tokenizer.h); Tokenizer(spec) has already rejected any other name.
PreTokenizer PreTokenizerOf(const std::string& name) {
  if (name == "smollm" || name == "starcoder") return PreTokenizer::kSmolLm;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return PreTokenizer::kLlama3;
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizer::kQwen2;
  return PreTokenizer::kGpt2;
}

json TokenizerConfig(const TokenizerSpec& spec) {
  json config = {{"add_bos_token", spec.add_bos}, {"add_eos_token", spec.add_eos}};
  auto name = [&](std::int32_t id) { return id >= 0 ? json(spec.tokens[id]) : json(nullptr); };
  config["bos_token"] = name(spec.bos_id);
  config["eos_token"] = name(spec.eos_id);
  config["pad_token"] = name(spec.pad_id);
  config["unk_token"] = name(spec.unk_id);
  if (!spec.chat_template.empty()) config["chat_template"] = spec.chat_template;
  // Only a byte-level tokenizer has a tokenizer.json for Hugging Face's fast tokenizer to read; a
  // SentencePiece one is in tokenizer.gguf, which no Hugging Face class reads, so none is named.
  if (spec.model == "gpt2") config["tokenizer_class"] = "PreTrainedTokenizerFast";
  return config;
}

}  // namespace

std::string TokenizerConfigJson(const TokenizerSpec& spec) {
  try {
    return TokenizerConfig(spec).dump(2) + "\n";
  } catch (const json::exception& e) {
    throw MakeError("cannot write tokenizer_config.json (a special token is not valid UTF-8?): ", e.what());
  }
}

TokenizerJsonFiles ExportTokenizerJson(const TokenizerSpec& spec) {
  if (spec.model != "gpt2") {
    throw MakeError(
        "cannot write tokenizer.json for a '", spec.model,
        "' (SentencePiece) tokenizer: tokenizer.json merges by rank where llama.cpp merges by score, "
        "so the result would not encode identically; only byte-level BPE ('gpt2') is supported (a "
        "SentencePiece tokenizer is written as tokenizer.gguf: ExportTokenizerGguf)");
  }
  const Tokenizer validated(spec);  // the same checks FromGguf made; throws for a bad spec
  const PreTokenizer pre = PreTokenizerOf(spec.pre);
  const std::size_t n = spec.tokens.size();
  json vocab = json::object();
  json added = json::array();
  for (std::size_t id = 0; id < n; ++id) {
    const std::string& text = spec.tokens[id];
    vocab[text] = id;
    const std::int32_t type = spec.token_types.empty() ? kTokenNormal : spec.token_types[id];
    if (type == kTokenUnused || type == kTokenByte) {
      throw MakeError("cannot write tokenizer.json: token ", id, " '", text, "' has type ",
                      type == kTokenUnused ? "unused" : "byte",
                      ", which a byte-level tokenizer.json cannot express");
    }
    // Control and unknown tokens are special added tokens (the reader makes them control; both are matched
    // only when parsing special tokens and decode to nothing); user-defined ones are non-special.
    if (type == kTokenControl || type == kTokenUnknown || type == kTokenUserDefined) {
      added.push_back({{"id", id},
                       {"content", text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", type == kTokenUserDefined},
                       {"special", type != kTokenUserDefined}});
    }
  }
  json merges = json::array();
  for (const std::string& m : spec.merges) merges.push_back(m);

  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", spec.unk_id >= 0 ? json(spec.tokens[spec.unk_id]) : nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", spec.ignore_merges},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merges)}};
  const json tokenizer = {{"version", "1.0"},          {"truncation", nullptr},
                          {"padding", nullptr},        {"added_tokens", std::move(added)},
                          {"normalizer", nullptr},     {"pre_tokenizer", PreTokenizerJson(pre)},
                          {"post_processor", nullptr}, {"decoder", ByteLevel(true)},
                          {"model", std::move(model)}};

  // Tokens from a GGUF file need not be valid UTF-8; nlohmann refuses to write such strings.
  try {
    return {tokenizer.dump(2) + "\n", TokenizerConfigJson(spec)};
  } catch (const json::exception& e) {
    throw MakeError("cannot write tokenizer.json (a token is not valid UTF-8?): ", e.what());
  }
}

std::vector<std::uint8_t> ExportTokenizerGguf(const GgufFile& source) {
  if (!source.Has("tokenizer.ggml.model")) {
    throw MakeError(source.path(), ": has no tokenizer (metadata key 'tokenizer.ggml.model' is missing)");
  }
  GgufWriter writer;
  for (const char* key : {"general.architecture", "general.name"}) {
    if (const GgufValue* value = source.FindValue(key)) writer.Add(key, *value);
  }
  // Every tokenizer key as stored, types included (tokenizer.ggml.*, tokenizer.chat_template and its
  // named variants): TokenizerSpecFromGguf then reads exactly what it read from the source, defaults and all.
  for (const auto& [key, value] : source.metadata()) {
    if (key.starts_with("tokenizer.")) writer.Add(key, value);
  }
  return writer.Bytes();
}

std::vector<TokenizerFile> ExportGgufTokenizer(const GgufFile& source) {
  const TokenizerSpec spec = TokenizerSpecFromGguf(source);
  if (spec.model == "gpt2") {
    TokenizerJsonFiles json_files = ExportTokenizerJson(spec);
    return {{"tokenizer.json", std::move(json_files.tokenizer_json)},
            {"tokenizer_config.json", std::move(json_files.tokenizer_config_json)}};
  }
  const std::vector<std::uint8_t> gguf = ExportTokenizerGguf(source);
  return {{"tokenizer.gguf", std::string(gguf.begin(), gguf.end())},
          {"tokenizer_config.json", TokenizerConfigJson(spec)}};
}

}  // namespace plumb
