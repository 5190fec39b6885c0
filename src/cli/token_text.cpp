#include "token_text.h"

#include "plumb/tokenizer/unicode.h"

namespace plumb::cli {

std::string Escaped(std::string_view bytes) {
  std::string out;
  while (!bytes.empty()) {
    const auto c = static_cast<unsigned char>(bytes[0]);
    const std::size_t n = c < 0x80 ? 1 : unicode::WellFormedLength(bytes);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F || n == 0) {
      static const char* const kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
      continue;
    }
    bytes.remove_prefix(1);
  }
  return out;
}

std::string TokenText(const Tokenizer& tokenizer, int id, bool& special) {
  std::string piece = tokenizer.TokenToPiece(id);
  special = piece.empty();
  return special ? tokenizer.spec().tokens[static_cast<std::size_t>(id)] : piece;
}

std::string TokenLabel(const Tokenizer& tokenizer, int id) {
  bool special = false;
  const std::string text = TokenText(tokenizer, id, special);
  if (special) return text;
  std::string label(1, '\'');
  label.append(Escaped(text)).push_back('\'');
  return label;
}

}  // namespace plumb::cli
