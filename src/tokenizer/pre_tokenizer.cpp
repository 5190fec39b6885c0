// The regexes of pre_tokenizer.h as matchers. Each Match* function returns the length (in code points) of
// the regex's match starting at `i` of cps[i, end); a piece's end acts as the end of the string (HF applies
// the regex to each piece of an earlier split separately).
#include "plumb/tokenizer/pre_tokenizer.h"

#include <cstddef>

#include "plumb/tokenizer/unicode.h"

namespace plumb {
namespace {

using unicode::CodePoint;
using unicode::CodePointClass;

class Matcher {
 public:
  Matcher(const std::vector<CodePoint>& cps, std::size_t end) : cps_(cps), end_(end) {}

  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  std::size_t Gpt2(std::size_t i) const {
    if (std::size_t n = Contraction(i, /*fold_case=*/false)) return n;
    const std::size_t j = i + (At(i) == ' ' ? 1 : 0);
    if (Is(j, CodePointClass::kLetter)) return Run(j, CodePointClass::kLetter) - i;
    if (Is(j, CodePointClass::kNumber)) return Run(j, CodePointClass::kNumber) - i;
    if (Is(j, CodePointClass::kOther)) return Run(j, CodePointClass::kOther) - i;
    return Whitespace(i);
  }

  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+
  std::size_t Llama3(std::size_t i, std::size_t max_digits) const {
    if (std::size_t n = Contraction(i, /*fold_case=*/true)) return n;
    if (Is(i, CodePointClass::kLetter)) return Run(i, CodePointClass::kLetter) - i;
    if (!IsNewline(i) && !Is(i, CodePointClass::kNumber) && Is(i + 1, CodePointClass::kLetter)) {
      return Run(i + 1, CodePointClass::kLetter) - i;  // [^\r\n\p{L}\p{N}] then letters
    }
    if (Is(i, CodePointClass::kNumber)) {
      std::size_t j = i;
      while (j - i < max_digits && Is(j, CodePointClass::kNumber)) ++j;
      return j - i;
    }
    const std::size_t j = i + (At(i) == ' ' ? 1 : 0);
    if (Is(j, CodePointClass::kOther)) {
      std::size_t k = Run(j, CodePointClass::kOther);
      while (IsNewline(k)) ++k;
      return k - i;
    }
    // \s*[\r\n]+: the whitespace run up to and including its last \r or \n.
    const std::size_t run_end = Run(i, CodePointClass::kSpace);
    for (std::size_t k = run_end; k > i; --k) {
      if (IsNewline(k - 1)) return k - i;
    }
    return Whitespace(i);
  }

 private:
  char32_t At(std::size_t i) const { return i < end_ ? cps_[i].value : 0; }
  bool Is(std::size_t i, CodePointClass cls) const {
    return i < end_ && unicode::ClassOf(cps_[i].value) == cls;
  }
  bool IsNewline(std::size_t i) const { return i < end_ && (cps_[i].value == '\r' || cps_[i].value == '\n'); }
  std::size_t Run(std::size_t i, CodePointClass cls) const {
    while (Is(i, cls)) ++i;
    return i;
  }

  // \s+(?!\S)|\s+ at a white-space code point: the whole run if it ends the text, else all of it but the
  // last (which then leads the next piece, e.g. " x"), and a run of one that a non-space follows is \s+.
  std::size_t Whitespace(std::size_t i) const {
    const std::size_t run_end = Run(i, CodePointClass::kSpace);
    const std::size_t n = run_end - i;
    if (n == 0) return 1;  // unreachable: every code point is a letter, number, space or other
    if (run_end == end_ || n == 1) return n;
    return n - 1;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive as Oniguruma folds case (ASCII, and U+017F ~ s).
  std::size_t Contraction(std::size_t i, bool fold_case) const {
    if (At(i) != '\'') return 0;
    auto lower = [&](std::size_t k) -> char32_t {
      const char32_t c = At(k);
      if (!fold_case) return c;
      if (c >= 'A' && c <= 'Z') return c + ('a' - 'A');
      return c == 0x17F ? U's' : c;
    };
    const char32_t a = lower(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    const char32_t b = lower(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  const std::vector<CodePoint>& cps_;
  std::size_t end_;
};

// Appends the pieces of cps[begin, end) that `kind`'s regex matches.
void SplitRange(PreTokenizer kind, std::string_view text, const std::vector<CodePoint>& cps,
                std::size_t begin, std::size_t end, std::vector<std::string_view>& out) {
  const Matcher matcher(cps, end);
  auto offset = [&](std::size_t i) { return i < cps.size() ? cps[i].offset : text.size(); };
  for (std::size_t i = begin; i < end;) {
    std::size_t n = 0;
    switch (kind) {
      case PreTokenizer::kGpt2:
      case PreTokenizer::kSmolLm:
        n = matcher.Gpt2(i);
        break;
      case PreTokenizer::kLlama3:
        n = matcher.Llama3(i, 3);
        break;
      case PreTokenizer::kQwen2:
        n = matcher.Llama3(i, 1);
        break;
    }
    out.push_back(text.substr(offset(i), offset(i + n) - offset(i)));
    i += n;
  }
}

}  // namespace

std::vector<std::string_view> PreTokenize(PreTokenizer kind, std::string_view text) {
  const std::vector<CodePoint> cps = unicode::DecodeUtf8(text);
  std::vector<std::string_view> pieces;
  if (kind != PreTokenizer::kSmolLm) {
    SplitRange(kind, text, cps, 0, cps.size(), pieces);
    return pieces;
  }
  // Digits first: each number code point is a piece; the GPT-2 regex splits what lies between them.
  std::size_t begin = 0;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (unicode::ClassOf(cps[i].value) != CodePointClass::kNumber) continue;
    SplitRange(kind, text, cps, begin, i, pieces);
    SplitRange(kind, text, cps, i, i + 1, pieces);
    begin = i + 1;
  }
  SplitRange(kind, text, cps, begin, cps.size(), pieces);
  return pieces;
}

}  // namespace plumb
