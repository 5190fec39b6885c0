#include "plumb/engine/constraint_vocabulary.h"

#include <string>
#include <vector>

namespace plumb {

std::shared_ptr<const TokenVocabulary> ConstraintVocabulary(const Tokenizer& tokenizer) {
  std::vector<std::string> pieces(static_cast<std::size_t>(tokenizer.vocab_size()));
  for (std::int32_t id = 0; id < tokenizer.vocab_size(); ++id)
    pieces[static_cast<std::size_t>(id)] = tokenizer.TokenToPiece(id);
  return std::make_shared<const TokenVocabulary>(std::move(pieces));
}

}  // namespace plumb
