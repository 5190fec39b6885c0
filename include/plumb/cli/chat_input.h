// What plumb chat reads from its user: a message (one line, or several joined), a slash command, or the end.
//
// The rules, the same at a terminal and from a pipe (README "plumb chat"):
//   - a line that ends in a backslash continues on the next line (the backslash becomes a newline);
//   - a line that starts with """ opens a block that the next line ending in """ closes: one message,
//     its lines joined by newlines (text on the opening and closing lines belongs to it);
//   - a line that starts with / is a command (`/set temp 0.2`: name "set", argument "temp 0.2"), unless it
//     starts with //, which sends the rest of it as a message that begins with one /;
//   - at a terminal, Ctrl-C (a line that ends in an interrupt) drops what was typed, and at an empty prompt
//     ends the chat as end of input (Ctrl-D) does.
#pragma once

#include <string>

namespace plumb::cli {

// Where lines come from: a line editor at a terminal, a stream otherwise (src/cli/line_source.h).
class LineSource {
 public:
  struct Line {
    enum class Kind { kText, kInterrupt, kEnd };
    Kind kind = Kind::kEnd;
    std::string text;  // kText: the line, without its newline; kInterrupt: what was typed before Ctrl-C
  };
  virtual ~LineSource() = default;
  // Reads one line, showing `prompt` first where the source is interactive.
  virtual Line Read(const std::string& prompt) = 0;
};

struct ChatInput {
  enum class Kind {
    kMessage,    // text: the message (possibly empty: nothing to send)
    kCommand,    // text: the command's name without the /; argument: the rest, leading spaces dropped
    kCancelled,  // Ctrl-C dropped what was being typed; read again
    kEnd,        // end of input, or Ctrl-C at an empty prompt: the chat ends
  };
  Kind kind = Kind::kEnd;
  std::string text;
  std::string argument;
};

// Reads lines from `source` until they make one input, showing `prompt` for the first line and
// `continuation_prompt` for the lines after it. End of input inside a block or after a backslash ends the
// message there (it is sent; the next read ends the chat).
ChatInput ReadChatInput(LineSource& source, const std::string& prompt,
                        const std::string& continuation_prompt);

}  // namespace plumb::cli
