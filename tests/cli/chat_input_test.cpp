// What plumb chat makes of the lines its user types (cli/chat_input.h): one message from one line, from
// backslash continuations or from a """ block; a /command; Ctrl-C dropping what was typed or ending the chat;
// and the prompts shown for the first line and the lines after it. A fake LineSource stands for the terminal.
#include "plumb/cli/chat_input.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

namespace plumb::cli {
namespace {

using Line = LineSource::Line;
using Kind = ChatInput::Kind;

Line Text(std::string text) {
  return {Line::Kind::kText, std::move(text)};
}
Line Interrupt(std::string typed = "") {
  return {Line::Kind::kInterrupt, std::move(typed)};
}
Line End() {
  return {Line::Kind::kEnd, ""};
}

// Hands out its lines in order, then end of input for ever (as a closed stream does), and records the prompt
// of every read, so that a test sees how many lines an input took and what the user was shown for each.
class FakeLines : public LineSource {
 public:
  explicit FakeLines(std::vector<Line> lines) : lines_(lines.begin(), lines.end()) {}
  Line Read(const std::string& prompt) override {
    prompts.push_back(prompt);
    if (lines_.empty()) return End();
    Line line = std::move(lines_.front());
    lines_.pop_front();
    return line;
  }
  std::size_t left() const { return lines_.size(); }
  std::vector<std::string> prompts;

 private:
  std::deque<Line> lines_;
};

using Prompts = std::vector<std::string>;

ChatInput Read(FakeLines& lines) {
  return ReadChatInput(lines, "> ", "... ");
}

// The input the lines make, with no line left over.
ChatInput ReadAll(std::vector<Line> list) {
  FakeLines lines(std::move(list));
  ChatInput input = Read(lines);
  EXPECT_EQ(lines.left(), 0u) << "lines left unread";
  return input;
}

void ExpectMessage(const ChatInput& input, const std::string& text) {
  EXPECT_EQ(input.kind, Kind::kMessage);
  EXPECT_EQ(input.text, text);
  EXPECT_EQ(input.argument, "");
}

void ExpectCommand(const ChatInput& input, const std::string& name, const std::string& argument) {
  EXPECT_EQ(input.kind, Kind::kCommand);
  EXPECT_EQ(input.text, name);
  EXPECT_EQ(input.argument, argument);
}

TEST(ChatInput, APlainLineIsOneMessageReadWithTheFirstPrompt) {
  FakeLines lines({Text("Hello there"), Text("second")});
  ExpectMessage(Read(lines), "Hello there");
  EXPECT_EQ(lines.prompts, (Prompts{"> "}));
  EXPECT_EQ(lines.left(), 1u) << "one line, one message: the next line is the next input";
  ExpectMessage(Read(lines), "second");
  EXPECT_EQ(Read(lines).kind, Kind::kEnd);
}

TEST(ChatInput, AnEmptyLineIsAnEmptyMessageNotTheEnd) {
  // Nothing to send, but the chat goes on (the caller reads again).
  ExpectMessage(ReadAll({Text("")}), "");
  ExpectMessage(ReadAll({Text("   ")}), "   ");
}

TEST(ChatInput, EndOfInputAtThePromptEndsTheChat) {
  FakeLines lines({});
  const ChatInput input = Read(lines);
  EXPECT_EQ(input.kind, Kind::kEnd);
  EXPECT_EQ(lines.prompts, (Prompts{"> "}));
}

TEST(ChatInput, ABackslashContinuesOnTheNextLineAsANewline) {
  FakeLines lines({Text("first\\"), Text("second\\"), Text("third"), Text("next message")});
  ExpectMessage(Read(lines), "first\nsecond\nthird");
  EXPECT_EQ(lines.prompts, (Prompts{"> ", "... ", "... "}));
  EXPECT_EQ(lines.left(), 1u);
  // Only a backslash at the end continues; one inside a line is text.
  ExpectMessage(ReadAll({Text(R"(a\b)")}), R"(a\b)");
  // A continued empty line is an empty line of the message; a continuation line is never a command.
  ExpectMessage(ReadAll({Text("a\\"), Text("\\"), Text("/set x")}), "a\n\n/set x");
  ExpectMessage(ReadAll({Text("\\"), Text("b")}), "\nb");
}

TEST(ChatInput, EndOfInputAfterABackslashSendsTheMessageThenEnds) {
  FakeLines lines({Text("one\\"), Text("two\\")});
  ExpectMessage(Read(lines), "one\ntwo");  // no newline for the line that never came
  EXPECT_EQ(lines.prompts, (Prompts{"> ", "... ", "... "}));
  EXPECT_EQ(Read(lines).kind, Kind::kEnd);
}

TEST(ChatInput, ABlockOpenedAloneHoldsTheLinesUpToTheClosingOne) {
  FakeLines lines(
      {Text(R"(""")"), Text("line one"), Text(""), Text("  indented \\"), Text(R"(""")"), Text("after")});
  // Inside a block a trailing backslash is text and an empty line is a line: the lines are taken as they are.
  ExpectMessage(Read(lines), "line one\n\n  indented \\");
  EXPECT_EQ(lines.prompts, (Prompts{"> ", "... ", "... ", "... ", "... "}));
  EXPECT_EQ(lines.left(), 1u);
  // A line that starts with / inside a block is text, not a command.
  ExpectMessage(ReadAll({Text(R"(""")"), Text("/quit"), Text(R"(""")")}), "/quit");
  // Opened and closed at once: an empty message.
  ExpectMessage(ReadAll({Text(R"(""")"), Text(R"(""")")}), "");
}

TEST(ChatInput, TextOnTheOpeningAndClosingLinesBelongsToTheBlock) {
  ExpectMessage(ReadAll({Text(R"("""first)"), Text("middle"), Text(R"(last""")")}), "first\nmiddle\nlast");
  ExpectMessage(ReadAll({Text(R"("""first)"), Text(R"(""")")}), "first");
  ExpectMessage(ReadAll({Text(R"(""")"), Text(R"(only""")")}), "only");
  // An empty line before the closing one is kept as the empty last line.
  ExpectMessage(ReadAll({Text(R"("""first)"), Text(""), Text(R"(""")")}), "first\n");
}

TEST(ChatInput, TripleQuotesAroundOneLineAreTheWholeMessage) {
  FakeLines lines({Text(R"("""one line""")"), Text("next")});
  ExpectMessage(Read(lines), "one line");
  EXPECT_EQ(lines.prompts, (Prompts{"> "}));
  EXPECT_EQ(lines.left(), 1u) << R"("""one line""" read a line past itself)";
  ExpectMessage(ReadAll({Text(R"("""""")")}), "");
  ExpectMessage(ReadAll({Text(R"("""say "hi"""")")}), R"(say "hi")");
}

TEST(ChatInput, EndOfInputInsideABlockSendsWhatItHolds) {
  FakeLines lines({Text(R"("""start)"), Text("more")});
  ExpectMessage(Read(lines), "start\nmore");
  EXPECT_EQ(lines.prompts, (Prompts{"> ", "... ", "... "}));
  EXPECT_EQ(Read(lines).kind, Kind::kEnd);

  FakeLines empty({Text(R"(""")")});
  ExpectMessage(Read(empty), "");
}

TEST(ChatInput, CtrlCDropsWhatWasTypedAndAtAnEmptyPromptEndsTheChat) {
  FakeLines lines({Interrupt("half a mess"), Text("hello")});
  const ChatInput cancelled = Read(lines);
  EXPECT_EQ(cancelled.kind, Kind::kCancelled);
  EXPECT_EQ(cancelled.text, "");
  ExpectMessage(Read(lines), "hello");  // the chat goes on: the next read is the next input

  FakeLines at_prompt({Interrupt(""), Text("never read")});
  EXPECT_EQ(Read(at_prompt).kind, Kind::kEnd);
  EXPECT_EQ(at_prompt.left(), 1u);
}

TEST(ChatInput, CtrlCInsideABlockOrAContinuationCancelsTheWholeMessage) {
  // Even with nothing typed on the line itself: the message already had lines, so this is no empty prompt.
  for (const std::string typed : {"", "partial"}) {
    SCOPED_TRACE("typed before Ctrl-C: \"" + typed + "\"");
    FakeLines block({Text(R"(""")"), Text("a"), Interrupt(typed), Text("next")});
    EXPECT_EQ(Read(block).kind, Kind::kCancelled);
    EXPECT_EQ(block.prompts, (Prompts{"> ", "... ", "... "}));
    ExpectMessage(Read(block), "next");

    FakeLines continued({Text("a\\"), Text("b\\"), Interrupt(typed), Text("next")});
    const ChatInput input = Read(continued);
    EXPECT_EQ(input.kind, Kind::kCancelled);
    EXPECT_EQ(input.text, "");
    EXPECT_EQ(continued.prompts, (Prompts{"> ", "... ", "... "}));
    ExpectMessage(Read(continued), "next");
  }
}

TEST(ChatInput, ASlashLineIsACommandWithItsArgument) {
  FakeLines lines({Text("/set temp 0.2"), Text("more")});
  ExpectCommand(Read(lines), "set", "temp 0.2");
  EXPECT_EQ(lines.left(), 1u);
  ExpectCommand(ReadAll({Text("/quit")}), "quit", "");
  ExpectCommand(ReadAll({Text("/save    chat.json")}), "save", "chat.json");  // leading spaces dropped
  ExpectCommand(ReadAll({Text("/save \t chat.json")}), "save", "chat.json");
  ExpectCommand(ReadAll({Text("/system\tBe brief.")}), "system", "Be brief.");     // a tab ends the name
  ExpectCommand(ReadAll({Text("/system Be  brief. ")}), "system", "Be  brief. ");  // the rest as it is
  ExpectCommand(ReadAll({Text("/reset   ")}), "reset", "");
  ExpectCommand(ReadAll({Text("/")}), "", "");  // the caller says which commands there are
  ExpectCommand(ReadAll({Text("/ x")}), "", "x");
  // A command is one line: a trailing backslash is part of its argument.
  ExpectCommand(ReadAll({Text("/system a\\")}), "system", "a\\");
}

TEST(ChatInput, TwoSlashesSendTheRestAsAMessageThatStartsWithOne) {
  ExpectMessage(ReadAll({Text("//x")}), "/x");
  ExpectMessage(ReadAll({Text("//")}), "/");
  ExpectMessage(ReadAll({Text("///etc/passwd is a path")}), "//etc/passwd is a path");
  // A slash not at the start is text.
  ExpectMessage(ReadAll({Text(" /set x")}), " /set x");
  ExpectMessage(ReadAll({Text("and/or")}), "and/or");
}

TEST(ChatInput, ATrailingCarriageReturnIsNotPartOfTheLine) {
  ExpectMessage(ReadAll({Text("hello\r")}), "hello");
  ExpectMessage(ReadAll({Text("\r")}), "");
  ExpectCommand(ReadAll({Text("/set temp 0.2\r")}), "set", "temp 0.2");
  ExpectCommand(ReadAll({Text("/quit\r")}), "quit", "");
  ExpectMessage(ReadAll({Text("//x\r")}), "/x");
  // Pasted Windows lines: the '\r' does not hide a backslash or a closing """.
  ExpectMessage(ReadAll({Text("a\\\r"), Text("b\r")}), "a\nb");
  ExpectMessage(ReadAll({Text("\"\"\"\r"), Text("x\r"), Text("\"\"\"\r")}), "x");
  ExpectMessage(ReadAll({Text("\"\"\"one\"\"\"\r")}), "one");
  // Only one, and only at the end.
  ExpectMessage(ReadAll({Text("a\rb")}), "a\rb");
  ExpectMessage(ReadAll({Text("a\r\r")}), "a\r");
}

}  // namespace
}  // namespace plumb::cli
