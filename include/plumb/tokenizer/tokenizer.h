// plumb::Tokenizer: text <-> token ids for Llama-family models (docs/tokenizers.md).
//
// Two models, as llama.cpp names them in tokenizer.ggml.model:
//   "gpt2"   byte-level BPE (GPT-2, Llama-3, Qwen2, SmolLM): a pre-tokenizer splits the text, each piece's
//   bytes
//            become byte-alphabet symbols, merges are applied by rank.
//   "llama"  SentencePiece-style BPE (Llama-2, Mistral): spaces become U+2581, an optional space is put in
//            front, symbols are the text's characters, and pairs merge by the highest score of the merged
//            piece (llama.cpp's llm_tokenizer_spm); characters with no token become <0xAB> byte tokens. When
//            the spec has merges instead (a Llama-2 tokenizer.json), pairs merge by merge rank, as HF does.
// Special tokens (control, unknown and user-defined types) are matched in the text before the model sees it:
// leftmost, longest first. User-defined tokens always are; control and unknown ones only when parse_special.
//
// Text that is not valid UTF-8 is tokenized as its lossy decoding (each maximal ill-formed subsequence
// becomes U+FFFD, see unicode.h), and Decode returns valid UTF-8 the same way: a token sequence that splits a
// character leaves U+FFFD for the part that is there.
//
// Every problem with a spec, a GGUF file or a tokenizer.json is a plumb::Error naming the file, key or field.
// A Tokenizer is immutable after construction and safe to share between threads; copies share the tables.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace plumb {

class GgufFile;

// Token types, as GGUF's tokenizer.ggml.token_type stores them (llama.cpp's llama_token_type).
enum TokenType : std::int32_t {
  kTokenUndefined = 0,
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

// What GGUF metadata or a tokenizer.json describe. Empty `scores` / `token_types` mean all 0 / all normal.
struct TokenizerSpec {
  std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece-style BPE)
  // gpt2 pre-tokenizer: "smollm", "llama-bpe", "qwen2", "gpt2" (also accepted: "default" and "gpt-2" = gpt2,
  // "llama3" and "llama-v3" = llama-bpe, "starcoder" = smollm, "deepseek-r1-qwen" = qwen2). Unused by llama.
  std::string pre;
  std::vector<std::string> tokens;
  std::vector<float> scores;              // llama: the merge priority of each piece
  std::vector<std::int32_t> token_types;  // TokenType values
  std::vector<std::string> merges;        // "left right", highest priority first
  std::int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1, eot_id = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  // llama, how tokenizer.json's Metaspace pre-tokenizer adds the space (llama.cpp and the Prepend
  // normalizer add it in front of the text and after every special token, whatever the text starts with):
  bool space_prefix_first_only = false;    // only at the very start of the text (prepend_scheme "first")
  bool space_prefix_unless_space = false;  // not when the text already starts with a space
  // gpt2: a piece that is a whole token is that token, merges or not (llama.cpp does this for llama-bpe;
  // tokenizer.json's model.ignore_merges).
  bool ignore_merges = false;
  std::string chat_template;  // tokenizer.chat_template, "" if none
};

// Reads the tokenizer.ggml.* keys (and tokenizer.chat_template). Defaults follow llama.cpp: a "llama" model
// adds BOS and a space prefix unless the file says otherwise, "llama-bpe" adds BOS and ignores merges.
// Errors name the key.
TokenizerSpec TokenizerSpecFromGguf(const GgufFile& file);

class Tokenizer {
 public:
  // Validates the spec (ids in range, merges made of tokens whose concatenation is a token, no duplicate
  // tokens, byte tokens spelled <0xAB>, ...) and builds the lookup tables.
  explicit Tokenizer(TokenizerSpec spec);
  static Tokenizer FromGguf(const GgufFile& file);
  // A Hugging Face tokenizer.json (BPE model: byte-level, or Llama-2 style with byte fallback) and, when a
  // tokenizer_config.json lies beside it, its add_bos_token, add_eos_token, bos_token, eos_token and
  // chat_template. Anything it cannot reproduce exactly (Unigram, WordPiece, normalizers, unknown regexes,
  // ...) is an error naming the field.
  static Tokenizer FromTokenizerJson(const std::string& path);
  // The same from the text of a tokenizer.json alone (no tokenizer_config.json is read); `name` stands for
  // its path in messages.
  static Tokenizer FromTokenizerJsonText(std::string_view text, const std::string& name);

  // add_special: BOS first and EOS last where the spec says so, but no BOS before a text that starts with
  // the BOS token itself (read as such: parse_special). parse_special: control and unknown token texts in
  // `text` become those tokens (user-defined tokens always do).
  std::vector<std::int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;
  // A rendered chat template: Encode with parse_special everywhere but in the `contents` byte ranges
  // [begin, end) of `text` (sorted, disjoint; ChatTemplate::RenderWithContents): no control or unknown token
  // is read from text that overlaps one (a message cannot write one), while the template around them has its
  // tokens. `text` must be valid UTF-8 (the ranges are its byte offsets); throws plumb::Error otherwise.
  std::vector<std::int32_t> EncodeTemplated(
      std::string_view text, bool add_special,
      std::span<const std::pair<std::size_t, std::size_t>> contents) const;
  // The bytes a token stands for: byte-level decoded (gpt2), U+2581 as space and <0xAB> as that byte (llama),
  // a user-defined token's text; "" for control, unknown and unused tokens. May be part of a UTF-8 character.
  // Throws for an id out of range.
  std::string TokenToPiece(std::int32_t id) const;
  // The pieces joined as valid UTF-8 (see above); for llama with add_space_prefix the one leading space the
  // encoder added is removed, so Decode(Encode(text)) == text for valid UTF-8 text without special tokens.
  std::string Decode(std::span<const std::int32_t> ids) const;

  std::int32_t vocab_size() const;
  std::int32_t bos_id() const;
  std::int32_t eos_id() const;
  bool add_bos() const;
  // EOS, EOT, and the tokens llama.cpp treats as end of generation by their text (<|im_end|>, <|eot_id|>,
  // <|end|>, <|endoftext|>, </s>, <end_of_turn>, ...) unless they are user-defined, i.e. text (Gemma 3's
  // </s> is an HTML tag).
  bool IsEndOfGeneration(std::int32_t id) const;
  std::optional<std::int32_t> FindToken(std::string_view text) const;
  const std::string& chat_template() const;
  const TokenizerSpec& spec() const;

  struct Impl;

 private:
  std::vector<std::int32_t> EncodeWithPlain(std::string_view text, bool add_special, bool parse_special,
                                            std::span<const std::pair<std::size_t, std::size_t>> plain) const;

  std::shared_ptr<const Impl> impl_;
  friend class StreamingDecoder;
};

// Turns tokens into text as they arrive: never emits part of a UTF-8 character (bytes are held until the
// character is complete); an ill-formed sequence is emitted as U+FFFD as soon as it is known to be one.
// Flush() returns what is held (an incomplete character as U+FFFD). Push()es followed by Flush() give exactly
// Decode() of all the ids. The Tokenizer must outlive the decoder.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer);
  std::string Push(std::int32_t id);
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;   // bytes of an incomplete character
  bool started_ = false;  // some byte has been produced (the leading-space rule applies only before that)
};

}  // namespace plumb
