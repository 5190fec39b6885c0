// Chat templates, rendering: each Render* function below is one real template written out by hand, and
// the comment above it quotes the part that decides each byte; tests/tokenizer/chat_template_test.cpp
// checks them against jinja2's rendering of the real texts (fixtures/chat/).
#include "chat_template_internal.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "plumb/core/error.h"

namespace plumb::chat_template_detail {
namespace {

constexpr std::string_view kAlternate = "Conversation roles must alternate user/assistant/user/assistant/...";

Error BadMessage(ChatStyle style, std::size_t index, const ChatMessage& message, std::string_view why) {
  return MakeError("chat template ", ChatStyleName(style), ": messages[", index, "] (role '", message.role,
                   "'): ", why);
}

// plumb's rule for a conversation, checked in the order the real templates check it so that where they
// raise, plumb's message contains their words (tools/reference/make_chat_template_fixtures.py has the
// same rule as plumb_accepts). plumb is stricter than the ChatML and Llama 3 templates, which render
// any role anywhere: a role outside system/user/assistant or a system message after the first is
// almost certainly a caller's mistake.
void ValidateConversation(ChatStyle style, ToolFormat tools, const std::vector<ChatMessage>& messages) {
  if (messages.empty())
    throw MakeError("chat template ", ChatStyleName(style), ": the conversation is empty");
  if (style == ChatStyle::kGemma && messages[0].role == "system") {
    throw BadMessage(style, 0, messages[0], std::string(kNoSystem) + " (Gemma has no system role)");
  }
  if (style == ChatStyle::kMistral) {
    // The template's loop: the alternation test first, then any role but user and assistant raises, so a
    // first system message fails the alternation (it is not a user message at an even index).
    for (std::size_t i = 0; i < messages.size(); ++i) {
      if ((messages[i].role == "user") != (i % 2 == 0)) {
        throw BadMessage(style, i, messages[i],
                         std::string(kAlternate) + " (Mistral's template has no system role)");
      }
      if (messages[i].role != "user" && messages[i].role != "assistant") {
        throw BadMessage(style, i, messages[i], kMistralRoles);
      }
    }
  }
  if (style == ChatStyle::kLlama2 || style == ChatStyle::kGemma || style == ChatStyle::kGemma3) {
    // {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception(...) }}, over the
    // messages after Llama 2's and Gemma 3's optional first system message.
    const bool skips_system = style == ChatStyle::kLlama2 || style == ChatStyle::kGemma3;
    const std::size_t first = (skips_system && messages[0].role == "system") ? 1 : 0;
    for (std::size_t i = first; i < messages.size(); ++i) {
      if ((messages[i].role == "user") != ((i - first) % 2 == 0)) {
        throw BadMessage(style, i, messages[i],
                         std::string(kAlternate) + (first == 1 ? " after the first system message" : ""));
      }
    }
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role == "tool" && tools == ToolFormat::kNone) {
      throw BadMessage(style, i, messages[i], "this template has no tool role");
    }
    if (!messages[i].tool_calls.empty() && (role != "assistant" || tools == ToolFormat::kNone)) {
      throw BadMessage(style, i, messages[i],
                       role != "assistant" ? "only assistant messages carry tool calls"
                                           : "this template does not write tool calls");
    }
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      throw BadMessage(style, i, messages[i], "unknown role; plumb knows system, user, assistant and tool");
    }
    if (role == "system" && i > 0) {
      throw BadMessage(
          style, i, messages[i],
          style == ChatStyle::kGemma ? kNoSystem : "only the first message may be a system message");
    }
  }
}

// Appends a message's content (or a system prompt) to the rendering and records where it lies.
void AppendContent(RenderedChat& r, std::string_view content) {
  r.contents.push_back({r.text.size(), r.text.size() + content.size()});
  r.text += content;
}

// {{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}} for each message,
// after the default system turn if the template has one and the first message is not a system one;
// {{ '<|im_start|>assistant\n' }} for the generation prompt. Contents are not stripped.
RenderedChat RenderChatMl(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string* default_system_prompt) {
  RenderedChat r;
  if (default_system_prompt != nullptr && messages[0].role != "system") {
    r.text += "<|im_start|>system\n";
    AppendContent(r, *default_system_prompt);
    r.text += "<|im_end|>\n";
  }
  for (const ChatMessage& m : messages) {
    r.text += "<|im_start|>" + m.role + "\n";
    AppendContent(r, m.content);
    r.text += "<|im_end|>\n";
  }
  if (add_generation_prompt) r.text += "<|im_start|>assistant\n";
  return r;
}

// The tool block of the system turn: kToolsHeader, '\n' + each tool's tojson text, kToolsFooter.
void AppendToolBlock(RenderedChat& r, const std::vector<std::string>& tools) {
  r.text += kToolsHeader;
  for (const std::string& tool : tools) {
    r.text += "\n";
    AppendContent(r, tool);
  }
  r.text += kToolsFooter;
}

// A tool result: '<|im_start|>user' before the first of a run of them, '\n<tool_response>\n' + content +
// '\n</tool_response>', '<|im_end|>\n' after the last of the run.
void AppendToolResponse(RenderedChat& r, const std::vector<ChatMessage>& messages, std::size_t i) {
  if (i == 0 || messages[i - 1].role != "tool") r.text += "<|im_start|>user";
  r.text += "\n<tool_response>\n";
  AppendContent(r, messages[i].content);
  r.text += "\n</tool_response>";
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") r.text += "<|im_end|>\n";
}

// '<tool_call>\n{"name": "' + name + '", "arguments": ' + arguments + '}\n</tool_call>'.
void AppendToolCall(RenderedChat& r, const ChatToolCall& call) {
  r.text += "<tool_call>\n{\"name\": \"";
  AppendContent(r, call.name);
  r.text += "\", \"arguments\": ";
  AppendContent(r, call.arguments);
  r.text += "}\n</tool_call>";
}

// Qwen2.5. With tools: '<|im_start|>system\n' + (the first system message's content, else the default
// prompt) + '\n\n' + the tool block; without: the first system message as ChatML, else the default system
// turn. Then every message but a first system one: a reply with tool_calls as '<|im_start|>assistant' +
// ('\n' + content if content) + '\n' + each call + '<|im_end|>\n', tool results as AppendToolResponse,
// the rest as ChatML.
RenderedChat RenderQwen25(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string& default_system_prompt, const std::vector<std::string>& tools) {
  RenderedChat r;
  const bool has_system = messages[0].role == "system";
  r.text += "<|im_start|>system\n";
  AppendContent(r, has_system ? messages[0].content : default_system_prompt);
  if (tools.empty()) {
    r.text += "<|im_end|>\n";
  } else {
    r.text += "\n\n";
    AppendToolBlock(r, tools);
  }
  for (std::size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      AppendToolResponse(r, messages, i);
      continue;
    }
    r.text += "<|im_start|>" + m.role;
    if (m.tool_calls.empty()) {
      r.text += "\n";
      AppendContent(r, m.content);
    } else {
      if (!m.content.empty()) {
        r.text += "\n";
        AppendContent(r, m.content);
      }
      for (const ChatToolCall& call : m.tool_calls) {
        r.text += "\n";
        AppendToolCall(r, call);
      }
    }
    r.text += "<|im_end|>\n";
  }
  if (add_generation_prompt) r.text += "<|im_start|>assistant\n";
  return r;
}

// '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>'
// for each message, bos_token before the first; '<|start_header_id|>assistant<|end_header_id|>\n\n' for the
// generation prompt.
RenderedChat RenderLlama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string& bos) {
  RenderedChat r{bos, {}};
  for (const ChatMessage& m : messages) {
    r.text += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    AppendContent(r, PythonStrip(m.content));
    r.text += "<|eot_id|>";
  }
  if (add_generation_prompt) r.text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return r;
}

// A first system message is folded into the first user turn: content = '<<SYS>>\n' + system_message +
// '\n<</SYS>>\n\n' + message['content'], then user turns are bos_token + '[INST] ' + content.strip() +
// ' [/INST]' and assistant turns ' '  + content.strip() + ' ' + eos_token. The strip applies to the whole
// folded text, so the system message is never stripped and the first user content only at its end.
// There is no generation prompt: a prompt that ends with a user turn already ends with "[/INST]".
// The folded <<SYS>> markup counts as content: it is plain text in Llama 2's vocabulary either way.
RenderedChat RenderLlama2(const std::vector<ChatMessage>& messages, const std::string& bos,
                          const std::string& eos) {
  const bool has_system = messages[0].role == "system";
  RenderedChat r;
  for (std::size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    std::string content = messages[i].content;
    if (has_system && i == 1) content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + content;
    if (messages[i].role == "user") {
      r.text += bos + "[INST] ";
      AppendContent(r, PythonStrip(content));
      r.text += " [/INST]";
    } else {
      r.text += " ";
      AppendContent(r, PythonStrip(content));
      r.text += " " + eos;
    }
  }
  return r;
}

// Gemma 1 and 2: {{ bos_token }}, then '<start_of_turn>' + role + '\n' + message['content'] | trim +
// '<end_of_turn>\n' for each message with assistant called 'model'; '<start_of_turn>model\n' for the
// generation prompt. Gemma 3 the same, and a first system message (which Gemma 1 and 2 refuse before this)
// becomes first_user_prefix = content + '\n\n', not stripped, written after the first user turn's header:
// '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else ""). A lone system message renders
// BOS alone (loop_messages is empty).
RenderedChat RenderGemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const std::string& bos) {
  const bool has_system = messages[0].role == "system";
  RenderedChat r{bos, {}};
  for (std::size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    r.text += "<start_of_turn>" + (m.role == "assistant" ? std::string("model") : m.role) + "\n";
    if (has_system && i == 1) {
      AppendContent(r, messages[0].content);
      r.text += "\n\n";
    }
    AppendContent(r, PythonStrip(m.content));
    r.text += "<end_of_turn>\n";
  }
  if (add_generation_prompt) r.text += "<start_of_turn>model\n";
  return r;
}

// Mistral-7B-Instruct-v0.2's first template (Mixtral-8x7B-Instruct-v0.1's too): {{ bos_token }}, then
// '[INST] ' + message['content'] + ' [/INST]' for a user turn and message['content'] + eos_token for a
// reply, contents as they are. No generation prompt: a prompt ending with a user turn ends with [/INST].
RenderedChat RenderMistral(const std::vector<ChatMessage>& messages, const std::string& bos,
                           const std::string& eos) {
  RenderedChat r{bos, {}};
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      r.text += "[INST] ";
      AppendContent(r, m.content);
      r.text += " [/INST]";
    } else {
      AppendContent(r, m.content);
      r.text += eos;
    }
  }
  return r;
}

// Phi-3.5-mini: '<|' role '|>\n' + message['content'] + '<|end|>\n' for each message, a system message
// only when its content is not empty ({% if message['role'] == 'system' and message['content'] %});
// '<|assistant|>\n' for the generation prompt, else eos_token. Phi-4-mini: the same without either
// newline, and '<|assistant|>'.
RenderedChat RenderPhi(const std::vector<ChatMessage>& messages, bool add_generation_prompt, bool newlines,
                       const std::string& eos) {
  const std::string after_header = newlines ? "\n" : "";
  RenderedChat r;
  for (const ChatMessage& m : messages) {
    if (newlines && m.role == "system" && m.content.empty()) continue;
    r.text += "<|" + m.role + "|>" + after_header;
    AppendContent(r, m.content);
    r.text += "<|end|>" + after_header;
  }
  r.text += add_generation_prompt ? "<|assistant|>" + after_header : eos;
  return r;
}

// OLMo 2 Instruct: {{ bos_token }}, then '<|system|>\n' / '<|user|>\n' + message['content'] + '\n';
// a reply '<|assistant|>\n'  + message['content'] + eos_token, + '\n' unless it is the last message;
// the generation prompt '<|assistant|>\n' after the last message.
RenderedChat RenderOlmo2(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const std::string& bos, const std::string& eos) {
  RenderedChat r{bos, {}};
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    r.text += "<|" + m.role + "|>\n";
    AppendContent(r, m.content);
    if (m.role != "assistant") {
      r.text += "\n";
    } else {
      r.text += eos;
      if (i + 1 < messages.size()) r.text += "\n";
    }
  }
  if (add_generation_prompt) r.text += "<|assistant|>\n";
  return r;
}

// Python's str.lstrip('\n') / rstrip('\n'): only newlines, unlike strip().
std::string_view LstripNewlines(std::string_view text) {
  const std::size_t begin = text.find_first_not_of('\n');
  return begin == std::string_view::npos ? std::string_view() : text.substr(begin);
}

std::string_view RstripNewlines(std::string_view text) {
  const std::size_t last = text.find_last_not_of('\n');
  return last == std::string_view::npos ? std::string_view() : text.substr(0, last + 1);
}

// Qwen3. A system message first: '<|im_start|>system\n' + content + '<|im_end|>\n'; user messages as
// ChatML. A reply with '</think>' in it splits into
//   content = content.split('</think>')[-1].lstrip('\n')    (after the last </think>)
//   reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
// and, when it comes after the last user query and is the last message or has reasoning, is written as
// '<|im_start|>assistant\n<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n'),
// else as '<|im_start|>assistant\n' + content (so past reasoning is dropped once the user speaks again);
// then '<|im_end|>\n'. The last query is the last user message whose content does not both start with
// '<tool_response>' and end with '</tool_response>'; with none, it is the last message (no reply is after
// it). The generation prompt is '<|im_start|>assistant\n'.
//
// With tools, the system turn is '<|im_start|>system\n' + (the first system message's content + '\n\n')
// + the tool block, and that system message is not written again. A reply's tool calls follow its text,
// each after '\n' unless it is the first and the reply's content (after the </think> split, before the
// lstrip) is empty. Tool results as AppendToolResponse (role "tool" is never a user query).
RenderedChat RenderQwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const std::vector<std::string>& tools) {
  std::size_t last_query = messages.size() - 1;
  for (std::size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    if (messages[i].role == "user" &&
        !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  constexpr std::string_view kOpen = "<think>";
  constexpr std::string_view kClose = "</think>";
  RenderedChat r;
  const bool system_in_tools = !tools.empty() && messages[0].role == "system";
  if (!tools.empty()) {
    r.text += "<|im_start|>system\n";
    if (system_in_tools) {
      AppendContent(r, messages[0].content);
      r.text += "\n\n";
    }
    AppendToolBlock(r, tools);
  }
  for (std::size_t i = system_in_tools ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      AppendToolResponse(r, messages, i);
      continue;
    }
    r.text += "<|im_start|>" + m.role + "\n";
    if (m.role != "assistant") {
      AppendContent(r, m.content);
      r.text += "<|im_end|>\n";
      continue;
    }
    std::string_view content = m.content;
    std::string_view reasoning;
    if (const std::size_t last_close = content.rfind(kClose); last_close != std::string_view::npos) {
      reasoning = RstripNewlines(content.substr(0, content.find(kClose)));
      if (const std::size_t open = reasoning.rfind(kOpen); open != std::string_view::npos) {
        reasoning = reasoning.substr(open + kOpen.size());
      }
      reasoning = LstripNewlines(reasoning);
      content = LstripNewlines(content.substr(last_close + kClose.size()));
    }
    const bool has_content = !content.empty();
    if (i > last_query && (i + 1 == messages.size() || !reasoning.empty())) {
      r.text += "<think>\n";
      AppendContent(r, LstripNewlines(RstripNewlines(reasoning)));
      r.text += "\n</think>\n\n";
      content = LstripNewlines(content);
    }
    AppendContent(r, content);
    for (std::size_t k = 0; k < m.tool_calls.size(); ++k) {
      if (k > 0 || has_content) r.text += "\n";
      AppendToolCall(r, m.tool_calls[k]);
    }
    r.text += "<|im_end|>\n";
  }
  if (add_generation_prompt) r.text += "<|im_start|>assistant\n";
  return r;
}

}  // namespace

RenderedChat RenderStyle(ChatStyle style, ToolFormat tool_format, const std::string& bos_text,
                         const std::string& eos_text, bool has_default_system_prompt,
                         const std::string& default_system_prompt, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt, const std::vector<std::string>& tools) {
  ValidateConversation(style, tool_format, messages);
  if (!tools.empty() && tool_format == ToolFormat::kNone) {
    throw MakeError("chat template ", ChatStyleName(style), ": this template does not write tools");
  }
  switch (style) {
    case ChatStyle::kChatMl:
      if (tool_format == ToolFormat::kQwen25) {
        return RenderQwen25(messages, add_generation_prompt, default_system_prompt, tools);
      }
      return RenderChatMl(messages, add_generation_prompt,
                          has_default_system_prompt ? &default_system_prompt : nullptr);
    case ChatStyle::kLlama3:
      return RenderLlama3(messages, add_generation_prompt, bos_text);
    case ChatStyle::kLlama2:
      return RenderLlama2(messages, bos_text, eos_text);
    case ChatStyle::kGemma:
    case ChatStyle::kGemma3:
      return RenderGemma(messages, add_generation_prompt, bos_text);
    case ChatStyle::kMistral:
      return RenderMistral(messages, bos_text, eos_text);
    case ChatStyle::kPhi3:
      return RenderPhi(messages, add_generation_prompt, /*newlines=*/true, eos_text);
    case ChatStyle::kPhi4Mini:
      return RenderPhi(messages, add_generation_prompt, /*newlines=*/false, eos_text);
    case ChatStyle::kOlmo2:
      return RenderOlmo2(messages, add_generation_prompt, bos_text, eos_text);
    case ChatStyle::kQwen3:
      return RenderQwen3(messages, add_generation_prompt, tools);
  }
  throw MakeError("chat template: unknown style ", static_cast<int>(style));
}

}  // namespace plumb::chat_template_detail
