// plumb chat's line sources (plumb/cli/chat_input.h's LineSource): a line editor at a terminal, a stream
// otherwise.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>

#include "plumb/cli/chat_input.h"

namespace plumb::cli {

// Lines from `in`, one per getline. With show_prompt the prompt goes to `out` first (a terminal without a
// line editor); a pipe gets none, as before plumb chat had one.
std::unique_ptr<LineSource> NewStreamLineSource(std::istream& in, std::ostream& out, bool show_prompt);

// The line editor on stdin and stdout, both terminals: libedit's (emacs keys, Up/Down through the history,
// the user's ~/.editrc), the history read from and written to `history_path` after every line ("" keeps it
// in memory). Ctrl-C ends a line as an interrupt. Null when the build has no libedit (warnings to `err`).
std::unique_ptr<LineSource> NewTerminalLineSource(const std::string& history_path, std::ostream& err);

// Where the history lives by default: $XDG_STATE_HOME/plumb/chat_history, else
// $HOME/.local/state/plumb/chat_history (the XDG base directory specification's state directory); "" if
// neither variable is set.
std::string DefaultHistoryPath();

}  // namespace plumb::cli
