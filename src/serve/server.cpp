// plumb serve (plumb/serve/server.h): the engine thread, the OpenAI request and response shapes, and the
// HTTP routes (cpp-httplib).
#include "plumb/serve/server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "plumb/core/error.h"
#include "plumb/tokenizer/chat_template.h"
#include "plumb/tokenizer/tokenizer.h"
#include "plumb/tokenizer/unicode.h"

namespace plumb::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A refusal, answered with `status` and OpenAI's error body {"error": {"message", "type", "code"}}.
struct HttpError {
  int status;
  std::string type;  // invalid_request_error, rate_limit_error, server_error
  std::string code;  // a short machine-readable reason ("" = null)
  std::string message;
};

[[noreturn]] void BadRequest(const std::string& code, const std::string& message) {
  throw HttpError{400, "invalid_request_error", code, message};
}

json ErrorBody(const HttpError& e) {
  return {
      {"error",
       {{"message", e.message}, {"type", e.type}, {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

void SendError(httplib::Response& res, const HttpError& e) {
  res.status = e.status;
  res.set_content(ErrorBody(e).dump(), "application/json");
}

// --- the engine thread and the channels to the handlers ------------------------------------------------

// One request's tokens on their way from the engine thread to its handler; guarded by Engine::mu_.
struct Channel {
  std::vector<int> tokens;  // every token sampled so far
  bool finished = false;
  StopReason reason = StopReason::kNone;
  std::string error;    // why Scheduler::Add refused it
  bool cancel = false;  // the handler wants it ended (a stop string matched, the client went away)
  std::condition_variable cv;
};

// What a handler learns from one wait on its channel.
struct Progress {
  std::vector<int> new_tokens;
  bool finished = false;
  StopReason reason = StopReason::kNone;
  std::string error;
};

class Engine {
 public:
  Engine(Model& model, PagedKvCache& cache, const SchedulerOptions& options, int max_queue)
      : scheduler_(model, cache, options), capacity_(options.max_running + max_queue) {}

  // Queues a request for the engine thread. Throws HttpError 503 while draining, 429 when the queue is full.
  std::shared_ptr<Channel> Submit(std::vector<int> prompt, const GenerationOptions& options) {
    auto channel = std::make_shared<Channel>();
    std::lock_guard lock(mu_);
    if (!accepting_) throw HttpError{503, "server_error", "shutting_down", "the server is shutting down"};
    if (active_ >= capacity_) {
      throw HttpError{429, "rate_limit_error", "queue_full",
                      "the server has " + std::to_string(active_) +
                          " requests running or queued, its limit " +
                          "(--max-batch + --max-queue); try again later"};
    }
    ++active_;
    incoming_.push_back({std::move(prompt), options, channel});
    wake_.notify_one();
    return channel;
  }

  // Asks the engine thread to abort the request (a no-op once it has finished).
  void Cancel(Channel& channel) {
    std::lock_guard lock(mu_);
    if (channel.finished || channel.cancel) return;
    channel.cancel = true;
    wake_.notify_one();
  }

  // Waits until the channel holds tokens past `seen` or has finished.
  Progress Next(Channel& channel, std::size_t seen) {
    std::unique_lock lock(mu_);
    channel.cv.wait(lock, [&] { return channel.finished || channel.tokens.size() > seen; });
    Progress p;
    p.new_tokens.assign(channel.tokens.begin() + static_cast<std::ptrdiff_t>(seen), channel.tokens.end());
    p.finished = channel.finished;
    p.reason = channel.reason;
    p.error = channel.error;
    return p;
  }

  int Active() {
    std::lock_guard lock(mu_);
    return active_;
  }
  void StopAccepting() {
    std::lock_guard lock(mu_);
    accepting_ = false;
  }
  // Ends Run(): every request still running is aborted and its handler told so.
  void Shutdown() {
    std::lock_guard lock(mu_);
    shutdown_ = true;
    wake_.notify_one();
  }

  // The engine thread: admits what handlers submitted, aborts what they cancelled, and steps the scheduler
  // while anything runs; it waits only for work, never for a client.
  void Run() {
    for (;;) {
      std::deque<Submission> fresh;
      std::vector<RequestId> cancelled;
      {
        std::unique_lock lock(mu_);
        wake_.wait(lock, [&] { return shutdown_ || !incoming_.empty() || !scheduler_.Idle(); });
        if (shutdown_) {
          for (Submission& s : incoming_) FinishLocked(*s.channel, StopReason::kAborted, "");
          for (auto& [id, channel] : live_) FinishLocked(*channel, StopReason::kAborted, "");
          return;
        }
        fresh.swap(incoming_);
        for (const auto& [id, channel] : live_) {
          if (channel->cancel) cancelled.push_back(id);
        }
      }
      for (Submission& s : fresh) Admit(s);
      for (RequestId id : cancelled) {
        scheduler_.Abort(id);
        End(id);
      }
      if (scheduler_.Idle()) continue;
      const StepReport report = scheduler_.Step();
      std::lock_guard lock(mu_);
      for (const auto& [id, token] : report.new_tokens) {
        Channel& channel = *live_.at(id);
        channel.tokens.push_back(token);
        channel.cv.notify_all();
      }
      for (RequestId id : report.finished) EndLocked(id);
    }
  }

 private:
  struct Submission {
    std::vector<int> prompt;
    GenerationOptions options;
    std::shared_ptr<Channel> channel;
  };

  void Admit(Submission& s) {
    try {
      live_[scheduler_.Add(std::move(s.prompt), s.options)] = s.channel;
    } catch (const Error& e) {  // a prompt the pool can never hold, ids outside the vocabulary
      std::lock_guard lock(mu_);
      FinishLocked(*s.channel, StopReason::kNone, e.what());
    }
  }
  void End(RequestId id) {
    std::lock_guard lock(mu_);
    EndLocked(id);
  }
  void EndLocked(RequestId id) {
    FinishLocked(*live_.at(id), scheduler_.Status(id).finish_reason, "");
    live_.erase(id);
    scheduler_.Forget(id);
  }
  void FinishLocked(Channel& channel, StopReason reason, const std::string& error) {
    channel.finished = true;
    channel.reason = reason;
    channel.error = error;
    --active_;
    channel.cv.notify_all();
  }

  Scheduler scheduler_;                                 // the engine thread's alone
  std::map<RequestId, std::shared_ptr<Channel>> live_;  // the engine thread's alone; channels under mu_
  const int capacity_;

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Submission> incoming_;
  int active_ = 0;  // submitted and not finished
  bool accepting_ = true;
  bool shutdown_ = false;
};

// --- reading a request ----------------------------------------------------------------------------------

const json* Field(const json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> NumberField(const json& body, const char* key, double lo, double hi) {
  const json* v = Field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number())
    BadRequest("invalid_type", std::string("'") + key + "' must be a number, not " + v->dump());
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    BadRequest("invalid_value", std::string("'") + key + "' is " + v->dump() + ", outside [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return x;
}

std::optional<long long> IntegerField(const json& body, const char* key, long long lo, long long hi) {
  const json* v = Field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) {
    BadRequest("invalid_type", std::string("'") + key + "' must be an integer, not " + v->dump());
  }
  const long long x =
      v->is_number_unsigned() && v->get<unsigned long long>() > static_cast<unsigned long long>(hi)
          ? hi + 1
          : v->get<long long>();
  if (x < lo || x > hi) {
    BadRequest("invalid_value", std::string("'") + key + "' is " + v->dump() + ", outside [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return x;
}

bool BoolField(const json& body, const char* key) {
  const json* v = Field(body, key);
  if (!v) return false;
  if (!v->is_boolean())
    BadRequest("invalid_type", std::string("'") + key + "' must be true or false, not " + v->dump());
  return v->get<bool>();
}

const std::string& StringValue(const json& v, const std::string& what) {
  if (!v.is_string()) BadRequest("invalid_type", what + " must be a string, not " + v.dump());
  return v.get_ref<const std::string&>();
}

// `stop`: a string or an array of strings, none empty.
std::vector<std::string> StopStrings(const json& body) {
  const json* v = Field(body, "stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array() && v->size() <= 16) {
    for (const json& s : *v) stops.push_back(StringValue(s, "each of 'stop'"));
  } else {
    BadRequest("invalid_type", "'stop' must be a string or an array of at most 16 strings, not " + v->dump());
  }
  for (const std::string& s : stops) {
    if (s.empty()) BadRequest("invalid_value", "'stop' strings must not be empty");
  }
  return stops;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts, joined.
std::string MessageContent(const json& message, std::size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  const json* content = Field(message, "content");
  if (!content) return "";
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) BadRequest("invalid_type", where + " must be a string or an array of parts");
  std::string text;
  for (const json& part : *content) {
    if (!part.is_object() || part.value("type", json()) != "text") {
      BadRequest("invalid_value", where + ": only parts of type \"text\" are supported, not " + part.dump());
    }
    text += StringValue(part.value("text", json()), where + "[].text");
  }
  return text;
}

std::uint64_t FreshSeed() {
  static std::atomic<std::uint64_t> counter{std::random_device{}()};
  return counter.fetch_add(0x9e3779b97f4a7c15ULL);
}

// What both endpoints take besides the prompt.
struct Request {
  std::vector<int> prompt;
  GenerationOptions options;
  std::vector<std::string> stops;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
};

void ReadCommonFields(const json& body, const std::vector<int>& stop_ids, int context, bool chat,
                      Request& r) {
  if (const auto n = IntegerField(body, "n", 1, 1)) (void)n;  // only one choice per request
  r.stream = BoolField(body, "stream");
  if (const json* so = Field(body, "stream_options")) {
    if (!so->is_object()) BadRequest("invalid_type", "'stream_options' must be an object");
    r.include_usage = BoolField(*so, "include_usage");
  }
  const int room = context - static_cast<int>(r.prompt.size());
  if (room < 1) {
    BadRequest("context_length_exceeded", "the prompt is " + std::to_string(r.prompt.size()) +
                                              " tokens, which leaves no room in the context of " +
                                              std::to_string(context) + " positions");
  }
  std::optional<long long> max_tokens = IntegerField(body, "max_tokens", 1, 1LL << 40);
  if (chat && !max_tokens) max_tokens = IntegerField(body, "max_completion_tokens", 1, 1LL << 40);
  // Capped by the context: a client asking for more gets what fits, and finish_reason "length".
  r.options.max_new_tokens = static_cast<int>(std::min<long long>(max_tokens.value_or(room), room));
  SamplingParams& s = r.options.sampling;
  s.temperature = static_cast<float>(NumberField(body, "temperature", 0, 2).value_or(1.0));
  s.top_p = static_cast<float>(NumberField(body, "top_p", 0, 1).value_or(1.0));
  s.top_k = static_cast<int>(IntegerField(body, "top_k", 0, 1 << 30).value_or(0));
  s.min_p = static_cast<float>(NumberField(body, "min_p", 0, 1).value_or(0.0));
  const auto seed = IntegerField(body, "seed", std::numeric_limits<long long>::min(),
                                 std::numeric_limits<long long>::max());
  s.seed = seed ? static_cast<std::uint64_t>(*seed) : FreshSeed();
  try {
    ValidateSamplingParams(s);
  } catch (const Error& e) {
    BadRequest("invalid_value", e.what());
  }
  r.options.stop_ids = stop_ids;
  r.stops = StopStrings(body);
}

// --- text out -------------------------------------------------------------------------------------------

// The reply's text as tokens arrive: whole UTF-8 characters, cut at the first stop string, and holding back
// a tail that could still become the start of one, so a stream never sends text it must take back.
class ReplyText {
 public:
  ReplyText(const Tokenizer& tokenizer, std::vector<std::string> stops)
      : decoder_(tokenizer), stops_(std::move(stops)) {}

  // Adds a token's text; true once a stop string has matched (the text ends before it).
  bool Push(int token) {
    text_ += decoder_.Push(token);
    return CheckStops();
  }
  bool Finish() {
    text_ += decoder_.Flush();
    finished_ = true;
    return CheckStops();
  }
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }

  // The text that is now safe to send and was not sent before.
  std::string TakeReady() {
    std::size_t ready = text_.size();
    if (!stopped_ && !finished_) ready -= HeldBack();
    if (ready <= sent_) return "";
    std::string piece = text_.substr(sent_, ready - sent_);
    sent_ = ready;
    return piece;
  }

 private:
  bool CheckStops() {
    if (stopped_) return true;
    for (const std::string& stop : stops_) {
      const std::size_t from = sent_ > stop.size() ? sent_ - stop.size() : 0;
      const std::size_t at = text_.find(stop, from);
      if (at != std::string::npos) {
        text_.resize(at);
        stopped_ = true;
      }
    }
    return stopped_;
  }
  // The longest tail of the unsent text that is a proper prefix of a stop string. It starts at a character
  // boundary, because a stop string does.
  std::size_t HeldBack() const {
    std::size_t held = 0;
    for (const std::string& stop : stops_) {
      for (std::size_t k = std::min(stop.size() - 1, text_.size() - sent_); k > held; --k) {
        if (std::string_view(text_).ends_with(std::string_view(stop).substr(0, k))) {
          held = k;
          break;
        }
      }
    }
    return held;
  }

  StreamingDecoder decoder_;
  std::vector<std::string> stops_;
  std::string text_;
  std::size_t sent_ = 0;
  bool stopped_ = false;
  bool finished_ = false;
};

const char* FinishReason(StopReason reason, bool stop_string) {
  if (stop_string || reason == StopReason::kStopToken) return "stop";
  if (reason == StopReason::kMaxTokens || reason == StopReason::kContextFull) return "length";
  return "abort";  // the server shut down while it ran
}

// --- the server -----------------------------------------------------------------------------------------

class Api {
 public:
  Api(TextModel& model, const ServerOptions& options, Engine& engine)
      : tokenizer_(model.RequireTokenizer("plumb serve")),
        template_(ChatTemplateFor(tokenizer_, options.chat_template)),
        stop_ids_(model.StopIds()),
        options_(options),
        engine_(engine) {}

  void Register(httplib::Server& http) {
    // `active`: requests running or queued (a test sees a vanished client's request go).
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(json{{"status", "ok"}, {"active", engine_.Active()}}.dump(), "application/json");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      const json list = {
          {"object", "list"},
          {"data",
           json::array(
               {{{"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "plumb"}}})}};
      res.set_content(list.dump(), "application/json");
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Handle(req, res, /*chat=*/true);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Handle(req, res, /*chat=*/false);
    });
    // Refusals cpp-httplib makes itself (413 for a body over --max-body-kib, 404, ...) get a JSON body too.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string message = "HTTP " + std::to_string(res.status) + " for " + req.method + " " + req.path;
      if (res.status == 413) {
        message = "the request body is over the server's limit of " +
                  std::to_string(options_.max_body_bytes) + " bytes (--max-body-kib)";
      } else if (res.status == 404) {
        message = "no such endpoint: " + req.method + " " + req.path;
      }
      SendError(res, {res.status, "invalid_request_error", "", message});
    });
  }

 private:
  void Handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    try {
      json body;
      try {
        body = json::parse(req.body);
      } catch (const json::parse_error& e) {
        BadRequest("invalid_json", std::string("the body is not valid JSON: ") + e.what());
      }
      if (!body.is_object()) BadRequest("invalid_type", "the body must be a JSON object");
      Request r;
      r.prompt = chat ? ChatPrompt(body) : CompletionPrompt(body);
      ReadCommonFields(body, stop_ids_, options_.context, chat, r);
      Respond(std::move(r), chat, res);
    } catch (const HttpError& e) {
      SendError(res, e);
    } catch (const json::exception& e) {
      SendError(res, {400, "invalid_request_error", "invalid_type", e.what()});
    }
  }

  // Rendered with the model's chat template as plumb chat does: the template's markers are special tokens,
  // the messages' text never is.
  std::vector<int> ChatPrompt(const json& body) {
    const json* messages = Field(body, "messages");
    if (!messages || !messages->is_array() || messages->empty()) {
      BadRequest("invalid_value", "'messages' must be a non-empty array");
    }
    std::vector<ChatMessage> chat;
    for (std::size_t i = 0; i < messages->size(); ++i) {
      const json& m = (*messages)[i];
      if (!m.is_object()) BadRequest("invalid_type", "messages[" + std::to_string(i) + "] must be an object");
      const json* role = Field(m, "role");
      if (!role) BadRequest("invalid_value", "messages[" + std::to_string(i) + "] has no 'role'");
      std::string name = StringValue(*role, "messages[" + std::to_string(i) + "].role");
      if (name == "developer") name = "system";  // OpenAI's newer name for the system role
      if (name != "system" && name != "user" && name != "assistant") {
        BadRequest("invalid_value", "messages[" + std::to_string(i) + "].role is \"" + name +
                                        "\"; plumb serve takes system, user and assistant");
      }
      chat.push_back({name, unicode::ToValidUtf8(MessageContent(m, i))});
    }
    try {
      const RenderedChat rendered = template_.RenderWithContents(chat, /*add_generation_prompt=*/true);
      return tokenizer_.EncodeTemplated(rendered.text, /*add_special=*/false, rendered.contents);
    } catch (const Error& e) {  // e.g. a system message for a template without that role
      BadRequest("invalid_value", e.what());
    }
  }

  // As plumb generate --prompt encodes it: BOS where the model wants one, special-token texts read as such.
  std::vector<int> CompletionPrompt(const json& body) {
    const json* prompt = Field(body, "prompt");
    if (!prompt) BadRequest("invalid_value", "'prompt' is missing");
    const json* text = prompt;
    if (prompt->is_array() && prompt->size() == 1) text = &(*prompt)[0];
    std::vector<int> ids = tokenizer_.Encode(unicode::ToValidUtf8(StringValue(*text, "'prompt'")),
                                             /*add_special=*/true, /*parse_special=*/true);
    if (ids.empty()) BadRequest("invalid_value", "'prompt' is empty");
    return ids;
  }

  static json Usage(std::size_t prompt, std::size_t completion) {
    return {
        {"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
  }

  void Respond(Request r, bool chat, httplib::Response& res) {
    std::shared_ptr<Channel> channel = engine_.Submit(r.prompt, r.options);
    auto reply = std::make_shared<ReplyText>(tokenizer_, r.stops);
    const std::size_t prompt_tokens = r.prompt.size();
    const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
    const long long created = static_cast<long long>(std::time(nullptr));
    auto envelope = [this, chat, id, created](bool chunk) {
      return json{
          {"id", id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", created},
          {"model", options_.model_name}};
    };

    if (!r.stream) {
      Outcome o = Collect(*channel, *reply, nullptr);
      if (!o.error.empty()) throw HttpError{400, "invalid_request_error", "invalid_value", o.error};
      json out = envelope(false);
      json choice = {{"index", 0}, {"finish_reason", o.finish_reason}};
      if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", reply->text()}};
      } else {
        choice["text"] = reply->text();
        choice["logprobs"] = nullptr;
      }
      out["choices"] = json::array({choice});
      out["usage"] = Usage(prompt_tokens, o.completion_tokens);
      res.set_content(out.dump(), "application/json");
      return;
    }

    // A stream: server-sent events, one chunk per piece of text, a last chunk with finish_reason, usage if
    // asked for, then [DONE]. The provider runs on this handler's thread after the handler returns.
    auto chunk = [envelope, chat](const std::string& text, const json& finish) {
      json c = envelope(true);
      json choice = {{"index", 0}, {"finish_reason", finish}};
      if (chat) {
        choice["delta"] = text.empty() && finish.is_null() ? json{{"role", "assistant"}, {"content", ""}}
                          : finish.is_null()               ? json{{"content", text}}
                                                           : json::object();
      } else {
        choice["text"] = text;
        choice["logprobs"] = nullptr;
      }
      c["choices"] = json::array({choice});
      return "data: " + c.dump() + "\n\n";
    };
    const bool include_usage = r.include_usage;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, channel, reply, chunk, envelope, chat, include_usage, prompt_tokens](std::size_t,
                                                                                    httplib::DataSink& sink) {
          if (chat) {  // the role first, as OpenAI's streams begin
            const std::string first = chunk("", nullptr);
            if (!sink.write(first.data(), first.size())) return false;
          }
          bool client_gone = false;
          const Outcome o = Collect(*channel, *reply, [&](const std::string& piece) {
            const std::string event = chunk(piece, nullptr);
            if (!sink.write(event.data(), event.size())) client_gone = true;
            return !client_gone;
          });
          if (client_gone) return false;  // the releaser aborts the request
          std::string tail;
          if (!o.error.empty()) {
            tail = "data: " + ErrorBody({400, "invalid_request_error", "invalid_value", o.error}).dump() +
                   "\n\n";
          } else {
            tail = chunk("", o.finish_reason);
            if (include_usage) {
              json u = envelope(true);
              u["choices"] = json::array();
              u["usage"] = Usage(prompt_tokens, o.completion_tokens);
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

  struct Outcome {
    std::string finish_reason;
    std::size_t completion_tokens = 0;
    std::string error;
  };

  // Reads the channel to the end (or to a stop string, which cancels the rest), handing each safe piece of
  // text to `send` if given; `send` returning false (the client is gone) cancels the request.
  Outcome Collect(Channel& channel, ReplyText& reply, const std::function<bool(const std::string&)>& send) {
    Outcome o;
    for (;;) {
      Progress p = engine_.Next(channel, o.completion_tokens);
      if (!p.error.empty()) {
        o.error = p.error;
        return o;
      }
      bool stopped = false;
      for (int token : p.new_tokens) {
        ++o.completion_tokens;
        if (reply.Push(token)) {
          stopped = true;
          break;
        }
      }
      if (p.finished && !stopped) stopped = reply.Finish();
      if (send) {
        const std::string piece = reply.TakeReady();
        if (!piece.empty() && !send(piece)) {
          engine_.Cancel(channel);
          return o;
        }
      }
      if (stopped || p.finished) {
        if (stopped) engine_.Cancel(channel);
        o.finish_reason = FinishReason(p.reason, stopped);
        return o;
      }
    }
  }

  const Tokenizer& tokenizer_;
  const ChatTemplate template_;
  const std::vector<int> stop_ids_;
  const ServerOptions& options_;
  Engine& engine_;
  std::atomic<long long> next_id_{1};
};

}  // namespace

int Serve(TextModel& model, const ServerOptions& options, std::ostream& log) {
  // SIGINT and SIGTERM are taken by sigwait below, so every thread started from here must block them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  PagedKvCache cache(options.kv);
  Engine engine(model.model, cache, options.scheduler, options.max_queue);
  Api api(model, options, engine);
  httplib::Server http;
  http.set_payload_max_length(options.max_body_bytes);
  const int threads = options.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  api.Register(http);

  const int port = options.port == 0 ? http.bind_to_any_port(options.host)
                                     : (http.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port < 0) {
    throw MakeError("plumb serve: cannot listen on ", options.host, ":", options.port,
                    " (in use, or not an address of this host)");
  }
  std::thread engine_thread([&] { engine.Run(); });
  std::thread listener([&] { http.listen_after_bind(); });
  log << "plumb serve: " << options.model_name << " on http://" << options.host << ":" << port
      << "/v1 (Ctrl-C to stop)" << std::endl;

  int signal = 0;
  sigwait(&signals, &signal);
  log << "plumb serve: " << (signal == SIGINT ? "SIGINT" : "SIGTERM") << ": draining " << engine.Active()
      << " request(s)" << std::endl;
  engine.StopAccepting();
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(options.drain_seconds));
  while (engine.Active() > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (engine.Active() > 0) log << "plumb serve: aborting " << engine.Active() << " request(s)" << std::endl;
  engine.Shutdown();
  engine_thread.join();
  http.stop();
  listener.join();
  log << "plumb serve: stopped" << std::endl;
  return 0;
}

}  // namespace plumb::serve
