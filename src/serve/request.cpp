#include "request.h"

#include <atomic>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "http_error.h"
#include "plumb/core/error.h"
#include "plumb/tokenizer/chat_messages.h"
#include "plumb/tokenizer/unicode.h"

namespace plumb::serve {
namespace {

using nlohmann::json;

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

// Without a "seed" each request gets its own: a Weyl sequence from a random start never repeats one.
std::uint64_t FreshSeed() {
  static std::atomic<std::uint64_t> counter{std::random_device{}()};
  return counter.fetch_add(0x9e3779b97f4a7c15ULL);
}

// Every field besides the prompt, which `r` holds already (its length bounds max_tokens).
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
  // 0 with echo: the prompt scored and nothing generated (how lm-evaluation-harness asks log-likelihoods).
  std::optional<long long> max_tokens = IntegerField(body, "max_tokens", r.echo ? 0 : 1, 1LL << 40);
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
  if (r.echo && r.options.max_new_tokens == 0) r.logprobs.prompt = true;
}

// Chat: `logprobs` true or false and `top_logprobs` 0..20 (only with logprobs). Completions: `logprobs` the
// number of top tokens 0..20 (OpenAI's limit is 5; vLLM's 20) and `echo`.
void ReadLogprobFields(const json& body, bool chat, Request& r) {
  if (chat) {
    r.want_logprobs = BoolField(body, "logprobs");
    const auto top = IntegerField(body, "top_logprobs", 0, 20);
    if (top && !r.want_logprobs) BadRequest("invalid_value", "'top_logprobs' needs 'logprobs' to be true");
    r.logprobs.top = static_cast<int>(top.value_or(0));
  } else {
    const auto top = IntegerField(body, "logprobs", 0, 20);
    r.want_logprobs = top.has_value();
    r.logprobs.top = static_cast<int>(top.value_or(0));
    r.echo = BoolField(body, "echo");
    r.logprobs.prompt = r.echo && r.want_logprobs;
  }
  r.logprobs.sampled = r.want_logprobs;
}

// An assistant message's tool_calls: [{"id": ..., "type": "function", "function": {"name": ...,
// "arguments": "<a JSON object's text>"}}], arguments parsed here so that a malformed one is a 400, not a
// prompt the template cannot write.
std::vector<ToolCall> HistoryToolCalls(const json& message, const std::string& where) {
  const json* calls = Field(message, "tool_calls");
  if (!calls) return {};
  if (!calls->is_array()) BadRequest("invalid_type", where + ".tool_calls must be an array");
  std::vector<ToolCall> out;
  for (std::size_t j = 0; j < calls->size(); ++j) {
    const std::string at = where + ".tool_calls[" + std::to_string(j) + "]";
    const json& call = (*calls)[j];
    const json* function = call.is_object() ? Field(call, "function") : nullptr;
    if (!function || !function->is_object()) BadRequest("invalid_value", at + ".function must be an object");
    if (const json* type = Field(call, "type"); type && *type != "function") {
      BadRequest("invalid_value", at + ".type must be \"function\"");
    }
    ToolCall c;
    if (const json* id = Field(call, "id")) c.id = StringValue(*id, at + ".id");
    const json* name = Field(*function, "name");
    if (!name) BadRequest("invalid_value", at + ".function.name is missing");
    c.name = StringValue(*name, at + ".function.name");
    const json* arguments = Field(*function, "arguments");
    c.arguments = arguments ? StringValue(*arguments, at + ".function.arguments") : "{}";
    bool object = false;
    try {
      object = OrderedJson::parse(c.arguments).is_object();
    } catch (const nlohmann::json::exception&) {
    }
    if (!object) {
      BadRequest("invalid_value",
                 at + ".function.arguments must be the text of a JSON object, not " + arguments->dump());
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

RequestReader::RequestReader(const Tokenizer& tokenizer, ChatTemplate chat_template,
                             std::vector<int> stop_ids, int context)
    : tokenizer_(tokenizer),
      template_(std::move(chat_template)),
      stop_ids_(std::move(stop_ids)),
      context_(context),
      response_format_(tokenizer, stop_ids_) {}

Request RequestReader::Read(const std::string& text, bool chat) const {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::parse_error& e) {
    BadRequest("invalid_json", std::string("the body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) BadRequest("invalid_type", "the body must be a JSON object");
  Request r;
  std::optional<ChatTools> tools;
  if (chat) tools = ChatTools::Read(OrderedJson::parse(text), template_);  // key order kept, as for schemas
  r.prompt = chat ? ChatPrompt(body, *tools) : CompletionPrompt(body, r.prompt_text);
  ReadLogprobFields(body, chat, r);
  ReadCommonFields(body, stop_ids_, context_, chat, r);
  r.options.constraint = response_format_.Read(text);  // the raw text: a schema's property order is kept
  if (tools && tools->active()) {
    // A reply is either a tool call or the response_format's document; plumb does not nest the one in the
    // other (llama.cpp's generic format puts the schema under "response").
    if (r.options.constraint) {
      BadRequest("invalid_value",
                 "'response_format' cannot be combined with 'tools' unless tool_choice is none");
    }
    if (std::optional<Grammar> grammar = tools->ReplyGrammar()) {
      r.options.constraint = response_format_.Constrain(std::move(*grammar), "tools");
    }
    r.tool_reply = tools->ReplyReader();
  }
  return r;
}

// Rendered with the model's chat template as plumb chat does: the template's markers are special tokens,
// the messages' text never is. Tool calls and results are rendered as `tools` says (tool_calls.h).
std::vector<int> RequestReader::ChatPrompt(const json& body, const ChatTools& tools) const {
  const json* messages = Field(body, "messages");
  if (!messages || !messages->is_array() || messages->empty()) {
    BadRequest("invalid_value", "'messages' must be a non-empty array");
  }
  std::vector<ReadChatMessage> read;
  try {
    read = ReadChatMessages(*messages, "messages",
                            {.tools = true, .reader = "plumb serve", .no_tools_hint = ""});
  } catch (const ChatMessageError& e) {
    BadRequest(e.wrong_type() ? "invalid_type" : "invalid_value", e.what());
  }
  std::vector<IncomingMessage> incoming;
  for (const ReadChatMessage& m : read) {
    IncomingMessage message;
    message.role = m.role;
    message.content = unicode::ToValidUtf8(m.content);
    if (message.role == "assistant") message.tool_calls = HistoryToolCalls(*m.json, m.place);
    if (message.role == "tool") {
      message.tool_call_id = StringValue(*Field(*m.json, "tool_call_id"), m.place + ".tool_call_id");
    }
    incoming.push_back(std::move(message));
  }
  try {
    const RenderedChat rendered = template_.RenderWithContents(
        tools.Conversation(incoming), /*add_generation_prompt=*/true, tools.TemplateTools());
    return tokenizer_.EncodeTemplated(rendered.text, /*add_special=*/false, rendered.contents);
  } catch (const Error& e) {  // e.g. a system message for a template without that role
    BadRequest("invalid_value", e.what());
  }
}

// A string, as plumb generate --prompt encodes it: BOS where the model wants one, special-token texts read
// as such. Or token ids, taken as they are (what clients that tokenize themselves send, lm-evaluation-harness
// among them). Either may come as an array of one.
std::vector<int> RequestReader::CompletionPrompt(const json& body, std::string& text) const {
  const json* prompt = Field(body, "prompt");
  if (!prompt) BadRequest("invalid_value", "'prompt' is missing");
  const json* one = prompt;
  if (prompt->is_array() && prompt->size() == 1 && !(*prompt)[0].is_number()) one = &(*prompt)[0];
  std::vector<int> ids;
  if (one->is_array()) {
    for (const json& id : *one) {
      if (!id.is_number_integer() || id.get<long long>() < 0 ||
          id.get<long long>() >= tokenizer_.vocab_size()) {
        BadRequest("invalid_value", "'prompt' token ids must be integers in [0, " +
                                        std::to_string(tokenizer_.vocab_size()) + "), not " + id.dump());
      }
      ids.push_back(id.get<int>());
    }
    text = tokenizer_.Decode(ids);
  } else {
    text = unicode::ToValidUtf8(StringValue(*one, "'prompt'"));
    ids = tokenizer_.Encode(text, /*add_special=*/true, /*parse_special=*/true);
  }
  if (ids.empty()) BadRequest("invalid_value", "'prompt' is empty");
  return ids;
}

}  // namespace plumb::serve
