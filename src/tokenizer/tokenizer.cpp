// Tokenizer: spec validation, the lookup tables, special-token splitting, and decoding.
#include "plumb/tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "plumb/core/error.h"
#include "plumb/tokenizer/unicode.h"
#include "tokenizer_impl.h"

namespace plumb {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// llama.cpp's end-of-generation token texts (llama-vocab.cpp, special_eog_ids), including its
// fill-in-the-middle pad/repo/file-separator tokens, which it also treats as the end of generation.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<|return|>",
    "<|call|>",
    "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<reponame>",
    "<|file_sep|>",
};

PreTokenizer PreTokenizerByName(const std::string& name) {
  if (name == "smollm" || name == "starcoder") return PreTokenizer::kSmolLm;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return PreTokenizer::kLlama3;
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizer::kQwen2;
  if (name == "gpt2" || name == "gpt-2" || name == "default") return PreTokenizer::kGpt2;
  throw MakeError("tokenizer: unsupported pre-tokenizer '", name,
                  "' (supported: smollm, llama-bpe, qwen2, gpt2 and their aliases)");
}

// "<0xAB>" -> 0xAB, or -1.
int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(text[3]), lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void ReplaceAll(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
}

void CheckId(std::int32_t id, const char* field, std::size_t vocab_size) {
  if (id < -1 || (id >= 0 && static_cast<std::size_t>(id) >= vocab_size)) {
    throw MakeError("tokenizer: ", field, " = ", id, " is out of range (vocabulary of ", vocab_size,
                    " tokens)");
  }
}

std::uint64_t PairKey(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

std::shared_ptr<const Tokenizer::Impl> Build(TokenizerSpec input) {
  auto impl = std::make_shared<Tokenizer::Impl>();
  Tokenizer::Impl& t = *impl;
  t.spec = std::move(input);
  const TokenizerSpec& spec = t.spec;  // the tables below point into it
  const std::size_t n = spec.tokens.size();
  if (spec.model == "gpt2") {
    t.model = Tokenizer::Impl::Model::kByteLevel;
    t.pre = PreTokenizerByName(spec.pre);
  } else if (spec.model == "llama") {
    t.model = Tokenizer::Impl::Model::kSentencePiece;
  } else {
    throw MakeError("tokenizer: unsupported model '", spec.model, "' (supported: gpt2, llama)");
  }
  if (n == 0) throw MakeError("tokenizer: the vocabulary is empty");
  if (n > static_cast<std::size_t>(INT32_MAX)) throw MakeError("tokenizer: ", n, " tokens is too many");
  if (!spec.scores.empty() && spec.scores.size() != n) {
    throw MakeError("tokenizer: ", spec.scores.size(), " scores for ", n, " tokens");
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    throw MakeError("tokenizer: ", spec.token_types.size(), " token types for ", n, " tokens");
  }
  if (t.model == Tokenizer::Impl::Model::kSentencePiece && spec.merges.empty() && spec.scores.empty()) {
    throw MakeError("tokenizer: a llama (SentencePiece) model needs token scores or merges");
  }
  if (t.model == Tokenizer::Impl::Model::kByteLevel && spec.merges.empty()) {
    throw MakeError("tokenizer: a gpt2 (byte-level BPE) model needs merges");
  }
  for (std::size_t i = 0; i < spec.scores.size(); ++i) {
    if (std::isnan(spec.scores[i])) throw MakeError("tokenizer: score of token ", i, " is NaN");
  }
  CheckId(spec.bos_id, "bos_id", n);
  CheckId(spec.eos_id, "eos_id", n);
  CheckId(spec.unk_id, "unk_id", n);
  CheckId(spec.pad_id, "pad_id", n);
  CheckId(spec.eot_id, "eot_id", n);
  if (spec.add_bos && spec.bos_id < 0) throw MakeError("tokenizer: add_bos is set but there is no bos_id");
  if (spec.add_eos && spec.eos_id < 0) throw MakeError("tokenizer: add_eos is set but there is no eos_id");

  t.types = spec.token_types.empty() ? std::vector<std::int32_t>(n, kTokenNormal) : spec.token_types;
  t.ids.reserve(n);
  t.byte_tokens.fill(-1);
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = static_cast<std::int32_t>(i);
    const std::string& text = spec.tokens[i];
    if (t.types[i] < kTokenUndefined || t.types[i] > kTokenByte) {
      throw MakeError("tokenizer: token ", i, " ('", text, "') has type ", t.types[i], ", expected 0..6");
    }
    if (text.empty()) continue;  // unreachable by text; llama.cpp tolerates such tokens too
    if (auto [it, inserted] = t.ids.emplace(text, id); !inserted) {
      throw MakeError("tokenizer: duplicate token '", text, "' (ids ", it->second, " and ", i, ")");
    }
    if (t.types[i] == kTokenByte) {
      const int byte = ParseByteToken(text);
      if (byte < 0) throw MakeError("tokenizer: byte token ", i, " is '", text, "', expected <0xAB>");
      if (t.model == Tokenizer::Impl::Model::kSentencePiece && t.byte_tokens[byte] < 0)
        t.byte_tokens[byte] = id;
    }
  }
  if (t.model == Tokenizer::Impl::Model::kByteLevel) {
    for (int b = 0; b < 256; ++b) {
      unicode::AppendUtf8(unicode::ByteToUnicode(static_cast<std::uint8_t>(b)), t.byte_symbols[b]);
      t.byte_tokens[b] = t.Find(t.byte_symbols[b]);
    }
  } else if (spec.unk_id < 0 && std::count(t.byte_tokens.begin(), t.byte_tokens.end(), -1) > 0) {
    throw MakeError(
        "tokenizer: a llama model needs all 256 byte tokens <0x00>..<0xFF> or an unk_id, for "
        "characters no token covers");
  }

  // Merges: "left right", split at the first space after the first character (as llama.cpp does).
  t.merges.reserve(spec.merges.size());
  for (std::size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const std::string& merge = spec.merges[rank];
    const std::size_t space = merge.find(' ', 1);
    if (space == std::string::npos) {
      throw MakeError("tokenizer: merge ", rank, " ('", merge, "') is not two tokens separated by a space");
    }
    const std::string_view left = std::string_view(merge).substr(0, space);
    const std::string_view right = std::string_view(merge).substr(space + 1);
    const std::int32_t left_id = t.Find(left), right_id = t.Find(right);
    const std::int32_t result = t.Find(std::string(left) + std::string(right));
    if (left_id < 0 || right_id < 0 || result < 0) {
      throw MakeError("tokenizer: merge ", rank, " ('", merge, "'): '",
                      left_id < 0    ? left
                      : right_id < 0 ? right
                                     : std::string(left) + std::string(right),
                      "' is not a token");
    }
    t.merges.emplace(PairKey(left_id, right_id),
                     Tokenizer::Impl::Merge{static_cast<std::int32_t>(rank), result});
  }

  // What each token decodes to.
  t.pieces.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& text = spec.tokens[i];
    std::string& piece = t.pieces[i];
    switch (t.types[i]) {
      case kTokenControl:
      case kTokenUnknown:
      case kTokenUnused:
        break;
      case kTokenUserDefined:
        piece = text;
        break;
      case kTokenByte:
        piece = std::string(1, static_cast<char>(ParseByteToken(text)));
        break;
      default:
        if (t.model == Tokenizer::Impl::Model::kSentencePiece) {
          piece = text;
          ReplaceAll(piece, kSpaceSymbol, " ");
        } else {
          // Characters outside the byte alphabet (a vocabulary not made for byte-level BPE) stay as they are.
          for (const unicode::CodePoint& cp : unicode::DecodeUtf8(unicode::ToValidUtf8(text))) {
            const int byte = unicode::UnicodeToByte(cp.value);
            if (byte >= 0) {
              piece += static_cast<char>(byte);
            } else {
              unicode::AppendUtf8(cp.value, piece);
            }
          }
        }
    }
  }

  // Special tokens, matched in the text before the model runs: longest first at each position.
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t type = t.types[i];
    if (spec.tokens[i].empty() ||
        (type != kTokenControl && type != kTokenUnknown && type != kTokenUserDefined)) {
      continue;
    }
    t.specials_by_first_byte[static_cast<std::uint8_t>(spec.tokens[i][0])].push_back(
        {spec.tokens[i], static_cast<std::int32_t>(i), type == kTokenUserDefined});
  }
  for (auto& list : t.specials_by_first_byte) {
    std::stable_sort(list.begin(), list.end(),
                     [](const auto& a, const auto& b) { return a.text.size() > b.text.size(); });
  }

  t.end_of_generation.assign(n, false);
  for (std::int32_t id : {spec.eos_id, spec.eot_id}) {
    if (id >= 0) t.end_of_generation[id] = true;
  }
  // By text, only tokens that are not ordinary text: in Gemma 3's vocabulary </s> is a user-defined HTML tag
  // (beside <s>, <b>, <table>), which llama.cpp stops at too (it special-cases only Gemma 4).
  for (std::string_view text : kEndOfGenerationTexts) {
    const std::int32_t id = t.Find(text);
    if (id >= 0 && t.types[id] != kTokenUserDefined) t.end_of_generation[id] = true;
  }
  return impl;
}

}  // namespace

std::int32_t Tokenizer::Impl::FindText(std::string_view text) const {
  const std::int32_t id = Find(text);
  if (id < 0) return -1;
  const std::int32_t type = types[id];
  return type == kTokenControl || type == kTokenUnknown || type == kTokenByte ? -1 : id;
}

void Tokenizer::Impl::AppendBytes(std::string_view bytes, std::vector<std::int32_t>& out) const {
  for (char c : bytes) {
    const std::int32_t id = byte_tokens[static_cast<std::uint8_t>(c)];
    if (id >= 0) {
      out.push_back(id);
    } else if (spec.unk_id >= 0) {
      out.push_back(spec.unk_id);
    }
  }
}

Tokenizer::Tokenizer(TokenizerSpec spec) : impl_(Build(std::move(spec))) {}

std::vector<std::int32_t> Tokenizer::Encode(std::string_view raw_text, bool add_special,
                                            bool parse_special) const {
  return EncodeWithPlain(raw_text, add_special, parse_special, {});
}

std::vector<std::int32_t> Tokenizer::EncodeTemplated(
    std::string_view text, bool add_special,
    std::span<const std::pair<std::size_t, std::size_t>> plain) const {
  if (unicode::ToValidUtf8(text) != text) {
    throw MakeError("tokenizer: a text with plain ranges must be valid UTF-8 (its ranges are byte offsets)");
  }
  for (std::size_t r = 0; r < plain.size(); ++r) {
    if (plain[r].first > plain[r].second || plain[r].second > text.size() ||
        (r > 0 && plain[r].first < plain[r - 1].second)) {
      throw MakeError("tokenizer: plain range ", r, " [", plain[r].first, ", ", plain[r].second,
                      ") is not sorted, disjoint and within the text of ", text.size(), " bytes");
    }
  }
  return EncodeWithPlain(text, add_special, true, plain);
}

std::vector<std::int32_t> Tokenizer::EncodeWithPlain(
    std::string_view raw_text, bool add_special, bool parse_special,
    std::span<const std::pair<std::size_t, std::size_t>> plain) const {
  const Impl& t = *impl_;
  if (raw_text.size() > UINT32_MAX) {  // code-point offsets are 32-bit (unicode::CodePoint)
    throw MakeError("tokenizer: a text of ", raw_text.size(), " bytes is too long to encode (at most 4 GiB)");
  }
  const std::string text = unicode::ToValidUtf8(raw_text);
  std::vector<std::int32_t> out;
  if (add_special && t.spec.add_bos) out.push_back(t.spec.bos_id);

  bool at_start = true;       // no text or special token before this fragment
  bool after_special = true;  // the fragment starts the text or follows a special token
  auto encode_fragment = [&](std::string_view fragment) {
    if (fragment.empty()) return;
    if (t.model == Impl::Model::kByteLevel) {
      for (std::string_view piece : PreTokenize(t.pre, fragment)) t.EncodeByteLevelPiece(piece, out);
    } else {
      std::string escaped;
      const bool prefix = t.spec.add_space_prefix &&
                          (t.spec.space_prefix_first_only ? at_start : after_special) &&
                          !(t.spec.space_prefix_unless_space && fragment.front() == ' ');
      if (prefix) escaped = " ";
      escaped += fragment;
      ReplaceAll(escaped, " ", kSpaceSymbol);
      if (t.spec.merges.empty()) {
        t.EncodeCharsByScore(escaped, out);
      } else {
        t.EncodeCharsByRank(escaped, out);
      }
    }
    at_start = after_special = false;
  };

  // Whether [begin, end) overlaps a plain range; `next` is the first range that does not end before begin
  // (positions only grow).
  std::size_t next = 0;
  const auto in_plain = [&](std::size_t begin, std::size_t end) {
    while (next < plain.size() && plain[next].second <= begin) ++next;
    return next < plain.size() && plain[next].first < end;
  };
  std::size_t fragment_start = 0;
  for (std::size_t i = 0; i < text.size();) {
    const Impl::SpecialToken* match = nullptr;
    for (const Impl::SpecialToken& special : t.specials_by_first_byte[static_cast<std::uint8_t>(text[i])]) {
      if ((special.always || (parse_special && !in_plain(i, i + special.text.size()))) &&
          std::string_view(text).substr(i).starts_with(special.text)) {
        match = &special;
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    encode_fragment(std::string_view(text).substr(fragment_start, i - fragment_start));
    out.push_back(match->id);
    at_start = false;
    after_special = true;
    i += match->text.size();
    fragment_start = i;
  }
  encode_fragment(std::string_view(text).substr(fragment_start));
  // A text that writes the BOS token itself (a rendered chat template pasted into a prompt) gets no second
  // one: two BOS tokens put the model off what it was trained on. (llama.cpp adds the second and warns; HF
  // tokenizers adds it silently.)
  if (add_special && t.spec.add_bos && out.size() >= 2 && out[1] == t.spec.bos_id) out.erase(out.begin());
  if (add_special && t.spec.add_eos) out.push_back(t.spec.eos_id);
  return out;
}

std::string Tokenizer::TokenToPiece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw MakeError("tokenizer: token id ", id, " is out of range (vocabulary of ", vocab_size(), " tokens)");
  }
  return impl_->pieces[id];
}

std::string Tokenizer::Decode(std::span<const std::int32_t> ids) const {
  StreamingDecoder decoder(*this);
  std::string out;
  for (std::int32_t id : ids) out += decoder.Push(id);
  out += decoder.Flush();
  return out;
}

std::int32_t Tokenizer::vocab_size() const {
  return static_cast<std::int32_t>(impl_->spec.tokens.size());
}
std::int32_t Tokenizer::bos_id() const {
  return impl_->spec.bos_id;
}
std::int32_t Tokenizer::eos_id() const {
  return impl_->spec.eos_id;
}
bool Tokenizer::add_bos() const {
  return impl_->spec.add_bos;
}
const std::string& Tokenizer::chat_template() const {
  return impl_->spec.chat_template;
}
const TokenizerSpec& Tokenizer::spec() const {
  return impl_->spec;
}

bool Tokenizer::IsEndOfGeneration(std::int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->end_of_generation[id];
}

std::optional<std::int32_t> Tokenizer::FindToken(std::string_view text) const {
  const std::int32_t id = impl_->Find(text);
  return id < 0 ? std::nullopt : std::optional<std::int32_t>(id);
}

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

std::string StreamingDecoder::Push(std::int32_t id) {
  std::string piece = tokenizer_.TokenToPiece(id);
  if (piece.empty()) return "";
  const TokenizerSpec& spec = tokenizer_.impl_->spec;
  if (!started_ && spec.model == "llama" && spec.add_space_prefix && piece[0] == ' ') piece.erase(0, 1);
  started_ = true;
  pending_ += piece;
  std::string out;
  const std::size_t consumed = unicode::AppendLossy(pending_, /*final=*/false, out);
  pending_.erase(0, consumed);
  return out;
}

std::string StreamingDecoder::Flush() {
  std::string out;
  unicode::AppendLossy(pending_, /*final=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace plumb
