#include "plumb/cli/chat_input.h"

namespace plumb::cli {
namespace {

constexpr std::string_view kBlockQuote = R"(""")";

using Line = LineSource::Line;

// A line as typed: a trailing '\r' (a pasted Windows line ending) is not part of it.
std::string Chomp(std::string text) {
  if (!text.empty() && text.back() == '\r') text.pop_back();
  return text;
}

// The lines of a """ block after the opening one, up to and including the closing line.
ChatInput ReadBlock(LineSource& source, std::string first, const std::string& continuation_prompt) {
  ChatInput input{ChatInput::Kind::kMessage, std::move(first), ""};
  bool first_line = input.text.empty();  // an opening """ alone adds no line of its own
  for (;;) {
    Line line = source.Read(continuation_prompt);
    if (line.kind == Line::Kind::kInterrupt) return {ChatInput::Kind::kCancelled, "", ""};
    if (line.kind == Line::Kind::kEnd) return input;
    std::string text = Chomp(std::move(line.text));
    const bool closes = text.ends_with(kBlockQuote);
    if (closes) text.resize(text.size() - kBlockQuote.size());
    if (!(closes && text.empty())) {
      if (!first_line) input.text += '\n';
      input.text += text;
      first_line = false;
    }
    if (closes) return input;
  }
}

}  // namespace

ChatInput ReadChatInput(LineSource& source, const std::string& prompt,
                        const std::string& continuation_prompt) {
  Line line = source.Read(prompt);
  if (line.kind == Line::Kind::kEnd) return {ChatInput::Kind::kEnd, "", ""};
  if (line.kind == Line::Kind::kInterrupt) {
    return {line.text.empty() ? ChatInput::Kind::kEnd : ChatInput::Kind::kCancelled, "", ""};
  }
  std::string text = Chomp(std::move(line.text));

  if (text.starts_with('/') && !text.starts_with("//")) {
    const std::size_t space = text.find_first_of(" \t");
    ChatInput command{ChatInput::Kind::kCommand,
                      text.substr(1, space == std::string::npos ? space : space - 1), ""};
    if (space != std::string::npos) {
      const std::size_t argument = text.find_first_not_of(" \t", space);
      if (argument != std::string::npos) command.argument = text.substr(argument);
    }
    return command;
  }
  if (text.starts_with("//")) text.erase(0, 1);

  if (text.starts_with(kBlockQuote)) {
    std::string rest = text.substr(kBlockQuote.size());
    if (rest.size() >= kBlockQuote.size() && rest.ends_with(kBlockQuote)) {  // """one line"""
      rest.resize(rest.size() - kBlockQuote.size());
      return {ChatInput::Kind::kMessage, rest, ""};
    }
    return ReadBlock(source, std::move(rest), continuation_prompt);
  }

  ChatInput input{ChatInput::Kind::kMessage, "", ""};
  while (text.ends_with('\\')) {
    text.pop_back();
    input.text += text + '\n';
    line = source.Read(continuation_prompt);
    if (line.kind == Line::Kind::kInterrupt) return {ChatInput::Kind::kCancelled, "", ""};
    if (line.kind == Line::Kind::kEnd) {
      input.text.pop_back();  // the newline that announced a line that never came
      return input;
    }
    text = Chomp(std::move(line.text));
  }
  input.text += text;
  return input;
}

}  // namespace plumb::cli
