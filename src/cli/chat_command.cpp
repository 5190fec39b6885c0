// plumb chat: an interactive, multi-turn conversation on stdin/stdout that keeps the KV cache between turns.
#include <unistd.h>
#include <iomanip>
#include <limits>

#include "plumb/cli/batch_flags.h"
#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/core/error.h"
#include "plumb/engine/chat_session.h"

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
  return f;
}

constexpr const char* kChatUsage =
    "usage: plumb chat --model PATH [flags]\n"
    "Chats with the model: type a message and press Enter; the reply streams back. The conversation is\n"
    "kept (and its KV cache reused) from turn to turn; when it outgrows --ctx the oldest exchanges are\n"
    "dropped. /reset starts over, /exit or end of input (Ctrl-D) quits. Timing goes to stderr.\n\n"
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

  const bool interactive = &in == &std::cin && isatty(STDIN_FILENO);
  err << "plumb chat: " << model_path << " | template " << ChatStyleName(chat_template.style())
      << " | context " << ctx << " tokens | " << (interactive ? "/exit or Ctrl-D to quit" : "reading stdin")
      << "\n";
  ChatSession session(loaded.model, tokenizer, chat_template, ctx, options, system_prompt,
                      ReadKvDtypeFlag(flags));
  std::string line;
  for (;;) {
    if (interactive) out << "> " << std::flush;
    if (!std::getline(in, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      session.Reset();
      err << "(conversation reset)\n";
      continue;
    }
    if (line.empty()) continue;
    try {
      const ChatTurn turn = session.Send(line, [&](std::string_view text) { out << text << std::flush; });
      out << "\n";
      const GenerationStats& s = turn.stats;
      err << std::fixed << std::setprecision(1) << "[" << s.prompt_tokens << " new prompt tokens, "
          << s.PrefillTokensPerSecond() << " tok/s | first token " << s.time_to_first_token * 1e3 << " ms | "
          << s.generated_tokens << " generated, " << s.DecodeTokensPerSecond() << " tok/s | context "
          << turn.context_used << "/" << ctx
          << (s.stop_reason == StopReason::kMaxTokens ? " | reply cut at --max-tokens" : "")
          << (turn.dropped_messages ? " | dropped " + std::to_string(turn.dropped_messages) + " old messages"
                                    : "")
          << "]\n";
    } catch (const Error& e) {
      // One bad turn (a message too long for the context) does not end the conversation.
      err << "plumb: error: " << e.what() << "\n";
    }
  }
  if (interactive) out << "\n";
  return 0;
}

}  // namespace plumb::cli
