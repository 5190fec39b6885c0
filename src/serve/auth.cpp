#include "auth.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "http_error.h"

namespace plumb::serve {
namespace {

constexpr std::string_view kScheme = "bearer ";

// The paths open without the key: the page, and counts that carry no prompt or answer.
constexpr std::array<std::string_view, 4> kOpen = {"/", "/health", "/stats", "/metrics"};

bool Guarded(const std::string& path) {
  return std::find(kOpen.begin(), kOpen.end(), path) == kOpen.end();
}

}  // namespace

bool AuthorizationMatches(std::string_view header, std::string_view key) {
  // Every byte of the expected "Bearer KEY" is compared, whatever came, and the differences are OR-ed
  // together rather than returned at the first one.
  unsigned diff = header.size() == kScheme.size() + key.size() ? 0 : 1;
  for (std::size_t i = 0; i < kScheme.size() + key.size(); ++i) {
    const unsigned char got = i < header.size() ? static_cast<unsigned char>(header[i]) : 0;
    const unsigned char want = i < kScheme.size() ? static_cast<unsigned char>(kScheme[i])
                                                  : static_cast<unsigned char>(key[i - kScheme.size()]);
    diff |= (i < kScheme.size() ? static_cast<unsigned>(std::tolower(got)) : got) ^ want;
  }
  return diff == 0;
}

void RequireApiKey(httplib::Server& http, std::string key) {
  if (key.empty()) return;
  http.set_pre_routing_handler([key = std::move(key)](const httplib::Request& req, httplib::Response& res) {
    if (!Guarded(req.path) || AuthorizationMatches(req.get_header_value("Authorization"), key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const bool sent = req.has_header("Authorization");
    SendError(res, {401, "invalid_request_error", "invalid_api_key",
                    sent ? "incorrect API key provided (plumb serve --api-key)"
                         : "this server requires an API key: send the header 'Authorization: Bearer KEY' "
                           "(plumb serve --api-key)"});
    res.set_header("WWW-Authenticate", "Bearer");
    // cpp-httplib 0.11 routes before it reads a body: the connection must not carry another request.
    res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  });
}

}  // namespace plumb::serve
