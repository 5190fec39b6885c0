#include "tool_calls.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <set>

#include "http_error.h"
#include "plumb/core/error.h"
#include "plumb/sample/json_schema.h"

namespace plumb::serve {
namespace {

const OrderedJson* Member(const OrderedJson& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// OpenAI's rule for function names: what a name in a call can be matched against without quoting.
bool ValidFunctionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  }
  return true;
}

bool HasRef(const OrderedJson& schema) {
  if (schema.is_object()) {
    for (const auto& [key, value] : schema.items()) {
      if (key == "$ref" || HasRef(value)) return true;
    }
  } else if (schema.is_array()) {
    for (const OrderedJson& item : schema) {
      if (HasRef(item)) return true;
    }
  }
  return false;
}

// A tool without parameters takes none: {}.
OrderedJson ParametersOf(const OrderedJson& function) {
  const OrderedJson* parameters = Member(function, "parameters");
  return parameters ? *parameters : OrderedJson{{"type", "object"}, {"properties", OrderedJson::object()}};
}

// Ids need only be unique within a conversation; a random start and a Weyl step never repeat one (24 hex
// digits: the step's 64 bits and 32 of a mix of them, so that consecutive ids do not look alike).
std::string FreshCallId() {
  static std::atomic<std::uint64_t> counter{(std::uint64_t{std::random_device{}()} << 32) ^
                                            std::random_device{}()};
  const std::uint64_t step = counter.fetch_add(0x9e3779b97f4a7c15ULL);
  const std::uint64_t mix = (step ^ (step >> 31)) * 0xbf58476d1ce4e5b9ULL;
  constexpr char kHex[] = "0123456789abcdef";
  std::string id = "call_";
  for (int shift = 60; shift >= 32; shift -= 4) id += kHex[(mix >> shift) & 0xF];
  for (int shift = 60; shift >= 0; shift -= 4) id += kHex[(step >> shift) & 0xF];
  return id;
}

// The generic format's text of calls: {"tool_call": {...}} for one, {"tool_calls": [...]} for more.
std::string GenericCallsText(const std::vector<ToolCall>& calls) {
  OrderedJson items = OrderedJson::array();
  for (const ToolCall& call : calls) {
    items.push_back({{"name", call.name}, {"arguments", OrderedJson::parse(call.arguments)}});
  }
  const OrderedJson text =
      calls.size() == 1 ? OrderedJson{{"tool_call", items[0]}} : OrderedJson{{"tool_calls", items}};
  return TemplateJson(text.dump());
}

bool IsSpace(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// {"name": <one of names>, "arguments": {...}} -> a call; nullopt for anything else.
std::optional<ToolCall> CallOf(const OrderedJson& value, const std::vector<std::string>& names) {
  const OrderedJson* name = Member(value, "name");
  const OrderedJson* arguments = Member(value, "arguments");
  if (!name || !name->is_string() || !arguments || !arguments->is_object()) return std::nullopt;
  if (std::find(names.begin(), names.end(), name->get<std::string>()) == names.end()) return std::nullopt;
  return ToolCall{FreshCallId(), name->get<std::string>(), arguments->dump()};
}

std::optional<OrderedJson> ParseJson(std::string_view text) {
  try {
    return OrderedJson::parse(text);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// The generic format: the whole reply is one JSON document (constrained decoding wrote it).
std::optional<ToolReply> ReadGeneric(const std::vector<std::string>& names, const std::string& text) {
  const std::optional<OrderedJson> reply = ParseJson(text);
  if (!reply || !reply->is_object() || reply->size() != 1) return std::nullopt;
  ToolReply out;
  if (const OrderedJson* response = Member(*reply, "response"); response && response->is_string()) {
    out.content = response->get<std::string>();
    return out;
  }
  std::vector<OrderedJson> items;
  if (const OrderedJson* one = Member(*reply, "tool_call")) items.push_back(*one);
  if (const OrderedJson* many = Member(*reply, "tool_calls"); many && many->is_array()) {
    items.assign(many->begin(), many->end());
  }
  if (items.empty()) return std::nullopt;
  for (const OrderedJson& item : items) {
    std::optional<ToolCall> call = CallOf(item, names);
    if (!call) return std::nullopt;
    out.calls.push_back(std::move(*call));
  }
  return out;
}

// A generic reply cut short (max_tokens) inside {"response": "...: the string so far, decoded, so that the
// client gets text rather than the JSON around it. An escape cut in half is left out.
std::optional<std::string> CutResponse(const std::string& text) {
  std::string_view rest = text;
  for (const std::string_view part :
       {std::string_view("{\"response\":"), std::string_view(" "), std::string_view("\"")}) {
    if (rest.starts_with(part)) {
      rest.remove_prefix(part.size());
    } else if (part != " ") {
      return std::nullopt;
    }
  }
  for (std::size_t i = 0; i < rest.size(); i += rest[i] == '\\' ? 2 : 1) {
    if (rest[i] == '"') return std::nullopt;  // the string ended: not a cut reply
  }
  std::string raw(rest);
  // Back to before a partial escape: a trailing backslash, or \u with fewer than 4 digits, or a high
  // surrogate's \uXXXX whose pair is missing (nlohmann refuses it alone).
  for (int tries = 0; tries < 3; ++tries) {
    if (std::optional<OrderedJson> s = ParseJson("\"" + raw + "\""); s && s->is_string())
      return s->get<std::string>();
    const std::size_t slash = raw.rfind('\\');
    if (slash == std::string::npos || raw.size() - slash > 6) return std::nullopt;
    raw.resize(slash);
  }
  return std::nullopt;
}

// Qwen's (Hermes') format: text, then <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> blocks
// with only whitespace between and after them. Content is the text before the first block, without the
// whitespace that separates it from the block.
std::optional<ToolReply> ReadQwen(const std::vector<std::string>& names, const std::string& text) {
  constexpr std::string_view kOpen = "<tool_call>";
  constexpr std::string_view kClose = "</tool_call>";
  ToolReply out;
  std::size_t at = text.find(kOpen);
  if (at == std::string::npos) {
    out.content = text;
    return out;
  }
  out.content = std::string(Trim(std::string_view(text).substr(0, at)));
  std::string_view rest = std::string_view(text).substr(at);
  while (!rest.empty()) {
    if (!rest.starts_with(kOpen)) return std::nullopt;
    const std::size_t close = rest.find(kClose);
    if (close == std::string_view::npos) return std::nullopt;  // cut off inside a call
    const std::optional<OrderedJson> value = ParseJson(Trim(rest.substr(kOpen.size(), close - kOpen.size())));
    if (!value) return std::nullopt;
    std::optional<ToolCall> call = CallOf(*value, names);
    if (!call) return std::nullopt;
    out.calls.push_back(std::move(*call));
    rest = Trim(rest.substr(close + kClose.size()));
  }
  return out;
}

}  // namespace

ChatTools ChatTools::Read(const OrderedJson& body, const ChatTemplate& chat_template) {
  ChatTools t;
  t.template_ = &chat_template;
  const bool generic = chat_template.tool_format() == ToolFormat::kNone;
  if (const OrderedJson* tools = Member(body, "tools")) {
    if (!tools->is_array()) BadRequest("invalid_type", "'tools' must be an array of tools");
    std::set<std::string> names;
    for (std::size_t i = 0; i < tools->size(); ++i) {
      const std::string where = "tools[" + std::to_string(i) + "]";
      const OrderedJson& tool = (*tools)[i];
      const OrderedJson* type = Member(tool, "type");
      if (!type || *type != "function") {
        BadRequest("invalid_value", where + ".type must be \"function\" (the only kind of tool), not " +
                                        (type ? type->dump() : std::string("missing")));
      }
      const OrderedJson* function = Member(tool, "function");
      if (!function || !function->is_object())
        BadRequest("invalid_value", where + ".function must be an object");
      const OrderedJson* name = Member(*function, "name");
      if (!name || !name->is_string() || !ValidFunctionName(name->get<std::string>())) {
        BadRequest("invalid_value", where + ".function.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -, not " +
                                        (name ? name->dump() : std::string("missing")));
      }
      if (!names.insert(name->get<std::string>()).second) {
        BadRequest("invalid_value", where + ".function.name " + name->dump() + " is given twice");
      }
      if (const OrderedJson* d = Member(*function, "description"); d && !d->is_string()) {
        BadRequest("invalid_type", where + ".function.description must be a string");
      }
      const OrderedJson parameters = ParametersOf(*function);
      const std::string field = where + ".function.parameters";
      if (!parameters.is_object() || (parameters.contains("type") && parameters["type"] != "object")) {
        BadRequest("invalid_value",
                   field + " must be a JSON schema of type \"object\", not " + parameters.dump());
      }
      if (generic) {  // the schema becomes part of the reply's grammar: it must be one plumb enforces
        if (HasRef(parameters)) {
          BadRequest("invalid_value", field +
                                          ": $ref is not supported in tool parameters (its pointers would "
                                          "not resolve inside the reply's schema)");
        }
        try {
          (void)JsonSchemaGrammar(parameters.dump());
        } catch (const Error& e) {
          BadRequest("invalid_value", field + ": " + e.what());
        }
      }
      t.tools_.push_back(tool);
      t.functions_.push_back(*function);
    }
  }
  const OrderedJson* choice = Member(body, "tool_choice");
  if (choice && choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "none") {
      t.choice_ = ToolChoice::kNone;
    } else if (c == "auto") {
      t.choice_ = ToolChoice::kAuto;
    } else if (c == "required") {
      t.choice_ = ToolChoice::kRequired;
    } else {
      BadRequest("invalid_value", "'tool_choice' is \"" + c + "\"; it takes none, auto, required or " +
                                      "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
  } else if (choice) {
    const OrderedJson* function = Member(*choice, "function");
    const OrderedJson* name = function ? Member(*function, "name") : nullptr;
    if (!choice->is_object() || Member(*choice, "type") == nullptr || (*choice)["type"] != "function" ||
        !name || !name->is_string()) {
      BadRequest("invalid_value",
                 "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
                 "\"function\": {\"name\": ...}}, not " +
                     choice->dump());
    }
    t.choice_ = ToolChoice::kNamed;
    t.named_ = name->get<std::string>();
    const bool known = std::any_of(t.functions_.begin(), t.functions_.end(),
                                   [&](const OrderedJson& f) { return f["name"] == t.named_; });
    if (!known) {
      BadRequest("invalid_value",
                 "'tool_choice' names the function \"" + t.named_ + "\", which is not in 'tools'");
    }
  }
  if ((t.choice_ == ToolChoice::kRequired) && t.functions_.empty()) {
    BadRequest("invalid_value", "'tool_choice' is \"required\" but there are no 'tools'");
  }
  if (const OrderedJson* parallel = Member(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) BadRequest("invalid_type", "'parallel_tool_calls' must be true or false");
    t.parallel_ = parallel->get<bool>();
  }
  return t;
}

std::vector<std::string> ChatTools::CallableNames() const {
  if (choice_ == ToolChoice::kNamed) return {named_};
  std::vector<std::string> names;
  for (const OrderedJson& f : functions_) names.push_back(f["name"].get<std::string>());
  return names;
}

// The generic format's instructions (docs/serve.md, "Tool calls"): the tools one per line, then the JSON the
// reply must be, which constrained decoding enforces anyway; the text tells the model what the fields mean.
std::string ChatTools::GenericSystemText() const {
  std::string text =
      "You can call the following tools; each line is one tool, with the JSON Schema of its "
      "arguments:\n";
  for (const OrderedJson& f : functions_) text += TemplateJson(f.dump()) + "\n";
  const std::string call = "{\"name\": \"<tool name>\", \"arguments\": {<its arguments>}}";
  const std::string calls = parallel_
                                ? "`tool_calls` (a list of tool calls: {\"tool_calls\": [" + call + "]})"
                                : "`tool_call` (a request to call a tool: {\"tool_call\": " + call + "})";
  text += "\nRespond in JSON format, ";
  if (choice_ == ToolChoice::kAuto) {
    text +=
        "either with " + calls + " or with `response` (a reply to the user: {\"response\": \"<reply>\"}).";
  } else {
    text += "with " + calls;
    text += choice_ == ToolChoice::kNamed ? ", calling " + named_ + "." : ".";
  }
  return text;
}

std::vector<ChatMessage> ChatTools::Conversation(const std::vector<IncomingMessage>& messages) const {
  std::vector<ChatMessage> out;
  if (template_->tool_format() != ToolFormat::kNone) {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const IncomingMessage& m = messages[i];
      ChatMessage message{m.role, m.content};
      for (const ToolCall& call : m.tool_calls)
        message.tool_calls.push_back({call.name, TemplateJson(call.arguments)});
      out.push_back(std::move(message));
    }
    return out;
  }
  // Generic. A result names its function when an earlier call has its id (llama.cpp's polyfill writes
  // {"tool_response": {"tool": name, "content": ...}}; plumb the same with "name").
  std::vector<std::pair<std::string, std::string>> called;  // id, name
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const IncomingMessage& m = messages[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      for (const ToolCall& call : m.tool_calls) called.emplace_back(call.id, call.name);
      out.push_back(
          {"assistant", (m.content.empty() ? "" : m.content + "\n") + GenericCallsText(m.tool_calls)});
    } else if (m.role == "tool") {
      OrderedJson response = OrderedJson::object();
      for (const auto& [id, name] : called) {
        if (id == m.tool_call_id) response["name"] = name;
      }
      response["content"] = m.content;
      const std::string line = TemplateJson(OrderedJson{{"tool_response", response}}.dump());
      // A run of results is one user message, so that templates whose roles must alternate take it.
      if (i > 0 && messages[i - 1].role == "tool") {
        out.back().content += "\n" + line;
      } else {
        out.push_back({"user", line});
      }
    } else {
      out.push_back({m.role, m.content});
    }
  }
  if (!active()) return out;
  const std::string text = GenericSystemText();
  const ChatStyle style = template_->style();
  if (!out.empty() && out[0].role == "system") {
    out[0].content += "\n\n" + text;
  } else if ((style == ChatStyle::kGemma || style == ChatStyle::kMistral) && !out.empty()) {
    out[0].content = text + "\n\n" + out[0].content;  // no system role: the first (user) message carries it
  } else {
    out.insert(out.begin(), ChatMessage{"system", text});
  }
  return out;
}

std::vector<std::string> ChatTools::TemplateTools() const {
  std::vector<std::string> texts;
  if (!active() || template_->tool_format() == ToolFormat::kNone) return texts;
  for (const OrderedJson& tool : tools_) texts.push_back(TemplateJson(tool.dump()));
  return texts;
}

// anyOf over the callable functions of {"name": {"const": name}, "arguments": <its parameters>}, inside
// {"tool_call": ...} or {"tool_calls": [at least one]}; with tool_choice auto, or {"response": string}.
std::optional<Grammar> ChatTools::ReplyGrammar() const {
  if (!active() || template_->tool_format() != ToolFormat::kNone) return std::nullopt;
  OrderedJson calls = OrderedJson::array();
  for (const OrderedJson& f : functions_) {
    const std::string name = f["name"];
    if (choice_ == ToolChoice::kNamed && name != named_) continue;
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", name}}}, {"arguments", ParametersOf(f)}}},
                     {"required", OrderedJson::array({"name", "arguments"})}});
  }
  const OrderedJson call = calls.size() == 1 ? calls[0] : OrderedJson{{"anyOf", calls}};
  const OrderedJson tool_branch =
      parallel_ ? OrderedJson{{"type", "object"},
                              {"properties",
                               {{"tool_calls", {{"type", "array"}, {"items", call}, {"minItems", 1}}}}},
                              {"required", OrderedJson::array({"tool_calls"})}}
                : OrderedJson{{"type", "object"},
                              {"properties", {{"tool_call", call}}},
                              {"required", OrderedJson::array({"tool_call"})}};
  OrderedJson schema = tool_branch;
  if (choice_ == ToolChoice::kAuto) {
    const OrderedJson response = {{"type", "object"},
                                  {"properties", {{"response", {{"type", "string"}}}}},
                                  {"required", OrderedJson::array({"response"})}};
    schema = {{"anyOf", OrderedJson::array({tool_branch, response})}};
  }
  try {
    return JsonSchemaGrammar(schema.dump());
  } catch (const Error& e) {
    BadRequest("invalid_value", std::string("'tools': ") + e.what());
  }
}

ToolReplyReader ChatTools::ReplyReader() const {
  return {template_->tool_format(), CallableNames()};
}

ToolReply ReadToolReply(const ToolReplyReader& reader, const std::string& text) {
  std::optional<ToolReply> reply =
      reader.format == ToolFormat::kNone ? ReadGeneric(reader.names, text) : ReadQwen(reader.names, text);
  if (reply) return std::move(*reply);
  if (reader.format == ToolFormat::kNone) {
    if (std::optional<std::string> cut = CutResponse(text)) return {std::move(*cut), {}};
  }
  return {text, {}};
}

}  // namespace plumb::serve
