// Chat templates, recognising: which style a Jinja template text writes, by markers and string literals
// in it (docs/chat-templates.md has the list), and the default system prompt of a ChatML template.
#include "chat_template_internal.h"

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plumb/core/error.h"

namespace plumb::chat_template_detail {
namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

namespace {

Error CannotApply(std::string_view jinja, std::string_view why) {
  return MakeError("chat template ", why, " (it starts ", QuoteStart(jinja), "); ", kKnownStyles);
}

}  // namespace

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

}  // namespace plumb::chat_template_detail
