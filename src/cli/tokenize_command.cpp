// plumb tokenize: what a model's tokenizer makes of a text (llama.cpp's llama-tokenize), and of ids back to
// text; with --chat, the exact tokens plumb chat sends for a message, template and all.
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/cli/prompt_lines.h"
#include "plumb/core/error.h"
#include "plumb/engine/text_model.h"
#include "plumb/tokenizer/chat_template.h"
#include "plumb/tokenizer/tokenizer.h"
#include "plumb/tokenizer/unicode.h"
#include "token_text.h"

namespace plumb::cli {
namespace {

Flags TokenizeFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue("prompt", "TEXT", "the text to tokenize");
  f.AddValue("file", "F", "tokenize the contents of a file instead");
  f.AddValue("detokenize", "IDS", "the other way: comma-separated token ids to text, e.g. 9690,905");
  f.AddValue("show", "WHAT",
             "ids (comma-separated, as --prompt-ids takes them), pieces (one token a line: id and its text), "
             "json, text (what is tokenized: the rendered chat prompt with --chat), count",
             "ids");
  f.AddSwitch("no-bos", "do not add the tokens the tokenizer adds by itself (BOS, EOS where it adds them)");
  f.AddSwitch(
      "no-parse-special",
      "read special-token texts such as <|im_start|> in the prompt as plain text (docs/tokenizers.md)");
  f.AddSwitch("chat", "tokenize the prompt as the user's message of a chat, as plumb chat sends it");
  f.AddValue("system", "TEXT", "with --chat: the system prompt (default: the chat template's own, if any)");
  f.AddValue("chat-template", "NAME",
             "with --chat: chatml, llama3, llama2, gemma, gemma3, mistral, phi3, phi4-mini, olmo2 or qwen3 "
             "instead of the model's own");
  return f;
}

constexpr const char* kTokenizeUsage =
    "usage: plumb tokenize --model PATH (--prompt TEXT | --file F) [--show ids|pieces|json|text|count]\n"
    "                      [--no-bos] [--no-parse-special] [--chat [--system TEXT] [--chat-template NAME]]\n"
    "       plumb tokenize --model PATH --detokenize 9690,905\n"
    "Prints the token ids the model's tokenizer gives the text (only the tokenizer is read, not the "
    "weights).\n"
    "Special-token texts in the prompt (<|im_start|>, <s>, ...) are read as those tokens, as plumb generate\n"
    "reads them, unless --no-parse-special. With --chat the prompt is one user message, rendered by the "
    "chat\n"
    "template and tokenized as plumb chat does it (docs/tokenizers.md).\n\nflags:\n";

void PrintTokens(const Tokenizer& tokenizer, const std::string& text, const std::vector<int>& ids,
                 const std::string& show, std::ostream& out) {
  if (show == "ids") {
    for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
    out << "\n";
  } else if (show == "count") {
    out << ids.size() << "\n";
  } else if (show == "text") {
    out << text;
  } else if (show == "pieces") {
    for (const int id : ids) out << id << "\t" << TokenLabel(tokenizer, id) << "\n";
  } else {  // json
    nlohmann::ordered_json tokens = nlohmann::ordered_json::array();
    for (const int id : ids) {
      bool special = false;
      const std::string piece = TokenText(tokenizer, id, special);
      nlohmann::ordered_json bytes = nlohmann::ordered_json::array();
      for (const char c : piece) bytes.push_back(static_cast<unsigned char>(c));
      // "piece" is valid UTF-8 for JSON (a partial character as U+FFFD); "bytes" is exact.
      nlohmann::ordered_json token;
      token["id"] = id;
      token["piece"] = unicode::ToValidUtf8(piece);
      token["bytes"] = std::move(bytes);
      token["special"] = special;
      tokens.push_back(std::move(token));
    }
    nlohmann::ordered_json doc;
    doc["text"] = unicode::ToValidUtf8(text);
    doc["count"] = ids.size();
    doc["ids"] = ids;
    doc["tokens"] = std::move(tokens);
    out << doc.dump(2) << "\n";
  }
}

}  // namespace

int RunTokenize(std::span<const std::string> args, std::ostream& out, std::ostream&) {
  Flags flags = TokenizeFlags();
  if (!flags.ParseUnlessHelp(args, kTokenizeUsage, out)) return 0;
  const std::string model_path = flags.String("model");
  const int sources = flags.IsSet("prompt") + flags.IsSet("file") + flags.IsSet("detokenize");
  if (sources != 1) throw MakeError("give exactly one of --prompt TEXT, --file F and --detokenize IDS");
  const std::string show = flags.String("show");
  if (show != "ids" && show != "pieces" && show != "json" && show != "text" && show != "count") {
    throw MakeError("--show ", show, ": expected ids, pieces, json, text or count");
  }
  const bool chat = flags.Switch("chat");
  if (!chat && (flags.IsSet("system") || flags.IsSet("chat-template"))) {
    throw MakeError("--system and --chat-template only apply with --chat");
  }
  if (chat && (flags.Switch("no-bos") || flags.Switch("no-parse-special"))) {
    throw MakeError(
        "--no-bos and --no-parse-special do not apply with --chat: the chat template decides both");
  }
  if (flags.IsSet("detokenize") && (chat || flags.IsSet("show"))) {
    throw MakeError("--detokenize prints the text; --chat and --show apply to tokenizing");
  }
  const std::vector<int> detokenize =
      flags.IsSet("detokenize") ? flags.IntList("detokenize") : std::vector<int>{};
  const std::string text = flags.IsSet("prompt") ? flags.String("prompt")
                           : flags.IsSet("file") ? ReadTextFile(flags.String("file"))
                                                 : "";

  const std::optional<Tokenizer> loaded = TextModel::LoadTokenizer(model_path);
  if (!loaded) {
    throw MakeError(model_path,
                    ": no tokenizer (no tokenizer.ggml.* metadata, tokenizer.json or tokenizer.gguf)");
  }
  const Tokenizer& tokenizer = *loaded;

  if (flags.IsSet("detokenize")) {
    for (std::size_t i = 0; i < detokenize.size(); ++i) {
      if (detokenize[i] < 0 || detokenize[i] >= tokenizer.vocab_size()) {
        throw MakeError("--detokenize: id ", detokenize[i], " (position ", i,
                        ") is outside the vocabulary [0, ", tokenizer.vocab_size(), ")");
      }
    }
    out << tokenizer.Decode(detokenize) << "\n";
    return 0;
  }
  if (!chat) {
    const std::vector<int> ids =
        tokenizer.Encode(text, !flags.Switch("no-bos"), !flags.Switch("no-parse-special"));
    PrintTokens(tokenizer, text, ids, show, out);
    return 0;
  }
  // As plumb chat does it (src/engine/chat_session.cpp): the conversation rendered, then tokenized with the
  // template's own BOS and special tokens, the messages' texts as plain text.
  const ChatTemplate chat_template =
      ChatTemplateFor(tokenizer, flags.IsSet("chat-template") ? flags.String("chat-template") : "");
  std::vector<ChatMessage> messages;
  if (flags.IsSet("system")) messages.push_back({"system", unicode::ToValidUtf8(flags.String("system"))});
  messages.push_back({"user", unicode::ToValidUtf8(text)});
  const RenderedChat rendered = chat_template.RenderWithContents(messages, /*add_generation_prompt=*/true);
  PrintTokens(tokenizer, rendered.text,
              tokenizer.EncodeTemplated(rendered.text, /*add_special=*/false, rendered.contents), show, out);
  return 0;
}

}  // namespace plumb::cli
