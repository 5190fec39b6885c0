// A tokenizer's vocabulary as constrained decoding reads it (sample/token_vocabulary.h): each token's bytes,
// Tokenizer::TokenToPiece, so control tokens stand for none and byte-level tokens for their raw bytes,
// parts of a UTF-8 character included. Building it takes tens of milliseconds for a 50k vocabulary: a
// server builds it once and shares it between requests.
#pragma once

#include <memory>

#include "plumb/sample/token_vocabulary.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb {

std::shared_ptr<const TokenVocabulary> ConstraintVocabulary(const Tokenizer& tokenizer);

}  // namespace plumb
