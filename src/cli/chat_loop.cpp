#include "chat_loop.h"

#include <iomanip>
#include <optional>
#include <ostream>

#include "interrupt.h"
#include "plumb/core/error.h"

namespace plumb::cli {

ChatLoop::ChatLoop(ChatSession& session, const Tokenizer& tokenizer, bool interactive, std::ostream& out,
                   std::ostream& err)
    : session_(session), tokenizer_(tokenizer), interactive_(interactive), out_(out), err_(err) {
  if (interactive_) {
    GenerationOptions options = session_.options();
    options.interrupt = InterruptScope::Flag();
    session_.set_options(options);
  }
}

void ChatLoop::Run(LineSource& source) {
  for (;;) {
    const ChatInput input = ReadChatInput(source, "> ", "... ");
    switch (input.kind) {
      case ChatInput::Kind::kEnd:
        return;
      case ChatInput::Kind::kCancelled:
        continue;
      case ChatInput::Kind::kCommand:
        try {
          // A command runs to its end (a /load's prefill, a long /tokens): Ctrl-C meanwhile must not end
          // plumb and the conversation with it.
          std::optional<InterruptScope> ignore_interrupts;
          if (interactive_) ignore_interrupts.emplace();
          if (Command(input.text, input.argument) == Next::kExit) return;
        } catch (const Error& e) {  // a file that cannot be read or written, a bad value: the chat goes on
          err_ << "plumb: error: " << e.what() << "\n";
        }
        continue;
      case ChatInput::Kind::kMessage:
        if (!input.text.empty()) Reply(input.text);
        continue;
    }
  }
}

void ChatLoop::Reply(const std::string& message) {
  try {
    ChatTurn turn;
    {
      // Ctrl-C stops this reply at the next token, at a terminal; from a pipe it ends plumb as it always did.
      std::optional<InterruptScope> interrupt;
      if (interactive_) interrupt.emplace();
      turn = session_.Send(message, [&](std::string_view text) { out_ << text << std::flush; });
    }
    out_ << "\n";
    const GenerationStats& s = turn.stats;
    err_ << std::fixed << std::setprecision(1) << "[" << s.prompt_tokens << " new prompt tokens, "
         << s.PrefillTokensPerSecond() << " tok/s | first token " << s.time_to_first_token * 1e3 << " ms | "
         << s.generated_tokens << " generated, " << s.DecodeTokensPerSecond() << " tok/s | context "
         << turn.context_used << "/" << session_.cache().max_positions()
         << (s.stop_reason == StopReason::kMaxTokens ? " | reply cut at --max-tokens" : "")
         << (turn.cut() ? " | reply cut by Ctrl-C: it stays in the conversation as far as it got" : "")
         << (turn.dropped_messages ? " | dropped " + std::to_string(turn.dropped_messages) + " old messages"
                                   : "")
         << "]\n";
    last_ = turn;
    ++replies_;
    cut_replies_ += turn.cut();
    totals_.prompt_tokens += s.prompt_tokens;
    totals_.generated_tokens += s.generated_tokens;
    totals_.prefill_seconds += s.prefill_seconds;
    totals_.decode_seconds += s.decode_seconds;
    totals_.decode_steps += s.decode_steps;
  } catch (const Error& e) {
    // One bad turn (a message too long for the context) does not end the conversation.
    err_ << "plumb: error: " << e.what() << "\n";
  }
}

}  // namespace plumb::cli
