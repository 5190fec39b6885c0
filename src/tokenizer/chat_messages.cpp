#include "plumb/tokenizer/chat_messages.h"

#include <nlohmann/json.hpp>

namespace plumb {
namespace {

using nlohmann::json;

[[noreturn]] void WrongType(const std::string& place, const std::string& what) {
  throw ChatMessageError(true, place + what);
}
[[noreturn]] void WrongValue(const std::string& place, const std::string& what) {
  throw ChatMessageError(false, place + what);
}

// A field, or null when absent or JSON null.
const json* Field(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string Content(const json& message, const std::string& role, const std::string& place) {
  const std::string where = place + ".content";
  const auto it = message.find("content");
  if (it == message.end() || (it->is_null() && role == "assistant")) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) WrongType(where, " must be a string or an array of text parts, not " + it->dump());
  std::string text;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& part = (*it)[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!part.is_object() || part.value("type", json()) != "text") {
      WrongValue(at, ": only parts of type \"text\" are supported, not " + part.dump());
    }
    const json* part_text = Field(part, "text");
    if (part_text == nullptr || !part_text->is_string()) WrongType(at, ".text must be a string");
    text += part_text->get<std::string>();
  }
  return text;
}

}  // namespace

std::vector<ReadChatMessage> ReadChatMessages(const json& messages, const std::string& place,
                                              const ChatMessageRules& rules) {
  if (!messages.is_array()) WrongType(place.empty() ? "the document" : place, " must be an array");
  std::vector<ReadChatMessage> out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    ReadChatMessage message{"", "", place + "[" + std::to_string(i) + "]", &m};
    const std::string& where = message.place;
    if (!m.is_object()) WrongType(where, " must be an object with a role and content");
    const json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) WrongType(where, ".role must be a string");
    message.role = role->get<std::string>();
    if (message.role == "developer") message.role = "system";  // OpenAI's newer name for the system role
    const bool known = message.role == "system" || message.role == "user" || message.role == "assistant" ||
                       (rules.tools && message.role == "tool");
    if (!known) {
      WrongValue(where, ".role is \"" + message.role + "\"; " + rules.reader + " takes system, user" +
                            (rules.tools ? ", assistant and tool" : " and assistant"));
    }
    const json* calls = Field(m, "tool_calls");
    if (calls != nullptr && message.role != "assistant") {
      WrongValue(where, ".tool_calls: only assistant messages carry tool calls");
    }
    if (calls != nullptr && !rules.tools && !calls->empty()) {
      WrongValue(where, std::string(".tool_calls: ") + rules.no_tools_hint);
    }
    if (message.role == "tool" && Field(m, "tool_call_id") == nullptr) {
      WrongValue(where, ".tool_call_id is missing (a tool message answers a call)");
    }
    message.content = Content(m, message.role, where);
    out.push_back(std::move(message));
  }
  return out;
}

}  // namespace plumb
