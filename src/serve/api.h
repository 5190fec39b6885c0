// The HTTP routes of plumb serve: OpenAI's endpoints, their JSON responses and server-sent event streams,
// and the server's own GET /health and GET /stats (docs/serve.md).
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine.h"
#include "plumb/engine/text_model.h"
#include "plumb/serve/server.h"
#include "request.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace plumb::serve {

class ClientWatch;
class ReplyText;

class Api {
 public:
  Api(TextModel& model, const ServerOptions& options, Engine& engine);

  void Register(httplib::Server& http);

 private:
  // Log-probabilities Collect has read and not yet handed on.
  struct Gathered {
    std::vector<PositionLogprobs> tokens;                 // of the reply's tokens, in order
    std::optional<std::vector<PositionLogprobs>> prompt;  // prompt[1..]'s, once the Scheduler scored them
  };

  // How a request ended, as far as its handler saw it.
  struct Outcome {
    std::string finish_reason;
    std::size_t completion_tokens = 0;
    int cached_tokens = 0;
    std::string error;         // Scheduler::Add refused it
    bool client_gone = false;  // the request was cancelled because its client went away
    Gathered logprobs;         // what `send` did not take (all of them without `send`)
  };

  void Handle(const httplib::Request& req, httplib::Response& res, bool chat);
  void Respond(Request r, bool chat, const ClientWatch& watch, httplib::Response& res);
  // `unlisted`: tokens whose log-probabilities the reply leaves out (chat's stop tokens).
  Outcome Collect(Channel& channel, ReplyText& reply, const ClientWatch& watch, std::span<const int> unlisted,
                  const std::function<bool(const std::string&, Gathered&)>& send);

  const Tokenizer& tokenizer_;
  const RequestReader reader_;
  const ServerOptions& options_;
  Engine& engine_;
  std::atomic<long long> next_id_{1};
};

}  // namespace plumb::serve
