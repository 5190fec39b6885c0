// plumb chat: an interactive, multi-turn conversation on stdin/stdout that keeps the KV cache between turns.
#include <unistd.h>

#include <limits>

#include "chat_loop.h"
#include "line_source.h"
#include "plumb/cli/batch_flags.h"
#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/core/error.h"
#include "plumb/engine/chat_session.h"
#include "plumb/engine/text_model.h"

namespace plumb::cli {
namespace {

// llama.cpp's default sampler settings: varied but on-topic replies.
SamplingParams ChatSamplingDefaults() {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  return p;
}

constexpr int kDefaultChatContext = 4096;

Flags ChatFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue("system", "TEXT", "system prompt (default: the chat template's own, if it has one)");
  f.AddValue(
      "chat-template", "NAME",
      "chatml, llama3, llama2, gemma, gemma3, mistral, phi3, phi4-mini, olmo2 or qwen3, instead of the "
      "one the model file names");
  f.AddValue("max-tokens", "N", "maximum length of one reply, in tokens", "1024");
  AddSamplingFlags(f, ChatSamplingDefaults());
  AddRuntimeFlags(f, "context length shared by the whole conversation; 0 = min(4096, the model's)", "0");
  AddKvDtypeFlag(f);
  f.AddValue("history", "FILE",
             "the lines typed at a terminal, for Up and Down, kept across sessions; none: not kept "
             "(default: $XDG_STATE_HOME/plumb/chat_history, else ~/.local/state/plumb/chat_history)");
  return f;
}

constexpr const char* kChatUsage =
    "usage: plumb chat --model PATH [flags]\n"
    "Chats with the model: type a message and press Enter; the reply streams back. The conversation is\n"
    "kept (and its KV cache reused) from turn to turn; when it outgrows --ctx the oldest exchanges are\n"
    "dropped. At a terminal: line editing and history, Ctrl-C stops a reply, Ctrl-D (or Ctrl-C at an empty\n"
    "prompt) quits. /help lists the commands (/clear, /system, /save, /load, /stats, /set, /tokens, /exit);\n"
    "a line ending in \\ or a block between \"\"\" lines is one message. From a pipe: one message a line.\n"
    "Timing goes to stderr.\n\n"
    "flags:\n";

}  // namespace

int RunChat(std::span<const std::string> args, std::istream& in, std::ostream& out, std::ostream& err) {
  Flags flags = ChatFlags();
  if (!flags.ParseUnlessHelp(args, kChatUsage, out)) return 0;
  const std::string model_path = flags.String("model");
  GenerationOptions options;
  options.max_new_tokens = flags.Int("max-tokens", 1, std::numeric_limits<int>::max());
  options.sampling = ReadSamplingFlags(flags);
  const std::string system_prompt = flags.IsSet("system") ? flags.String("system") : "";
  ApplyThreadsFlag(flags);

  TextModel loaded = TextModel::Load(model_path);
  const Tokenizer& tokenizer = loaded.RequireTokenizer("chat");
  const bool named = flags.IsSet("chat-template");
  ChatTemplate chat_template = [&] {
    try {
      return ChatTemplateFor(tokenizer, named ? flags.String("chat-template") : "");
    } catch (const Error& e) {
      if (named) throw;
      throw MakeError(e.what(), " (--chat-template NAME)");  // the library lists the styles
    }
  }();
  const int ctx = ReadContextFlag(flags, loaded.model.config(), kDefaultChatContext);
  options.stop_ids = loaded.StopIds();

  // A person at a terminal: prompts, the line editor, Ctrl-C stops a reply. Anything else (a pipe, a file, a
  // caller's stream) reads one message a line, as a script expects.
  const bool interactive = &in == &std::cin && isatty(STDIN_FILENO);
  std::unique_ptr<LineSource> source;
  if (interactive && &out == &std::cout && isatty(STDOUT_FILENO)) {
    std::string history = flags.IsSet("history") ? flags.String("history") : DefaultHistoryPath();
    if (history == "none") history.clear();
    source = NewTerminalLineSource(history, err);
  }
  if (!source) source = NewStreamLineSource(in, out, interactive);
  err << "plumb chat: " << model_path << " | template " << ChatStyleName(chat_template.style())
      << " | context " << ctx << " tokens | "
      << (interactive ? "/help for commands, /exit or Ctrl-D to quit" : "reading stdin") << "\n";
  ChatSession session(loaded.model, tokenizer, chat_template, ctx, options, system_prompt,
                      ReadKvDtypeFlag(flags));
  ChatLoop(session, tokenizer, interactive, out, err).Run(*source);
  if (interactive) out << "\n";
  return 0;
}

}  // namespace plumb::cli
