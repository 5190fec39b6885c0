// ChatTemplate: turns a conversation into the prompt text an instruct model was trained on.
//
// plumb embeds no Jinja interpreter. Like llama.cpp's llm_chat_detect_template, FromJinja recognises which
// known style a model's template (GGUF tokenizer.chat_template) writes, by markers in its text, and Render
// writes that style in C++. Each style reproduces one family of real templates byte for byte, including
// their whitespace and strip() rules; tests/tokenizer/chat_template_test.cpp compares Render with jinja2's
// rendering of the real template texts (fixtures/chat/, tools/reference/make_chat_template_fixtures.py).
// A template that looks like a known style but writes something plumb does not (Llama 3.1's date
// preamble, reasoning templates other than Qwen3's) is refused rather than approximated.
// docs/chat-templates.md has the list.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace plumb {

// A tool call in an assistant message, as a template with tool support writes it back
// (docs/chat-templates.md, "Tool calls").
struct ChatToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text as the template's `tojson` writes it (TemplateJson)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", or "tool" (a tool's result) where tool_format() allows
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant messages only, where tool_format() allows
};

// How a template writes tools, tool calls and tool results, where it defines them at all.
enum class ToolFormat {
  kNone,    // the template has no tool use; callers describe tools in plain messages (serve's "generic")
  kQwen25,  // Qwen2.5's: <tools> in the system turn (after its default prompt), <tool_call>, <tool_response>
  kQwen3,   // Qwen3's: the same blocks, the system turn without a default prompt, calls after <think>
};

enum class ChatStyle {
  kChatMl,    // <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2, Qwen2.5, OpenHermes)
  kLlama3,    // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> (Llama 3.0 Instruct)
  kLlama2,    // <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s> (Llama 2 chat)
  kGemma,     // <start_of_turn>user\n...<end_of_turn>\n, no system role (Gemma 1 and 2 instruct)
  kGemma3,    // the same turns; a system message opens the first user turn + "\n\n" (Gemma 3 instruct)
  kMistral,   // <s>[INST] ... [/INST]...</s>, no system role (Mistral-7B-Instruct-v0.2's first, Mixtral)
  kPhi3,      // <|role|>\n...<|end|>\n, EOS when there is no generation prompt (Phi-3.5-mini-instruct)
  kPhi4Mini,  // <|role|>...<|end|>, EOS when there is no generation prompt (Phi-4-mini-instruct)
  kOlmo2,     // BOS, <|role|>\n...\n, replies end with EOS (OLMo 2 Instruct, the Tulu 3 format)
  kQwen3,     // ChatML; the last replies carry a <think> block, earlier ones lose theirs (Qwen3)
};

// "chatml", "llama3", "llama2", "gemma", "gemma3", "mistral", "phi3", "phi4-mini", "olmo2", "qwen3": the
// names FromName accepts.
std::string_view ChatStyleName(ChatStyle style);

// A rendered conversation and where the messages' contents (and a default system prompt) lie in it, as
// [begin, end) byte ranges: what a tokenizer must read as plain text, never as special tokens, so that a
// message cannot write a control token into the prompt (docs/tokenizers.md "Special tokens").
struct RenderedChat {
  std::string text;
  std::vector<std::pair<std::size_t, std::size_t>> contents;
};

class ChatTemplate {
 public:
  // Recognises the style of a Jinja template text. Throws plumb::Error naming the styles plumb knows and
  // quoting the start of the template when it cannot apply it; an empty template is an error too (the
  // caller picks a fallback by name). bos_text/eos_text are what the template's bos_token/eos_token
  // expand to (the token texts, e.g. "<s>" and "</s>").
  static ChatTemplate FromJinja(std::string_view jinja, std::string bos_text, std::string eos_text);

  // A style by name (ChatStyleName's), with no default system prompt. Throws plumb::Error listing the names
  // for any other.
  static ChatTemplate FromName(std::string_view name, std::string bos_text, std::string eos_text);

  ChatStyle style() const { return style_; }
  // kQwen25 for a ChatML template with Qwen2.5's tool block (FromJinja only), kQwen3 for qwen3, else kNone.
  ToolFormat tool_format() const { return tool_format_; }

  // The prompt text for the conversation; add_generation_prompt appends the assistant header (Llama 2
  // has none: its prompt already ends with "[/INST]" after a user turn). Throws plumb::Error, naming the
  // message, for an empty conversation, an unknown role, a system message that is not first, and where
  // the style's real template raises (Llama 2, Gemma 1-3 and Mistral: roles must alternate user/assistant
  // starting with user, after the first system message where there is one; Gemma 1 and 2 and Mistral: no
  // system role); in those cases the message contains the real template's own words.
  std::string Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  // Render's text with the ranges of the contents in it.
  RenderedChat RenderWithContents(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  // The same with the template's `tools` variable set: each tool's JSON text as `tool | tojson` writes it
  // (TemplateJson of {"type": "function", "function": {...}}), in order; the tools' texts and the tool
  // calls' names and arguments are contents too. Messages with role "tool" or tool_calls, and any tools,
  // need a tool_format() other than kNone (plumb::Error otherwise); an empty `tools` renders as no tools.
  RenderedChat RenderWithContents(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                  const std::vector<std::string>& tools) const;

  // The system prompt the template inserts when the conversation does not start with a system message
  // (SmolLM2: "You are a helpful AI assistant named SmolLM, trained by Hugging Face"); "" if none.
  const std::string& default_system_prompt() const { return default_system_prompt_; }

 private:
  ChatTemplate(ChatStyle style, std::string bos_text, std::string eos_text)
      : style_(style), bos_text_(std::move(bos_text)), eos_text_(std::move(eos_text)) {}

  ChatStyle style_;
  ToolFormat tool_format_ = ToolFormat::kNone;
  std::string bos_text_;
  std::string eos_text_;
  bool has_default_system_prompt_ = false;  // the template may insert an empty one
  std::string default_system_prompt_;
};

// Jinja's `tojson` filter as Hugging Face transformers defines it for chat templates:
// json.dumps(value, ensure_ascii=False): object keys in the order `json_text` has them, ", " and ": "
// between items, non-ASCII characters as they are, and Python's escapes (\" \\ \n \r \t \b \f, other
// control characters \u00xx). Numbers are written as nlohmann::json writes them (the shortest text that
// reads back the same; Python's repr agrees for all but a few exponents). Throws plumb::Error for
// malformed JSON.
std::string TemplateJson(std::string_view json_text);

class Tokenizer;

// The template a chat with this model uses: the style named by `override_name` when it is not empty
// (FromName), else the model's own template (Tokenizer::chat_template(), FromJinja), else, for a model
// without one whose vocabulary has <start_of_turn> and <end_of_turn> control tokens (a Gemma 3 base GGUF),
// gemma3; with the tokenizer's BOS and EOS texts. Throws plumb::Error when the name is unknown, when the
// model has no template and no such tokens, or when plumb cannot apply its template; the last two messages
// end with "choose a style: " and the names.
ChatTemplate ChatTemplateFor(const Tokenizer& tokenizer, std::string_view override_name = {});

}  // namespace plumb
