// Every refusal plumb serve makes is an HTTP status with OpenAI's error body, so the `openai` client raises
// its typed errors (BadRequestError, RateLimitError, ...) with the message (docs/serve.md, "Limits and
// errors").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace httplib {
struct Response;
}

namespace plumb::serve {

// A refusal, answered with `status` and the body {"error": {"message", "type", "code"}}.
struct HttpError {
  int status;
  std::string type;  // invalid_request_error, rate_limit_error, server_error
  std::string code;  // a short machine-readable reason ("" = null)
  std::string message;
};

// Throws a 400 invalid_request_error: what every check of a request body raises.
[[noreturn]] void BadRequest(const std::string& code, const std::string& message);

nlohmann::json ErrorBody(const HttpError& e);
void SendError(httplib::Response& res, const HttpError& e);

}  // namespace plumb::serve
