// A token's text for a reader, as plumb tokenize --show pieces and plumb chat's /tokens print it.
#pragma once

#include <string>
#include <string_view>

#include "plumb/tokenizer/tokenizer.h"

namespace plumb::cli {

// Its bytes, with control characters, backslashes and bytes that are not part of a well-formed UTF-8
// character (a piece may hold part of one) written as C escapes.
std::string Escaped(std::string_view bytes);

// What a token stands for: its bytes (Tokenizer::TokenToPiece), or for a token that decodes to nothing
// (control, unknown, unused: <|im_start|>, <s>) its text in the vocabulary; `special` says which.
std::string TokenText(const Tokenizer& tokenizer, int id, bool& special);

// One line's worth: 'bytes' escaped and quoted, or a special token's text bare.
std::string TokenLabel(const Tokenizer& tokenizer, int id);

}  // namespace plumb::cli
