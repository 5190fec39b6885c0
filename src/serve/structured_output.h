// OpenAI's response_format -> the constraint that keeps a reply in it (docs/serve.md, "Structured output"):
//   absent, null or {"type": "text"}                 no constraint
//   {"type": "json_object"}                          any JSON object
//   {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}}
//                                                    a document valid against the schema
//                                                    (sample/json_schema.h; strict true or false alike: it is
//                                                    always enforced)
// Every refusal (a malformed response_format, a schema keyword plumb cannot enforce) is a 400 naming it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "plumb/sample/token_constraint.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb::serve {

class ResponseFormatReader {
 public:
  // Builds the vocabulary's trie once (tens of milliseconds); `stop_ids` end a document, as they end a reply.
  ResponseFormatReader(const Tokenizer& tokenizer, std::vector<int> stop_ids);

  // The body's response_format; null for none. `body` is the request's JSON text, read again here so that a
  // schema's properties keep their order (the order they are generated in). Throws HttpError (400).
  std::shared_ptr<const TokenConstraint> Read(std::string_view body) const;
  // A grammar of plumb's own (tool calls' reply) as a constraint over the same vocabulary; throws HttpError
  // (400) naming `field` if it cannot be applied.
  std::shared_ptr<const TokenConstraint> Constrain(Grammar grammar, const std::string& field) const;

 private:
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::vector<int> stop_ids_;
};

}  // namespace plumb::serve
