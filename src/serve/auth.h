// --api-key: OpenAI's bearer-token authentication. Every path requires `Authorization: Bearer KEY` but four:
// / (a static page that holds no secret), /health, /stats and /metrics (counts, never text), open as vLLM
// leaves them, so a Prometheus scraper or a load balancer's probe needs no secret. A route added later is
// guarded unless it joins that list (docs/serve.md, "API key").
#pragma once

#include <string>
#include <string_view>

namespace httplib {
class Server;
}

namespace plumb::serve {

// True when `header` (an Authorization header's value) is "Bearer " + key, the scheme in any case (RFC
// 7235). Takes time that depends on the lengths alone, never on where the first differing byte is, so the
// key cannot be found byte by byte from response times.
bool AuthorizationMatches(std::string_view header, std::string_view key);

// Refuses a request to a guarded path without the key before it is routed: 401 with OpenAI's body (type
// invalid_request_error, code invalid_api_key, as api.openai.com answers; the `openai` client raises
// AuthenticationError) and `Connection: close`, because the request's body is left unread. Takes the
// server's pre-routing handler. A key of "" requires nothing (and installs nothing).
void RequireApiKey(httplib::Server& http, std::string key);

}  // namespace plumb::serve
