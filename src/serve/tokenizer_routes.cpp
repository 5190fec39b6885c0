#include "tokenizer_routes.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "http_error.h"
#include "plumb/tokenizer/unicode.h"

namespace plumb::serve {
namespace {

using nlohmann::json;

json ParseObject(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) BadRequest("invalid_json", "the body must be a JSON object");
  return j;
}

// Every refusal as OpenAI's error body, as the completion endpoints answer.
template <typename F>
void Answer(httplib::Response& res, F&& f) {
  try {
    res.set_content(f().dump(), "application/json");
  } catch (const HttpError& e) {
    SendError(res, e);
  } catch (const std::exception& e) {
    SendError(res, {400, "invalid_request_error", "invalid_value", e.what()});
  }
}

std::string TokenName(const Tokenizer& tokenizer, int id) {
  return id >= 0 && id < tokenizer.vocab_size() ? tokenizer.spec().tokens[static_cast<std::size_t>(id)] : "";
}

}  // namespace

void RegisterTokenizerRoutes(httplib::Server& http, const Tokenizer& tokenizer, int context) {
  // {"prompt": text, "add_special_tokens": true by default (vLLM's)}: the ids as /v1/completions reads a
  // string prompt, BOS only where asked for and the model adds one.
  http.Post("/tokenize", [&tokenizer, context](const httplib::Request& req, httplib::Response& res) {
    Answer(res, [&] {
      const json body = ParseObject(req.body);
      const json prompt = body.value("prompt", json());
      if (!prompt.is_string()) BadRequest("invalid_type", "'prompt' must be a string");
      const bool add_special = body.value("add_special_tokens", true);
      const std::vector<int> ids = tokenizer.Encode(unicode::ToValidUtf8(prompt.get<std::string>()),
                                                    add_special, /*parse_special=*/true);
      return json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", context}};
    });
  });
  http.Post("/detokenize", [&tokenizer](const httplib::Request& req, httplib::Response& res) {
    Answer(res, [&] {
      const json body = ParseObject(req.body);
      const json tokens = body.value("tokens", json());
      if (!tokens.is_array()) BadRequest("invalid_type", "'tokens' must be an array of token ids");
      std::vector<int> ids;
      for (const json& id : tokens) {
        if (!id.is_number_integer() || id.get<long long>() < 0 ||
            id.get<long long>() >= tokenizer.vocab_size())
          BadRequest("invalid_value", "'tokens' holds " + id.dump() + ", not a token id");
        ids.push_back(id.get<int>());
      }
      return json{{"prompt", tokenizer.Decode(ids)}};
    });
  });
  http.Get("/tokenizer_info", [&tokenizer, context](const httplib::Request&, httplib::Response& res) {
    Answer(res, [&] {
      json info = {{"tokenizer_class", "plumb"},
                   {"model_max_length", context},
                   {"eos_token", TokenName(tokenizer, tokenizer.eos_id())},
                   {"bos_token", nullptr},
                   {"chat_template", tokenizer.chat_template()}};
      if (tokenizer.add_bos()) info["bos_token"] = TokenName(tokenizer, tokenizer.bos_id());
      return info;
    });
  });
}

}  // namespace plumb::serve
