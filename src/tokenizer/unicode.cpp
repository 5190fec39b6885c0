#include "plumb/tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace plumb::unicode {
namespace {

struct ClassRange {
  char32_t first;
  char32_t last;
  CodePointClass cls;
};

constexpr ClassRange kClassRanges[] = {
#include "unicode_tables.inc"
};

// ASCII is most of most text: answer it from a 128-entry table built from the same ranges.
std::array<CodePointClass, 128> MakeAsciiClasses() {
  std::array<CodePointClass, 128> table{};
  for (const ClassRange& range : kClassRanges) {
    for (char32_t cp = range.first; cp <= range.last && cp < 128; ++cp) table[cp] = range.cls;
  }
  return table;
}

const std::array<CodePointClass, 128> kAsciiClasses = MakeAsciiClasses();

// Table 3-7 of the Unicode Standard: the allowed range of the second byte depends on the first.
struct LeadInfo {
  int length;  // 0: never a valid first byte
  std::uint8_t second_min;
  std::uint8_t second_max;
};

LeadInfo Lead(std::uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes at the start of `bytes` belong to the (possibly incomplete) sequence its first byte starts:
// `valid` is that count, `length` the length the first byte announces (0 when it is not a first byte).
struct Prefix {
  std::size_t valid;
  int length;
};

Prefix ValidPrefix(std::string_view bytes) {
  const auto b0 = static_cast<std::uint8_t>(bytes[0]);
  const LeadInfo lead = Lead(b0);
  if (lead.length <= 1) return {1, lead.length};
  std::size_t n = 1;
  while (n < static_cast<std::size_t>(lead.length) && n < bytes.size()) {
    const auto b = static_cast<std::uint8_t>(bytes[n]);
    const std::uint8_t lo = n == 1 ? lead.second_min : 0x80;
    const std::uint8_t hi = n == 1 ? lead.second_max : 0xBF;
    if (b < lo || b > hi) break;
    ++n;
  }
  return {n, lead.length};
}

}  // namespace

CodePointClass ClassOf(char32_t cp) {
  if (cp < 128) return kAsciiClasses[cp];
  const auto* end = std::end(kClassRanges);
  const auto* it = std::upper_bound(std::begin(kClassRanges), end, cp,
                                    [](char32_t v, const ClassRange& r) { return v < r.first; });
  if (it == std::begin(kClassRanges)) return CodePointClass::kOther;
  --it;
  return cp <= it->last ? it->cls : CodePointClass::kOther;
}

void AppendUtf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::size_t WellFormedLength(std::string_view bytes) {
  if (bytes.empty()) return 0;
  const Prefix prefix = ValidPrefix(bytes);
  return prefix.length > 0 && prefix.valid == static_cast<std::size_t>(prefix.length) ? prefix.valid : 0;
}

std::size_t AppendLossy(std::string_view bytes, bool final, std::string& out) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Prefix prefix = ValidPrefix(bytes.substr(i));
    if (prefix.length > 0 && prefix.valid == static_cast<std::size_t>(prefix.length)) {
      out.append(bytes.data() + i, prefix.valid);
    } else if (!final && prefix.length > 0 && i + prefix.valid == bytes.size()) {
      return i;  // a sequence still waiting for its continuation bytes
    } else {
      AppendUtf8(kReplacementCharacter, out);
    }
    i += prefix.valid;
  }
  return i;
}

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  AppendLossy(bytes, /*final=*/true, out);
  return out;
}

std::vector<CodePoint> DecodeUtf8(std::string_view s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<std::uint8_t>(s[i]);
    char32_t cp;
    std::size_t n;
    if (b0 < 0x80) {
      cp = b0, n = 1;
    } else if (b0 < 0xE0) {
      cp = b0 & 0x1F, n = 2;
    } else if (b0 < 0xF0) {
      cp = b0 & 0x0F, n = 3;
    } else {
      cp = b0 & 0x07, n = 4;
    }
    n = std::min(n, s.size() - i);  // cannot happen for well-formed input; keeps reads in bounds regardless
    for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<std::uint8_t>(s[i + k]) & 0x3F);
    out.push_back({cp, static_cast<std::uint32_t>(i)});
    i += n;
  }
  return out;
}

namespace {

struct ByteMaps {
  std::array<char32_t, 256> to_unicode{};
  std::array<int, 0x144> to_byte{};  // every code point of the alphabet is below U+0144
};

ByteMaps MakeByteMaps() {
  ByteMaps maps;
  maps.to_byte.fill(-1);
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    maps.to_unicode[b] = printable ? static_cast<char32_t>(b) : next++;
    maps.to_byte[maps.to_unicode[b]] = b;
  }
  return maps;
}

const ByteMaps kByteMaps = MakeByteMaps();

}  // namespace

char32_t ByteToUnicode(std::uint8_t byte) {
  return kByteMaps.to_unicode[byte];
}

int UnicodeToByte(char32_t cp) {
  return cp < kByteMaps.to_byte.size() ? kByteMaps.to_byte[cp] : -1;
}

}  // namespace plumb::unicode
