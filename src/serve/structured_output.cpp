#include "structured_output.h"

#include <nlohmann/json.hpp>
#include <string>

#include "http_error.h"
#include "plumb/core/error.h"
#include "plumb/engine/constraint_vocabulary.h"
#include "plumb/sample/json_schema.h"

namespace plumb::serve {

using Json = nlohmann::ordered_json;

ResponseFormatReader::ResponseFormatReader(const Tokenizer& tokenizer, std::vector<int> stop_ids)
    : vocabulary_(ConstraintVocabulary(tokenizer)), stop_ids_(std::move(stop_ids)) {}

std::shared_ptr<const TokenConstraint> ResponseFormatReader::Read(std::string_view body) const {
  Json parsed;
  try {
    parsed = Json::parse(body);
  } catch (const nlohmann::json::exception&) {
    BadRequest("invalid_json", "the request body is not valid JSON");
  }
  const auto format = parsed.is_object() ? parsed.find("response_format") : parsed.end();
  if (!parsed.is_object() || format == parsed.end() || format->is_null()) return nullptr;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
    BadRequest("invalid_type",
               "'response_format' must be an object with a string 'type', not " + format->dump());
  const std::string type = (*format)["type"];
  if (type == "text") return nullptr;
  Grammar grammar;
  if (type == "json_object") {
    grammar = AnyJsonObjectGrammar();
  } else if (type == "json_schema") {
    const auto spec = format->find("json_schema");
    if (spec == format->end() || !spec->is_object() || !spec->contains("schema"))
      BadRequest("invalid_value", "'response_format.json_schema' must be an object with a 'schema'");
    if (const auto strict = spec->find("strict");
        strict != spec->end() && !strict->is_boolean() && !strict->is_null())
      BadRequest("invalid_type", "'response_format.json_schema.strict' must be a boolean");
    try {
      grammar = JsonSchemaGrammar((*spec)["schema"].dump());
    } catch (const Error& e) {
      BadRequest("invalid_value", std::string("'response_format.json_schema.schema': ") + e.what());
    }
  } else {
    BadRequest("invalid_value",
               "'response_format.type' is \"" + type + "\"; plumb takes text, json_object and json_schema");
  }
  return Constrain(std::move(grammar), "response_format");
}

std::shared_ptr<const TokenConstraint> ResponseFormatReader::Constrain(Grammar grammar,
                                                                       const std::string& field) const {
  try {
    return std::make_shared<const TokenConstraint>(std::move(grammar), vocabulary_, stop_ids_);
  } catch (const Error& e) {
    BadRequest("invalid_value", "'" + field + "': " + e.what());
  }
}

}  // namespace plumb::serve
