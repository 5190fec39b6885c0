// The tables behind plumb::Tokenizer, and the model algorithms that use them (bpe.cpp, spm.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "plumb/tokenizer/pre_tokenizer.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Tokenizer::Impl {
  enum class Model { kByteLevel, kSentencePiece };

  struct Merge {
    std::int32_t rank;
    std::int32_t result;
  };

  struct SpecialToken {
    std::string_view text;  // into spec.tokens
    std::int32_t id;
    bool always;  // user-defined: matched even when special tokens are not parsed
  };

  TokenizerSpec spec;
  Model model = Model::kByteLevel;
  PreTokenizer pre = PreTokenizer::kGpt2;
  std::vector<std::int32_t> types;  // spec.token_types, or all normal
  std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>> ids;  // token text -> id
  std::unordered_map<std::uint64_t, Merge> merges;  // (left id << 32 | right id) -> rank, merged id
  // gpt2: the token of each byte's alphabet character; llama: the <0xAB> token. -1 where there is none.
  std::array<std::int32_t, 256> byte_tokens{};
  std::array<std::string, 256> byte_symbols;  // gpt2: each byte's alphabet character as UTF-8
  std::vector<std::string> pieces;            // TokenToPiece of every id
  std::array<std::vector<SpecialToken>, 256> specials_by_first_byte;  // each list longest first
  std::vector<bool> end_of_generation;

  std::int32_t Find(std::string_view text) const {
    auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  }
  // A token the model algorithms may produce from text: not control, unknown or byte.
  std::int32_t FindText(std::string_view text) const;
  // The tokens for bytes no token covers: byte tokens, or the unknown token once per byte, or nothing.
  void AppendBytes(std::string_view bytes, std::vector<std::int32_t>& out) const;

  // Merges adjacent symbols by rank until no pair in `merges` is left (bpe.cpp).
  void MergeByRank(std::vector<std::int32_t>& symbols) const;
  // One pre-tokenizer piece of a byte-level model (bpe.cpp).
  void EncodeByteLevelPiece(std::string_view piece, std::vector<std::int32_t>& out) const;
  // Text of a llama model, spaces already U+2581: merged by rank when the spec has merges (bpe.cpp), by score
  // otherwise (spm.cpp).
  void EncodeCharsByRank(std::string_view text, std::vector<std::int32_t>& out) const;
  void EncodeCharsByScore(std::string_view text, std::vector<std::int32_t>& out) const;
};

}  // namespace plumb
