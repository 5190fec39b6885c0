#include "api.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

#include "client_watch.h"
#include "http_error.h"
#include "logprobs.h"
#include "reply_text.h"
#include "tokenizer_routes.h"

namespace plumb::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How often a handler waiting for tokens looks whether its client is still there: a vanished client's
// request runs at most this much (and one step) longer.
constexpr std::chrono::milliseconds kClientCheckEvery{100};

json Usage(std::size_t prompt, std::size_t completion, int cached) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json StatsBody(const EngineStats& s) {
  return {{"active", s.active},
          {"running", s.running},
          {"waiting", s.waiting},
          {"kv_blocks",
           {{"total", s.kv.total_blocks},
            {"used", s.kv.used_blocks},
            {"cached", s.kv.cached_blocks},
            {"free", s.kv.free_blocks}}},
          {"requests", {{"finished", s.finished}, {"cancelled", s.cancelled}, {"refused", s.refused}}},
          {"preemptions", s.preemptions},
          {"prompt_tokens", s.prompt_tokens},
          {"cached_prompt_tokens", s.cached_prompt_tokens}};
}

// OpenAI's tool_calls array: [{"id", "type": "function", "function": {"name", "arguments"}}].
json ToolCallsJson(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls) {
    out.push_back(
        {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

}  // namespace

Api::Api(TextModel& model, const ServerOptions& options, Engine& engine)
    : tokenizer_(model.RequireTokenizer("plumb serve")),
      reader_(tokenizer_, ChatTemplateFor(tokenizer_, options.chat_template), model.StopIds(),
              options.context),
      options_(options),
      engine_(engine) {}

void Api::Register(httplib::Server& http) {
  // `active`: requests running or queued (a test sees a vanished client's request go).
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"status", "ok"}, {"active", engine_.Active()}}.dump(), "application/json");
  });
  // The scheduler and the KV pool as the engine thread last left them: a freed sequence shows as used
  // blocks going back, a shared prefix as cached_prompt_tokens.
  http.Get("/stats", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(StatsBody(engine_.Stats()).dump(), "application/json");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    // max_model_len (vLLM's field): the positions a request may fill, which the chat page shows as context.
    const json model = {{"id", options_.model_name},
                        {"object", "model"},
                        {"created", 0},
                        {"owned_by", "plumb"},
                        {"max_model_len", options_.context}};
    const json list = {{"object", "list"}, {"data", json::array({model})}};
    res.set_content(list.dump(), "application/json");
  });
  http.Post("/v1/chat/completions",
            [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res, /*chat=*/true); });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Handle(req, res, /*chat=*/false);
  });
  RegisterTokenizerRoutes(http, tokenizer_, options_.context);
  // Refusals cpp-httplib makes itself (413 for a body over --max-body-kib, 404, ...) get a JSON body too.
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "HTTP " + std::to_string(res.status) + " for " + req.method + " " + req.path;
    if (res.status == 413) {
      message = "the request body is over the server's limit of " + std::to_string(options_.max_body_bytes) +
                " bytes (--max-body-kib)";
    } else if (res.status == 404) {
      message = "no such endpoint: " + req.method + " " + req.path;
    }
    SendError(res, {res.status, "invalid_request_error", "", message});
  });
}

void Api::Handle(const httplib::Request& req, httplib::Response& res, bool chat) {
  try {
    Respond(reader_.Read(req.body, chat), chat, ClientWatch(req), res);
  } catch (const HttpError& e) {
    SendError(res, e);
  } catch (const json::exception& e) {
    SendError(res, {400, "invalid_request_error", "invalid_type", e.what()});
  }
}

void Api::Respond(Request r, bool chat, const ClientWatch& watch, httplib::Response& res) {
  std::shared_ptr<Channel> channel = engine_.Submit(r.prompt, r.options, r.logprobs);
  auto reply = std::make_shared<ReplyText>(tokenizer_, r.stops);
  const auto request = std::make_shared<const Request>(std::move(r));
  const std::size_t prompt_tokens = request->prompt.size();
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
  const long long created = static_cast<long long>(std::time(nullptr));
  auto envelope = [this, chat, id, created](bool chunk) {
    return json{{"id", id},
                {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
                {"created", created},
                {"model", options_.model_name}};
  };
  // Chat's log-probabilities leave out the stop token that ends a reply: OpenAI's spell the content.
  // Completions list every token read, as lm-evaluation-harness counts on (echo with max_tokens 1: the
  // prompt's tokens and then exactly one).
  const std::vector<int> unlisted = chat ? request->options.stop_ids : std::vector<int>();
  const bool echo = !chat && request->echo;

  if (!request->stream) {
    Outcome o = Collect(*channel, *reply, watch, unlisted, nullptr);
    if (o.client_gone) return;  // nobody reads an answer; the request is aborted and its blocks freed
    if (!o.error.empty()) throw HttpError{400, "invalid_request_error", "invalid_value", o.error};
    json out = envelope(false);
    json choice = {{"index", 0}, {"finish_reason", o.finish_reason}, {"logprobs", nullptr}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", reply->text()}};
      if (request->tool_reply) {
        const ToolReply t = ReadToolReply(*request->tool_reply, reply->text());
        if (!t.calls.empty()) {  // OpenAI's content is null beside calls when there is no text
          choice["message"]["content"] = t.content.empty() ? json(nullptr) : json(t.content);
          choice["message"]["tool_calls"] = ToolCallsJson(t.calls);
          choice["finish_reason"] = "tool_calls";
        } else {
          choice["message"]["content"] = t.content;
        }
      }
      if (request->want_logprobs) choice["logprobs"] = ChatLogprobs(tokenizer_, o.logprobs.tokens);
    } else {
      choice["text"] = (echo ? request->prompt_text : "") + reply->text();
      if (request->want_logprobs) {
        CompletionLogprobs built(tokenizer_);
        if (echo)
          built.AddPrompt(request->prompt, o.logprobs.prompt.value_or(std::vector<PositionLogprobs>()));
        built.Add(o.logprobs.tokens);
        choice["logprobs"] = built.Take();
      }
    }
    out["choices"] = json::array({choice});
    out["usage"] = Usage(prompt_tokens, o.completion_tokens, o.cached_tokens);
    res.set_content(out.dump(), "application/json");
    return;
  }

  // A stream: server-sent events, one chunk per piece of text (each with the log-probabilities of the
  // tokens read since the one before, if asked for), a last chunk with finish_reason, usage if asked for,
  // then [DONE]. The provider runs on this handler's thread after the handler returns.
  // A chat chunk with its own delta (tool calls).
  auto delta_chunk = [envelope](const json& delta, const json& finish) {
    json c = envelope(true);
    c["choices"] =
        json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}}});
    return "data: " + c.dump() + "\n\n";
  };
  auto chunk = [envelope, chat](const std::string& text, const json& finish, const json& logprobs) {
    json c = envelope(true);
    json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", logprobs}};
    if (chat) {
      choice["delta"] = finish.is_null() ? json{{"content", text}} : json::object();
    } else {
      choice["text"] = text;
    }
    c["choices"] = json::array({choice});
    return "data: " + c.dump() + "\n\n";
  };
  const auto built = std::make_shared<CompletionLogprobs>(tokenizer_);
  // The events for a piece of text and the log-probabilities gathered with it; with echo, the prompt's text
  // comes first (with its log-probabilities, once they are known).
  auto events = [this, chunk, chat, echo, request, built](const std::string& piece, Gathered& g) {
    std::string out;
    const bool want = request->want_logprobs;
    if (g.prompt && echo && want) {
      built->AddPrompt(request->prompt, *g.prompt);
      out += chunk(request->prompt_text, nullptr, built->Take());
    }
    g.prompt.reset();
    if (!piece.empty() || (want && !g.tokens.empty())) {
      json logprobs = nullptr;
      if (want && chat) logprobs = ChatLogprobs(tokenizer_, g.tokens);
      if (want && !chat) {
        built->Add(g.tokens);
        logprobs = built->Take();
      }
      out += chunk(piece, nullptr, logprobs);
    }
    g.tokens.clear();
    return out;
  };
  const bool include_usage = request->include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, channel, reply, watch, chunk, delta_chunk, events, envelope, chat, echo, request, unlisted,
       include_usage, prompt_tokens](std::size_t, httplib::DataSink& sink) {
        std::string first;
        if (chat) {  // the role first, as OpenAI's streams begin
          json c = envelope(true);
          c["choices"] = json::array({{{"index", 0},
                                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                                       {"logprobs", nullptr},
                                       {"finish_reason", nullptr}}});
          first = "data: " + c.dump() + "\n\n";
        }
        // Echo without log-probabilities needs nothing from the model: the prompt's text goes at once.
        if (echo && !request->want_logprobs) first += chunk(request->prompt_text, nullptr, nullptr);
        if (!first.empty() && !sink.write(first.data(), first.size())) return false;
        const Outcome o =
            Collect(*channel, *reply, watch, unlisted, [&](const std::string& piece, Gathered& g) {
              // With tools the text is held until the end: only the whole reply tells a call from content.
              const std::string out = events(request->tool_reply ? std::string() : piece, g);
              return out.empty() || sink.write(out.data(), out.size());
            });
        if (o.client_gone) return false;  // the releaser aborts the request
        std::string tail;
        if (!o.error.empty()) {
          tail =
              "data: " + ErrorBody({400, "invalid_request_error", "invalid_value", o.error}).dump() + "\n\n";
        } else {
          std::string finish = o.finish_reason;
          if (request->tool_reply) {
            // As OpenAI streams calls: per call, one delta with its index, id, type, name and empty
            // arguments, then the arguments (plumb sends them whole).
            const ToolReply t = ReadToolReply(*request->tool_reply, reply->text());
            if (!t.content.empty()) tail += chunk(t.content, nullptr, nullptr);
            for (std::size_t i = 0; i < t.calls.size(); ++i) {
              const json head = {{"index", i},
                                 {"id", t.calls[i].id},
                                 {"type", "function"},
                                 {"function", {{"name", t.calls[i].name}, {"arguments", ""}}}};
              tail += delta_chunk({{"tool_calls", json::array({head})}}, nullptr);
              const json rest = {{"index", i}, {"function", {{"arguments", t.calls[i].arguments}}}};
              tail += delta_chunk({{"tool_calls", json::array({rest})}}, nullptr);
            }
            if (!t.calls.empty()) finish = "tool_calls";
          }
          tail += chunk("", finish, nullptr);
          if (include_usage) {
            json u = envelope(true);
            u["choices"] = json::array();
            u["usage"] = Usage(prompt_tokens, o.completion_tokens, o.cached_tokens);
            tail += "data: " + u.dump() + "\n\n";
          }
        }
        tail += "data: [DONE]\n\n";
        if (!sink.write(tail.data(), tail.size())) return false;
        sink.done();
        return true;
      },
      [this, channel](bool success) {
        if (!success) engine_.Cancel(*channel);  // the client went away: free its sequence
      });
}

// Reads the channel to the end (or to a stop string, which cancels the rest), handing each safe piece of
// text, with the log-probabilities gathered since the last, to `send` if given (and the prompt's, once
// known; at the end whatever is left, text or not). A client gone (`send` failing, or the watch seeing its
// socket closed while waiting) cancels the request. Without `send` the log-probabilities stay in the outcome.
Api::Outcome Api::Collect(Channel& channel, ReplyText& reply, const ClientWatch& watch,
                          std::span<const int> unlisted,
                          const std::function<bool(const std::string&, Gathered&)>& send) {
  Outcome o;
  Clock::time_point next_check = Clock::now() + kClientCheckEvery;
  auto client_gone = [&] {
    engine_.Cancel(channel);
    o.client_gone = true;
    return o;
  };
  for (;;) {
    Progress p = engine_.Next(channel, o.completion_tokens, kClientCheckEvery);
    if (!p.error.empty()) {
      o.error = p.error;
      return o;
    }
    o.cached_tokens = p.cached_tokens;
    if (p.prompt_logprobs) o.logprobs.prompt = std::move(p.prompt_logprobs);
    bool stopped = false;
    for (std::size_t k = 0; k < p.new_tokens.size(); ++k) {
      const int token = p.new_tokens[k];
      ++o.completion_tokens;
      if (k < p.new_logprobs.size() && std::find(unlisted.begin(), unlisted.end(), token) == unlisted.end())
        o.logprobs.tokens.push_back(std::move(p.new_logprobs[k]));
      if (reply.Push(token)) {
        stopped = true;
        break;
      }
    }
    if (p.finished && !stopped) stopped = reply.Finish();
    const bool last = stopped || p.finished;
    if (send) {
      const std::string piece = reply.TakeReady();
      const bool flush = o.logprobs.prompt || (last && !o.logprobs.tokens.empty());
      if ((!piece.empty() || flush) && !send(piece, o.logprobs)) return client_gone();
    }
    if (last) {
      if (stopped) engine_.Cancel(channel);
      o.finish_reason = FinishReason(p.reason, stopped);
      return o;
    }
    // Checked by the clock, not per wait: a request that decodes fast never waits out the patience.
    if (Clock::now() >= next_check) {
      if (watch.ClientGone()) return client_gone();
      next_check = Clock::now() + kClientCheckEvery;
    }
  }
}

}  // namespace plumb::serve
