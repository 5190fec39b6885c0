// Pre-tokenizers of byte-level BPE models: split text into the pieces that BPE then merges within.
//
// Each is the regex its models' tokenizer.json names (and llama.cpp's llama-vocab.cpp lists under the same
// tokenizer.ggml.pre), written out by hand as a matcher over code points that follows the regex engine's
// rules: at each position the first alternative that matches wins, quantifiers are greedy and backtrack.
//
//   kGpt2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kSmolLm every \p{N} is a piece of its own (HF's Digits(individual_digits)); kGpt2 on the text between
//   kLlama3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//           \s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2  kLlama3 with \p{N} in place of \p{N}{1,3}
//
// (?i:) follows the HF tokenizers regex engine (Oniguruma), which folds case by Unicode rules: besides ASCII
// case, U+017F LATIN SMALL LETTER LONG S matches 's'. The character classes come from unicode.h.
#pragma once

#include <string_view>
#include <vector>

namespace plumb {

enum class PreTokenizer { kGpt2, kSmolLm, kLlama3, kQwen2 };

// Splits well-formed UTF-8 `text` into consecutive, non-empty pieces that cover it exactly.
std::vector<std::string_view> PreTokenize(PreTokenizer kind, std::string_view text);

}  // namespace plumb
