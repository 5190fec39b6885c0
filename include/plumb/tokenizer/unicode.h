// UTF-8 and code-point helpers shared by the tokenizers (docs/tokenizers.md, "Unicode").
//
// Invalid UTF-8 is never an error here: it is replaced by U+FFFD, one per maximal ill-formed subsequence (the
// Unicode Standard's recommended practice, ch. 3 "U+FFFD Substitution of Maximal Subparts"), which is exactly
// what Python's bytes.decode(errors="replace") and Rust's String::from_utf8_lossy do. The tokenizer applies
// it to its input (so the HF tokenizers package, which only takes valid strings, is a usable oracle) and to
// its decoded output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace plumb::unicode {

inline constexpr char32_t kReplacementCharacter = 0xFFFD;

// The three questions the pre-tokenizer regexes ask: \p{L}, \p{N}, \s (White_Space). Everything else is
// kOther.
enum class CodePointClass : std::uint8_t { kOther, kLetter, kNumber, kSpace };

// From the generated table src/tokenizer/unicode_tables.inc (tools/reference/gen_unicode_tables.py).
CodePointClass ClassOf(char32_t cp);

// Appends the UTF-8 encoding of `cp` (which must be <= 0x10FFFF and not a surrogate).
void AppendUtf8(char32_t cp, std::string& out);

// The length of the well-formed UTF-8 sequence at the start of `bytes`, or 0 if none is there (ill-formed, or
// cut short by the end of `bytes`).
std::size_t WellFormedLength(std::string_view bytes);

// Appends `bytes` to `out` with each maximal ill-formed subsequence replaced by U+FFFD. With final == false
// a trailing sequence that is incomplete but could still become well-formed is left unconsumed. Returns the
// number of bytes of `bytes` consumed (bytes.size() when final).
std::size_t AppendLossy(std::string_view bytes, bool final, std::string& out);

// `bytes` with every maximal ill-formed subsequence replaced by U+FFFD (valid input is returned unchanged).
std::string ToValidUtf8(std::string_view bytes);

// One code point of a well-formed UTF-8 string, with where it starts in the string.
struct CodePoint {
  char32_t value;
  std::uint32_t offset;
};

// Decodes well-formed UTF-8 (callers sanitize first with ToValidUtf8); `bytes` must be shorter than 4 GiB.
std::vector<CodePoint> DecodeUtf8(std::string_view valid_utf8);

// GPT-2's byte-level alphabet: every byte maps to one printable code point (printable Latin-1 bytes map to
// themselves, the other 68 to U+0100..U+0143 in byte order), so any byte string is a string of visible text.
char32_t ByteToUnicode(std::uint8_t byte);
// The inverse: the byte a code point of the alphabet stands for, or -1 if it is not in the alphabet.
int UnicodeToByte(char32_t cp);

}  // namespace plumb::unicode
