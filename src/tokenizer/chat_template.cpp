// Chat templates: recognise the style of a Jinja template text, then render that style in C++.
//
// Each Render* function below is one real template written out by hand; the comment above it quotes the
// part of the template that decides each byte. tests/tokenizer/chat_template_test.cpp checks them against
// jinja2's rendering of the real texts (fixtures/chat/).
#include "plumb/tokenizer/chat_template.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb {
namespace {

constexpr std::array<ChatStyle, 5> kStyles = {ChatStyle::kChatMl, ChatStyle::kLlama3, ChatStyle::kLlama2,
                                              ChatStyle::kGemma, ChatStyle::kGemma3};

// What every "cannot apply this template" error ends with.
constexpr std::string_view kKnownStyles =
    "plumb renders chatml (<|im_start|>), llama3 (<|start_header_id|>, Llama 3.0), llama2 (Meta's "
    "[INST] <<SYS>> format), gemma (<start_of_turn>, Gemma 1 and 2) and gemma3 (Gemma 3's, with a system "
    "prompt); choose one by name with --chat-template NAME";

constexpr std::string_view kAlternate = "Conversation roles must alternate user/assistant/user/assistant/...";
constexpr std::string_view kNoSystem = "System role not supported";

bool Contains(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
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
    throw CannotApply(jinja, "not supported: reasoning templates (<think> blocks) are not rendered by plumb");
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
    throw CannotApply(jinja,
                      "not supported: an [INST] template that is not Meta's Llama 2 chat format (which has "
                      "<<SYS>>, bos_token + '[INST] ' and content.strip())");
  }
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
void ValidateConversation(ChatStyle style, const std::vector<ChatMessage>& messages) {
  if (messages.empty())
    throw MakeError("chat template ", ChatStyleName(style), ": the conversation is empty");
  if (style == ChatStyle::kGemma && messages[0].role == "system") {
    throw BadMessage(style, 0, messages[0], std::string(kNoSystem) + " (Gemma has no system role)");
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
    if (role != "system" && role != "user" && role != "assistant") {
      throw BadMessage(style, i, messages[i], "unknown role; plumb knows system, user and assistant");
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
    }
  }
  return result;
}

ChatTemplate ChatTemplate::FromName(std::string_view name, std::string bos_text, std::string eos_text) {
  for (const ChatStyle style : kStyles) {
    if (ChatStyleName(style) == name) return ChatTemplate(style, std::move(bos_text), std::move(eos_text));
  }
  throw MakeError("unknown chat template name '", name, "': plumb knows ", StyleNames());
}

std::string ChatTemplate::Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  return RenderWithContents(messages, add_generation_prompt).text;
}

RenderedChat ChatTemplate::RenderWithContents(const std::vector<ChatMessage>& messages,
                                              bool add_generation_prompt) const {
  ValidateConversation(style_, messages);
  switch (style_) {
    case ChatStyle::kChatMl:
      return RenderChatMl(messages, add_generation_prompt,
                          has_default_system_prompt_ ? &default_system_prompt_ : nullptr);
    case ChatStyle::kLlama3:
      return RenderLlama3(messages, add_generation_prompt, bos_text_);
    case ChatStyle::kLlama2:
      return RenderLlama2(messages, bos_text_, eos_text_);
    case ChatStyle::kGemma:
    case ChatStyle::kGemma3:
      return RenderGemma(messages, add_generation_prompt, bos_text_);
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
