// plumb chat's slash commands (README "plumb chat", docs/chat.md).
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <ostream>
#include <sstream>

#include "chat_loop.h"
#include "plumb/cli/chat_file.h"
#include "plumb/cli/flags.h"
#include "plumb/core/error.h"
#include "token_text.h"

namespace plumb::cli {
namespace {

constexpr const char* kHelp =
    "commands:\n"
    "  /help              this list\n"
    "  /clear             a new conversation, the same system prompt (/reset too)\n"
    "  /system [TEXT]     show the system prompt, or set it (the conversation stays, prefilled again)\n"
    "  /save FILE         the conversation as JSON messages, the body plumb serve's /v1/chat/completions "
    "takes\n"
    "  /load FILE         a saved conversation (or such a request body), prefilled at once\n"
    "  /stats             the context in use, the last reply's numbers, the session's, the settings\n"
    "  /set [NAME VALUE]  temp, top_k, top_p, min_p, seed or max_tokens for the next replies; alone: show "
    "them\n"
    "  /tokens            the context as the model has it: each position's token id and text\n"
    "  /exit              quit (/quit, /bye; Ctrl-D, or Ctrl-C at an empty prompt)\n"
    "input:\n"
    "  a line ending in \\ goes on on the next line; a block between \"\"\" lines is one message;\n"
    "  a message that begins with / is typed with // in front\n"
    "keys (at a terminal):\n"
    "  Ctrl-C stops a reply (what came so far stays in the conversation) or drops the line being typed;\n"
    "  Up/Down walk the history (kept across sessions), Left/Right/Home/End/Ctrl-W edit, as in a shell\n";

// A path as a shell would read a leading ~/.
std::string ExpandHome(const std::string& path) {
  const char* home = std::getenv("HOME");
  if (path.starts_with("~/") && home && *home) return std::string(home) + path.substr(1);
  return path;
}

}  // namespace

ChatLoop::Next ChatLoop::Command(const std::string& name, const std::string& argument) {
  if (name == "exit" || name == "quit" || name == "bye") return Next::kExit;
  if (name == "help" || name == "?") {
    Help();
  } else if (name == "clear" || name == "reset") {
    session_.Reset();
    err_ << "(a new conversation" << (session_.system_prompt().empty() ? "" : ", the same system prompt")
         << ")\n";
  } else if (name == "system") {
    System(argument);
  } else if (name == "save") {
    Save(argument);
  } else if (name == "load") {
    Load(argument);
  } else if (name == "stats") {
    Stats();
  } else if (name == "set") {
    Set(argument);
  } else if (name == "tokens") {
    Tokens();
  } else {
    err_ << "plumb chat: no command /" << name << "; /help lists them (to send a message that begins with /,"
         << " type // in front of it)\n";
  }
  return Next::kGoOn;
}

void ChatLoop::Help() {
  out_ << kHelp;
}

void ChatLoop::System(const std::string& argument) {
  if (argument.empty()) {
    out_ << (session_.system_prompt().empty() ? "(no system prompt; the template's default, if it has one)"
                                              : session_.system_prompt())
         << "\n";
    return;
  }
  session_.SetSystemPrompt(argument);
  err_ << "(system prompt set; the conversation is prefilled again with the next message)\n";
}

void ChatLoop::Save(const std::string& path) {
  if (path.empty()) throw MakeError("/save FILE: which file?");
  SaveConversation(ExpandHome(path), session_.messages());
  err_ << "(saved " << session_.messages().size() << " messages to " << path << ")\n";
}

void ChatLoop::Load(const std::string& path) {
  if (path.empty()) throw MakeError("/load FILE: which file?");
  const std::string file = ExpandHome(path);
  const int dropped = session_.Load(LoadConversation(file));
  err_ << "(loaded " << session_.messages().size() << " messages from " << path << ": "
       << session_.cache().length() << " tokens of context"
       << (dropped ? ", the oldest " + std::to_string(dropped) + " dropped to fit" : "") << ")\n";
}

void ChatLoop::Stats() {
  const GenerationOptions& options = session_.options();
  const SamplingParams& p = options.sampling;
  out_ << std::fixed << std::setprecision(1) << "context: " << session_.cache().length() << " of "
       << session_.cache().max_positions() << " positions (KV cache " << KvDtypeName(session_.cache().dtype())
       << "), " << session_.messages().size()
       << (session_.messages().size() == 1 ? " message\n" : " messages\n");
  if (replies_ > 0) {
    const GenerationStats& s = last_.stats;
    out_ << "last reply: " << s.prompt_tokens << " new prompt tokens at " << s.PrefillTokensPerSecond()
         << " tok/s, first token after " << s.time_to_first_token * 1e3 << " ms, " << s.generated_tokens
         << " generated at " << s.DecodeTokensPerSecond() << " tok/s, stopped by "
         << (last_.cut() ? "Ctrl-C" : StopReasonName(s.stop_reason)) << "\n";
    out_ << "session: " << replies_ << (replies_ == 1 ? " reply (" : " replies (") << cut_replies_
         << " cut by Ctrl-C), " << totals_.prompt_tokens << " prompt tokens prefilled in "
         << std::setprecision(2) << totals_.prefill_seconds << std::setprecision(1) << " s, "
         << totals_.generated_tokens << " tokens generated, decode " << totals_.DecodeTokensPerSecond()
         << " tok/s\n";
  }
  out_ << std::setprecision(2) << "settings: temp " << p.temperature << ", top_k " << p.top_k << ", top_p "
       << p.top_p << ", min_p " << p.min_p << ", seed " << p.seed << ", max_tokens " << options.max_new_tokens
       << "\n";
  out_.unsetf(std::ios::floatfield);
}

void ChatLoop::Set(const std::string& argument) {
  std::istringstream words(argument);
  std::string name, value, extra;
  words >> name >> value >> extra;
  if (name.empty()) {
    Stats();
    return;
  }
  if (value.empty() || !extra.empty())
    throw MakeError("/set NAME VALUE: one name and one value, not '", argument, "'");
  for (char& c : name) c = c == '-' ? '_' : c;  // /set top-p 0.9 as the flag spells it
  GenerationOptions options = session_.options();
  SamplingParams& p = options.sampling;
  const std::string what = "/set " + name;
  constexpr int kIntMax = std::numeric_limits<int>::max();
  if (name == "temp" || name == "temperature") {
    p.temperature = ParseFloat(value, 0.0f, std::numeric_limits<float>::max(), what);
  } else if (name == "top_k") {
    p.top_k = static_cast<int>(ParseInteger(value, 0, kIntMax, what));
  } else if (name == "top_p") {
    p.top_p = ParseFloat(value, 0.0f, 1.0f, what);
  } else if (name == "min_p") {
    p.min_p = ParseFloat(value, 0.0f, 1.0f, what);
  } else if (name == "seed") {
    p.seed = static_cast<std::uint64_t>(ParseInteger(value, 0, std::numeric_limits<long long>::max(), what));
  } else if (name == "max_tokens") {
    options.max_new_tokens = static_cast<int>(ParseInteger(value, 1, kIntMax, what));
  } else {
    throw MakeError("/set: no setting '", name, "'; temp, top_k, top_p, min_p, seed or max_tokens");
  }
  ValidateSamplingParams(p);
  session_.set_options(options);
  err_ << "(" << name << " = " << value << ")\n";
}

void ChatLoop::Tokens() {
  const std::vector<int>& ids = session_.context_tokens();
  const int width = static_cast<int>(std::to_string(std::max<std::size_t>(ids.size(), 1) - 1).size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    out_ << std::setw(width) << i << "  " << std::setw(6) << ids[i] << "  " << TokenLabel(tokenizer_, ids[i])
         << "\n";
  }
  // True after any reply, cut or not: its last sampled token was never run through the model.
  out_ << "(" << ids.size()
       << " tokens in the KV cache; a reply's last token goes in with the next message)\n";
}

}  // namespace plumb::cli
