// OpenAI tool calling for POST /v1/chat/completions (docs/serve.md, "Tool calls"): a request's `tools`,
// `tool_choice` and `parallel_tool_calls`; its history's assistant tool_calls and role "tool" messages in the
// form the chat template takes; and the reply read back into tool calls.
//
// Two ways, chosen by the model's template (ChatTemplate::tool_format()):
//   native   Qwen2.5's and Qwen3's own format: the tools go to the template (its <tools> block), calls and
//            results are rendered by it, and the reply's <tool_call>{"name": ..., "arguments":
//            ...}</tool_call> blocks are parsed. Not constrained: the model writes the format it was trained
//            on.
//   generic  every other template (llama.cpp server's "generic" format): a system text lists the tools and
//            asks for JSON, and constrained decoding holds the reply to {"tool_call": {"name": ...,
//            "arguments": ...}} (or "tool_calls": [...] with parallel_tool_calls) or {"response": "..."};
//            past calls and results are written into the messages in that same JSON.
// A reply that does not parse (cut by max_tokens, or a native reply that is not well-formed) is returned as
// content, never as a malformed tool call.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plumb/sample/grammar.h"
#include "plumb/tokenizer/chat_template.h"

namespace plumb::serve {

using OrderedJson = nlohmann::ordered_json;

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ToolCall {
  std::string id;  // "call_" and 24 hex digits, or the client's in a history message
  std::string name;
  std::string arguments;  // a JSON object's text (compact, as the model or the client wrote its members)
};

// One message of a chat request as read and checked (request.cpp).
struct IncomingMessage {
  std::string role;  // system, user, assistant or tool ("developer" already read as system)
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant only
  std::string tool_call_id;          // tool only
};

// What the reply handler needs to read a reply for tool calls.
struct ToolReplyReader {
  ToolFormat format = ToolFormat::kNone;  // kNone: the generic JSON
  std::vector<std::string> names;         // the functions a call may name (only the one tool_choice names)
};

// The reply of a request with tools, read.
struct ToolReply {
  std::string content;          // the text besides the calls ("" if none)
  std::vector<ToolCall> calls;  // empty: a plain reply
};

class ChatTools {
 public:
  // Reads `tools`, `tool_choice` and `parallel_tool_calls` of the body (parsed keeping key order, so that
  // each tool renders as the client wrote it); throws HttpError 400 naming the field: a tool that is not
  // {"type": "function", "function": {"name": ..., "parameters": {...}}}, a duplicate name, parameters that
  // are not an object schema (for the generic format: one plumb cannot enforce, or with $ref), a
  // tool_choice naming no tool, tool_choice required or named without tools.
  static ChatTools Read(const OrderedJson& body, const ChatTemplate& chat_template);

  // Tools given and tool_choice not "none": the reply is read for tool calls (and, generic, constrained).
  bool active() const { return choice_ != ToolChoice::kNone && !functions_.empty(); }

  // The conversation as the template takes it: native, calls and results as they are (arguments re-written
  // by TemplateJson); generic, calls as the JSON the model is asked for and each run of results as one user
  // message, and, when active, the tool description in the system message (or at the head of the first user
  // message for templates without a system role). Throws HttpError 400 for a message the format cannot take.
  std::vector<ChatMessage> Conversation(const std::vector<IncomingMessage>& messages) const;
  // The template's `tools`, each tool's `tojson` text; empty unless active and native.
  std::vector<std::string> TemplateTools() const;
  // The grammar the generic format holds the reply to; nullopt when native or not active.
  std::optional<Grammar> ReplyGrammar() const;
  ToolReplyReader ReplyReader() const;

 private:
  std::string GenericSystemText() const;
  std::vector<std::string> CallableNames() const;

  const ChatTemplate* template_ = nullptr;
  ToolChoice choice_ = ToolChoice::kAuto;
  std::string named_;                   // tool_choice's function
  bool parallel_ = false;               // generic: a "tool_calls" array (parallel_tool_calls: true)
  std::vector<OrderedJson> tools_;      // as the client sent them: {"type": "function", "function": {...}}
  std::vector<OrderedJson> functions_;  // their "function" objects
};

// Reads a reply for tool calls, giving each a fresh id. A reply that does not parse as the format (or names
// a function it may not) comes back as its whole text in `content`, with no calls.
ToolReply ReadToolReply(const ToolReplyReader& reader, const std::string& text);

}  // namespace plumb::serve
