// Chat templates: recognise the style of a Jinja template text, then render that style in C++.
//
// Each Render* function below is one real template written out by hand; the comment above it quotes the
// part of the template that decides each byte. tests/tokenizer/chat_template_test.cpp checks them against
// jinja2's rendering of the real texts (fixtures/chat/).
#include "plumb/tokenizer/chat_template.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb {
namespace {

constexpr std::array<ChatStyle, 10> kStyles = {
    ChatStyle::kChatMl,  ChatStyle::kLlama3, ChatStyle::kLlama2,   ChatStyle::kGemma, ChatStyle::kGemma3,
    ChatStyle::kMistral, ChatStyle::kPhi3,   ChatStyle::kPhi4Mini, ChatStyle::kOlmo2, ChatStyle::kQwen3};

// What every "cannot apply this template" error ends with.
constexpr std::string_view kKnownStyles =
    "plumb renders chatml (<|im_start|>), llama3 (<|start_header_id|>, Llama 3.0), llama2 (Meta's "
    "[INST] <<SYS>> format), gemma (<start_of_turn>, Gemma 1 and 2), gemma3 (Gemma 3's, with a system "
    "prompt), mistral (Mistral/Mixtral's [INST] without a system role), phi3 (Phi-3.5's <|user|>\\n), "
    "phi4-mini (Phi-4-mini's <|user|>), olmo2 (OLMo 2's Tulu format) and qwen3 (Qwen3's, with <think>); "
    "choose one by name with --chat-template NAME";

constexpr std::string_view kAlternate = "Conversation roles must alternate user/assistant/user/assistant/...";
constexpr std::string_view kNoSystem = "System role not supported";
constexpr std::string_view kMistralRoles = "Only user and assistant roles are supported!";

bool Contains(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

// A marker written with real newlines inside its Jinja string literals is found in the template with
// either real newlines (as tokenizer_config.json decodes them, and as GGUF stores such templates) or the
// Jinja escape \n in their place: both render the same text.
bool ContainsEitherNewline(std::string_view text, std::string_view marker) {
  if (Contains(text, marker)) return true;
  std::string escaped;
  for (const char c : marker) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  return Contains(text, escaped);
}

bool ContainsAll(std::string_view text, std::initializer_list<std::string_view> markers) {
  for (const std::string_view marker : markers) {
    if (!ContainsEitherNewline(text, marker)) return false;
  }
  return true;
}

// --- UTF-8 and Python's notion of whitespace -------------------------------------------------------------

// The code point of the valid UTF-8 sequence starting at text[pos] and its length; length 0 if the bytes
// there are not valid UTF-8 (overlong, surrogate, beyond U+10FFFF or truncated).
struct CodePoint {
  char32_t value = 0;
  std::size_t length = 0;
};

CodePoint DecodeUtf8(std::string_view text, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return {lead, 1};
  std::size_t length = 0;
  char32_t value = 0;
  char32_t min_value = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    value = lead & 0x1Fu;
    min_value = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    value = lead & 0x0Fu;
    min_value = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    value = lead & 0x07u;
    min_value = 0x10000;
  } else {
    return {};
  }
  if (text.size() - pos < length) return {};
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return {};
    value = (value << 6) | (byte(pos + i) & 0x3Fu);
  }
  if (value < min_value || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return {};
  return {value, length};
}

// The valid code point that ends just before text[end] and starts at or after text[begin].
CodePoint DecodeUtf8Before(std::string_view text, std::size_t begin, std::size_t end) {
  std::size_t start = end - 1;
  while (start > begin && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  const CodePoint cp = DecodeUtf8(text, start);
  return start + cp.length == end ? cp : CodePoint{};
}

// Python's str.isspace(), which str.strip() and Jinja's trim filter use: the templates strip Unicode
// spaces such as U+00A0 and U+3000 too, so an ASCII-only strip would not match them.
bool IsPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// content.strip() / content | trim. Bytes that are not valid UTF-8 are not whitespace.
std::string_view PythonStrip(std::string_view text) {
  std::size_t begin = 0;
  while (begin < text.size()) {
    const CodePoint cp = DecodeUtf8(text, begin);
    if (cp.length == 0 || !IsPythonSpace(cp.value)) break;
    begin += cp.length;
  }
  std::size_t end = text.size();
  while (end > begin) {
    const CodePoint cp = DecodeUtf8Before(text, begin, end);
    if (cp.length == 0 || !IsPythonSpace(cp.value)) break;
    end -= cp.length;
  }
  return text.substr(begin, end - begin);
}

// The first bytes of a template, printable on one line, for error messages.
std::string QuoteStart(std::string_view text) {
  constexpr std::size_t kMaxBytes = 60;
  std::size_t cut = text.size();
  if (cut > kMaxBytes) {
    cut = kMaxBytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // whole code points
  }
  std::string out = "\"";
  for (const char c : text.substr(0, cut)) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7F) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    } else {
      out += c;
    }
  }
  out += cut < text.size() ? "...\"" : "\"";
  return out;
}

// --- the string literals of a Jinja template ---------------------------------------------------------------

struct RawLiteral {
  std::size_t offset;    // of the opening quote in the template
  std::string_view raw;  // between the quotes, escapes undecoded
};

// Every string literal inside {{ }} and {% %} tags (comments and text between tags are skipped, so an
// apostrophe in plain text cannot start a literal). Throws plumb::Error for an unterminated literal.
std::vector<RawLiteral> StringLiterals(std::string_view jinja) {
  std::vector<RawLiteral> literals;
  std::size_t pos = 0;
  while (true) {
    pos = jinja.find('{', pos);
    if (pos == std::string_view::npos || pos + 1 >= jinja.size()) break;
    const char kind = jinja[pos + 1];
    if (kind == '#') {
      const std::size_t end = jinja.find("#}", pos + 2);
      if (end == std::string_view::npos) break;
      pos = end + 2;
      continue;
    }
    if (kind != '{' && kind != '%') {
      ++pos;
      continue;
    }
    const char closer = kind == '{' ? '}' : '%';
    pos += 2;
    while (pos < jinja.size()) {
      const char c = jinja[pos];
      if (c == closer && pos + 1 < jinja.size() && jinja[pos + 1] == '}') {
        pos += 2;
        break;
      }
      if (c != '\'' && c != '"') {
        ++pos;
        continue;
      }
      const std::size_t open = pos++;
      while (pos < jinja.size() && jinja[pos] != c) pos += jinja[pos] == '\\' ? 2 : 1;
      if (pos >= jinja.size()) {
        throw MakeError("chat template: string literal at byte offset ", open, " is not terminated");
      }
      literals.push_back({open, jinja.substr(open + 1, pos - open - 1)});
      ++pos;
    }
  }
  return literals;
}

// A literal's value the way Jinja's lexer decodes it (newlines normalised to \n, then Python's
// unicode-escape). Only the escapes a chat template plausibly uses are decoded; any other throws rather
// than guess, since the result is text plumb will put in the prompt.
std::string DecodeLiteral(const RawLiteral& literal) {
  std::string out;
  const std::string_view raw = literal.raw;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '\r') {
      out += '\n';
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      continue;
    }
    if (c != '\\') {
      out += c;
      continue;
    }
    const char e = i + 1 < raw.size() ? raw[++i] : '\0';
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      default:
        throw MakeError("chat template: string literal at byte offset ", literal.offset,
                        " uses the escape \\", e, ", which plumb does not decode");
    }
  }
  return out;
}

// ChatML templates such as SmolLM2's and Qwen2's insert a fixed system turn when the conversation does
// not start with one: a literal '<|im_start|>system\n<prompt><|im_end|>\n'. Returns <prompt> if the
// template has such a literal.
std::optional<std::string> ChatMlDefaultSystemPrompt(std::string_view jinja) {
  constexpr std::string_view kHeader = "<|im_start|>system";
  constexpr std::string_view kEnd = "<|im_end|>";
  std::optional<std::string> found;
  for (const RawLiteral& literal : StringLiterals(jinja)) {
    // Decode only literals that start with the header and a newline (real, or the escape \n), so that an
    // escape plumb does not decode elsewhere in the template does not matter.
    if (!literal.raw.starts_with(kHeader)) continue;
    const std::string_view after = literal.raw.substr(kHeader.size());
    if (!after.starts_with('\n') && !after.starts_with('\r') && !after.starts_with("\\n")) continue;
    const std::string value = DecodeLiteral(literal);
    const std::size_t end = value.find(kEnd, kHeader.size() + 1);
    if (end == std::string::npos) continue;
    std::string prompt = value.substr(kHeader.size() + 1, end - kHeader.size() - 1);
    if (found && *found != prompt) {
      throw MakeError("chat template: two different default system prompts (", QuoteStart(*found), " and ",
                      QuoteStart(prompt), "); plumb cannot tell which the template uses");
    }
    found = std::move(prompt);
  }
  return found;
}

// --- recognising a template --------------------------------------------------------------------------

// Gemma 3's template (google/gemma-3-*-it) folds a system message into the first user turn:
//   {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%} ... {{ '<start_of_turn>' + role + '\n' +
//   (first_user_prefix if loop.first else "") }} ... {{ message['content'] | trim }}
// with the newlines real (as tokenizer_config.json decodes them) or Jinja escapes. A variant that writes
// another separator or another role name than "model" is not this style.
bool IsGemma3Template(std::string_view jinja) {
  constexpr std::string_view kPrefix = "set first_user_prefix = messages[0]['content'] + '";
  const bool two_newlines =
      Contains(jinja, std::string(kPrefix) + "\n\n'") || Contains(jinja, std::string(kPrefix) + "\\n\\n'");
  return two_newlines && Contains(jinja, "(first_user_prefix if loop.first else \"\")") &&
         Contains(jinja, "message['content'] | trim") && Contains(jinja, "set role = \"model\"") &&
         Contains(jinja, "{{ bos_token }}");
}

// Mistral-7B-Instruct-v0.2's first template, also Mixtral-8x7B-Instruct-v0.1's: {{ bos_token }}, then
// '[INST] ' + message['content'] + ' [/INST]' and message['content'] + eos_token, no strip, roles
// alternating from the first message and only user and assistant. Mistral's later templates (a system
// message folded into the first turn, ' [INST] ' with a leading space, [SYSTEM_PROMPT], tools) differ.
bool IsMistralTemplate(std::string_view jinja) {
  return ContainsAll(jinja, {"{{ bos_token }}{% for message in messages %}",
                             "{{ '[INST] ' + message['content'] + ' [/INST]' }}",
                             "{{ message['content'] + eos_token}}", kMistralRoles}) &&
         !Contains(jinja, "system");
}

// Phi-3.5-mini-instruct: each message '<|role|>\n' + content + '<|end|>\n' (a system message only if its
// content is not empty), then '<|assistant|>\n' as the generation prompt or else eos_token.
bool IsPhi3Template(std::string_view jinja) {
  return ContainsAll(jinja,
                     {"{% if message['role'] == 'system' and message['content'] %}",
                      "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}",
                      "{{'<|user|>\n' + message['content'] + '<|end|>\n'}}",
                      "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}",
                      "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}"});
}

// Phi-4-mini-instruct: '<|' + role + '|>' + content + '<|end|>' (its tools branch needs a message with
// a 'tools' key, which plumb's messages never have), then '<|assistant|>' or else eos_token.
bool IsPhi4MiniTemplate(std::string_view jinja) {
  return ContainsAll(jinja, {"{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}",
                             "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}"});
}

// OLMo 2 Instruct (Tulu 3): {{ bos_token }}, '<|system|>\n' / '<|user|>\n' + content + '\n', replies
// '<|assistant|>\n'  + content + eos_token, + '\n' unless last, and the generation prompt inside the loop
// after the last message.
bool IsOlmo2Template(std::string_view jinja) {
  return ContainsAll(jinja,
                     {"{{ bos_token }}", "{{ '<|system|>\n' + message['content'] + '\n' }}",
                      "{{ '<|user|>\n' + message['content'] + '\n' }}",
                      "{{ '<|assistant|>\n'  + message['content'] + eos_token + '\n' }}",
                      "{{ '<|assistant|>\n'  + message['content'] + eos_token }}",
                      "{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"});
}

// Qwen3 (both revisions of Qwen/Qwen3-*): ChatML without a default system turn; a reply is split at
// '</think>' into reasoning and content, and only replies after the last user query (the last user
// message not wrapped in <tool_response> tags) keep a '<think>\n' ... '\n</think>\n\n' block: the last
// message always, earlier ones when their reasoning is not empty. The generation prompt is
// '<|im_start|>assistant\n' (plumb renders with enable_thinking undefined, as apply_chat_template does by
// default). Variants that add 'or reasoning_content' to the last-query test, or open <think> in the
// generation prompt (Qwen3-*-Thinking-2507), write other text and are not this style.
bool IsQwen3Template(std::string_view jinja) {
  return ContainsAll(
             jinja,
             {"<|im_start|>", "namespace(multi_step_tool=true, last_query_index=messages|length - 1)",
              "message.content.startswith('<tool_response>') and "
              "message.content.endswith('</tool_response>')",
              ".split('</think>')[-1].lstrip('\n')",
              ".split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')",
              "{%- if loop.index0 > ns.last_query_index %}",
              "{%- if loop.last or (not loop.last and reasoning_content) %}",
              "'\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n')",
              "{{- '<|im_start|>assistant\n' }}"}) &&
         !ContainsEitherNewline(jinja, "'<|im_start|>assistant\n<think>");
}

// The tool block Qwen2.5 and Qwen3 write into the system turn when `tools` is given, after their own first
// lines: kToolsHeader, "\n" + `tool | tojson` for each tool, then kToolsFooter (string literals of both
// templates, Qwen2.5's header after "\n\n").
constexpr std::string_view kToolsHeader =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kToolsFooter =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

// Whether the template has a string literal whose value (escapes decoded) is exactly each of `values`;
// literals plumb cannot decode are not any of them.
bool HasLiterals(std::string_view jinja, std::initializer_list<std::string_view> values) {
  std::vector<std::string> decoded;
  for (const RawLiteral& literal : StringLiterals(jinja)) {
    try {
      decoded.push_back(DecodeLiteral(literal));
    } catch (const Error&) {
    }
  }
  for (const std::string_view value : values) {
    if (std::find(decoded.begin(), decoded.end(), value) == decoded.end()) return false;
  }
  return true;
}

// What Qwen2.5 and Qwen3 share: the tools loop, the footer, and a call written as '{"name": "' + name +
// '", "arguments": ' + arguments + '}\n</tool_call>', a result as '\n<tool_response>\n' + content +
// '\n</tool_response>', a run of results in one user turn.
bool HasQwenToolLines(std::string_view jinja) {
  return ContainsAll(jinja,
                     {"{%- for tool in tools %}", "{{- tool | tojson }}", "{{- tool_call.name }}",
                      "{%- set tool_call = tool_call.function %}", "{%- elif message.role == \"tool\" %}",
                      "{%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}"}) &&
         HasLiterals(jinja, {kToolsFooter, "\", \"arguments\": ", "}\n</tool_call>", "\n<tool_response>\n",
                             "\n</tool_response>", "<|im_start|>user"});
}

// Qwen2.5 (Qwen/Qwen2.5-*-Instruct): ChatML whose `tools` branch writes '<|im_start|>system\n', the first
// system message's content or else the default prompt, then '\n\n' + the tool block; a reply with
// tool_calls is '<|im_start|>assistant', '\n' + content only when there is content, then
// '\n<tool_call>\n{"name": "' ... per call (arguments | tojson), '<|im_end|>\n'.
bool IsQwen25ToolTemplate(std::string_view jinja, std::string_view default_prompt) {
  return HasQwenToolLines(jinja) &&
         ContainsAll(
             jinja,
             {"{%- if tools %}", "{{- messages[0]['content'] }}", "{{- tool_call.arguments | tojson }}",
              "(message.role == \"assistant\" and not message.tool_calls)",
              "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}"}) &&
         HasLiterals(jinja, {std::string("\n\n") + std::string(kToolsHeader), "\n<tool_call>\n{\"name\": \"",
                             default_prompt});
}

// Qwen3's tool lines: the header right after the system content + '\n\n', '\n' before a call only after
// content or another call, arguments written as they are when a string and with tojson otherwise.
bool HasQwen3ToolLines(std::string_view jinja) {
  return HasQwenToolLines(jinja) &&
         ContainsAll(jinja, {"{{- messages[0].content + '\n\n' }}",
                             "{%- if (loop.first and content) or (not loop.first) %}",
                             "{%- if tool_call.arguments is string %}", "{{- tool_call.arguments | tojson }}",
                             "{%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}"}) &&
         HasLiterals(jinja, {kToolsHeader, "<tool_call>\n{\"name\": \""});
}

Error CannotApply(std::string_view jinja, std::string_view why) {
  return MakeError("chat template ", why, " (it starts ", QuoteStart(jinja), "); ", kKnownStyles);
}

ChatStyle DetectStyle(std::string_view jinja) {
  // Templates that carry a known style's markers but write more than that style: refused, not
  // approximated, so that the prompt is always what the model was trained on.
  if (Contains(jinja, "Cutting Knowledge Date")) {
    throw CannotApply(
        jinja,
        "not supported: Llama 3.1+ templates always write a system turn with \"Cutting Knowledge "
        "Date\" and today's date, which plumb does not render (llama3 is the 3.0 format)");
  }
  if (Contains(jinja, "<think>")) {
    if (IsQwen3Template(jinja)) return ChatStyle::kQwen3;
    throw CannotApply(jinja,
                      "not supported: a reasoning template (<think> blocks) that is not Qwen3's, which "
                      "is the only one plumb renders");
  }
  if (Contains(jinja, "<|im_sep|>")) {
    throw CannotApply(jinja, "not supported: <|im_sep|> headers (Phi-4) are not ChatML's role + newline");
  }
  if (Contains(jinja, "<|im_start|>") && Contains(jinja, "<|im_end|>")) return ChatStyle::kChatMl;
  if (Contains(jinja, "<|start_header_id|>") && Contains(jinja, "<|end_header_id|>") &&
      Contains(jinja, "<|eot_id|>")) {
    return ChatStyle::kLlama3;
  }
  if (Contains(jinja, "[INST]")) {
    // Meta's Llama 2 chat template: a <<SYS>> block, BOS before every [INST], stripped contents. Mistral
    // and other [INST] templates space, strip and place BOS differently.
    if (Contains(jinja, "<<SYS>>") && Contains(jinja, "bos_token + '[INST] '") &&
        Contains(jinja, "content.strip()")) {
      return ChatStyle::kLlama2;
    }
    if (IsMistralTemplate(jinja)) return ChatStyle::kMistral;
    throw CannotApply(jinja,
                      "not supported: an [INST] template that is neither Meta's Llama 2 chat format (which "
                      "has <<SYS>>, bos_token + '[INST] ' and content.strip()) nor Mistral's first one "
                      "('[INST] ' + message['content'] + ' [/INST]', no system role)");
  }
  if (Contains(jinja, "<|end|>")) {
    if (IsPhi3Template(jinja)) return ChatStyle::kPhi3;
    if (IsPhi4MiniTemplate(jinja)) return ChatStyle::kPhi4Mini;
    throw CannotApply(jinja,
                      "not supported: an <|end|> template that is neither Phi-3.5-mini's nor "
                      "Phi-4-mini's (other Phi-3 revisions strip, add BOS or drop the system role)");
  }
  if (Contains(jinja, "<|assistant|>") && IsOlmo2Template(jinja)) return ChatStyle::kOlmo2;
  if (Contains(jinja, "<start_of_turn>") && Contains(jinja, "<end_of_turn>")) {
    // Gemma 1 and 2 reject system messages; Gemma 3 puts them in the first user turn.
    if (Contains(jinja, kNoSystem)) return ChatStyle::kGemma;
    if (IsGemma3Template(jinja)) return ChatStyle::kGemma3;
    throw CannotApply(jinja,
                      "not supported: a <start_of_turn> template that accepts system messages and is not "
                      "Gemma 3's (first_user_prefix = system + '\\n\\n')");
  }
  throw CannotApply(jinja, "not recognised");
}

// --- rendering ---------------------------------------------------------------------------------------------

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

std::string StyleNames() {
  std::string names;
  for (ChatStyle style : kStyles) names += (names.empty() ? "" : ", ") + std::string(ChatStyleName(style));
  return names;
}

}  // namespace

std::string_view ChatStyleName(ChatStyle style) {
  switch (style) {
    case ChatStyle::kChatMl:
      return "chatml";
    case ChatStyle::kLlama3:
      return "llama3";
    case ChatStyle::kLlama2:
      return "llama2";
    case ChatStyle::kGemma:
      return "gemma";
    case ChatStyle::kGemma3:
      return "gemma3";
    case ChatStyle::kMistral:
      return "mistral";
    case ChatStyle::kPhi3:
      return "phi3";
    case ChatStyle::kPhi4Mini:
      return "phi4-mini";
    case ChatStyle::kOlmo2:
      return "olmo2";
    case ChatStyle::kQwen3:
      return "qwen3";
  }
  return "unknown";
}

ChatTemplate ChatTemplate::FromJinja(std::string_view jinja, std::string bos_text, std::string eos_text) {
  if (PythonStrip(jinja).empty()) {
    throw MakeError("chat template is empty (the model has none); ", kKnownStyles);
  }
  ChatTemplate result(DetectStyle(jinja), std::move(bos_text), std::move(eos_text));
  if (result.style_ == ChatStyle::kChatMl) {
    if (std::optional<std::string> prompt = ChatMlDefaultSystemPrompt(jinja)) {
      result.has_default_system_prompt_ = true;
      result.default_system_prompt_ = std::move(*prompt);
      if (IsQwen25ToolTemplate(jinja, result.default_system_prompt_))
        result.tool_format_ = ToolFormat::kQwen25;
    }
  }
  if (result.style_ == ChatStyle::kQwen3 && HasQwen3ToolLines(jinja))
    result.tool_format_ = ToolFormat::kQwen3;
  return result;
}

ChatTemplate ChatTemplate::FromName(std::string_view name, std::string bos_text, std::string eos_text) {
  for (const ChatStyle style : kStyles) {
    if (ChatStyleName(style) != name) continue;
    ChatTemplate result(style, std::move(bos_text), std::move(eos_text));
    // Every Qwen3 template plumb recognises has the tool lines; a bare "chatml" is not Qwen2.5's.
    if (style == ChatStyle::kQwen3) result.tool_format_ = ToolFormat::kQwen3;
    return result;
  }
  throw MakeError("unknown chat template name '", name, "': plumb knows ", StyleNames());
}

std::string ChatTemplate::Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  return RenderWithContents(messages, add_generation_prompt).text;
}

RenderedChat ChatTemplate::RenderWithContents(const std::vector<ChatMessage>& messages,
                                              bool add_generation_prompt) const {
  return RenderWithContents(messages, add_generation_prompt, {});
}

RenderedChat ChatTemplate::RenderWithContents(const std::vector<ChatMessage>& messages,
                                              bool add_generation_prompt,
                                              const std::vector<std::string>& tools) const {
  ValidateConversation(style_, tool_format_, messages);
  if (!tools.empty() && tool_format_ == ToolFormat::kNone) {
    throw MakeError("chat template ", ChatStyleName(style_), ": this template does not write tools");
  }
  switch (style_) {
    case ChatStyle::kChatMl:
      if (tool_format_ == ToolFormat::kQwen25) {
        return RenderQwen25(messages, add_generation_prompt, default_system_prompt_, tools);
      }
      return RenderChatMl(messages, add_generation_prompt,
                          has_default_system_prompt_ ? &default_system_prompt_ : nullptr);
    case ChatStyle::kLlama3:
      return RenderLlama3(messages, add_generation_prompt, bos_text_);
    case ChatStyle::kLlama2:
      return RenderLlama2(messages, bos_text_, eos_text_);
    case ChatStyle::kGemma:
    case ChatStyle::kGemma3:
      return RenderGemma(messages, add_generation_prompt, bos_text_);
    case ChatStyle::kMistral:
      return RenderMistral(messages, bos_text_, eos_text_);
    case ChatStyle::kPhi3:
      return RenderPhi(messages, add_generation_prompt, /*newlines=*/true, eos_text_);
    case ChatStyle::kPhi4Mini:
      return RenderPhi(messages, add_generation_prompt, /*newlines=*/false, eos_text_);
    case ChatStyle::kOlmo2:
      return RenderOlmo2(messages, add_generation_prompt, bos_text_, eos_text_);
    case ChatStyle::kQwen3:
      return RenderQwen3(messages, add_generation_prompt, tools);
  }
  throw MakeError("chat template: unknown style ", static_cast<int>(style_));
}

namespace {

std::string TokenText(const Tokenizer& tokenizer, int id) {
  return id >= 0 && id < tokenizer.vocab_size() ? tokenizer.spec().tokens[id] : std::string();
}

bool IsControlToken(const Tokenizer& tokenizer, std::string_view text) {
  const std::optional<std::int32_t> id = tokenizer.FindToken(text);
  const std::vector<std::int32_t>& types = tokenizer.spec().token_types;
  return id && static_cast<std::size_t>(*id) < types.size() && types[*id] == kTokenControl;
}

}  // namespace

ChatTemplate ChatTemplateFor(const Tokenizer& tokenizer, std::string_view override_name) {
  const std::string bos = TokenText(tokenizer, tokenizer.bos_id());
  const std::string eos = TokenText(tokenizer, tokenizer.eos_id());
  if (!override_name.empty()) return ChatTemplate::FromName(override_name, bos, eos);
  if (tokenizer.chat_template().empty()) {
    // A Gemma 3 base model carries no template but the turn markers its instruct sibling was tuned with.
    if (IsControlToken(tokenizer, "<start_of_turn>") && IsControlToken(tokenizer, "<end_of_turn>")) {
      return ChatTemplate::FromName(ChatStyleName(ChatStyle::kGemma3), bos, eos);
    }
    throw MakeError("the model has no chat template; choose a style: ", StyleNames());
  }
  try {
    return ChatTemplate::FromJinja(tokenizer.chat_template(), bos, eos);
  } catch (const Error& e) {
    throw MakeError(e.what(), "; or choose a style: ", StyleNames());
  }
}

}  // namespace plumb
