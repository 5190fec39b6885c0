// plumb chat's conversation loop: read an input (plumb/cli/chat_input.h), send a message or run a command,
// print the reply and its numbers. The commands themselves are in chat_commands.cpp.
#pragma once

#include <iosfwd>
#include <string>

#include "plumb/cli/chat_input.h"
#include "plumb/engine/chat_session.h"

namespace plumb::cli {

class ChatLoop {
 public:
  // interactive: a person at a terminal (prompts, Ctrl-C stops a reply); otherwise lines from a pipe.
  ChatLoop(ChatSession& session, const Tokenizer& tokenizer, bool interactive, std::ostream& out,
           std::ostream& err);

  // Until end of input or /exit.
  void Run(LineSource& source);

 private:
  enum class Next { kGoOn, kExit };

  void Reply(const std::string& message);
  Next Command(const std::string& name, const std::string& argument);

  // The commands (chat_commands.cpp); each prints to out_, or its refusal to err_.
  void Help();
  void System(const std::string& argument);
  void Save(const std::string& path);
  void Load(const std::string& path);
  void Stats();
  void Set(const std::string& argument);
  void Tokens();

  ChatSession& session_;
  const Tokenizer& tokenizer_;
  const bool interactive_;
  std::ostream& out_;
  std::ostream& err_;

  // For /stats: the last reply, and the session's replies summed (tokens, seconds, decode steps).
  ChatTurn last_;
  int replies_ = 0;
  int cut_replies_ = 0;
  GenerationStats totals_;
};

}  // namespace plumb::cli
