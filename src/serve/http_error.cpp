#include "http_error.h"

#include <httplib.h>

namespace plumb::serve {

void BadRequest(const std::string& code, const std::string& message) {
  throw HttpError{400, "invalid_request_error", code, message};
}

nlohmann::json ErrorBody(const HttpError& e) {
  using nlohmann::json;
  return {
      {"error",
       {{"message", e.message}, {"type", e.type}, {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

void SendError(httplib::Response& res, const HttpError& e) {
  res.status = e.status;
  res.set_content(ErrorBody(e).dump(), "application/json");
}

}  // namespace plumb::serve
