// The plumb subcommands. Each takes its arguments (after the command name) and the streams to write to,
// returns the process exit code, and throws plumb::Error for bad input (main() prints it as one line).
#pragma once

#include <ostream>
#include <span>
#include <string>

namespace plumb::cli {

// plumb generate --model PATH --prompt-ids 1,2,3 [--max-tokens N --temp T --top-k K --top-p P --min-p M
//                --seed S --threads N --ctx N --ignore-eos]
// Generated ids go to `out` (space-separated, streamed), timing to `err`.
int RunGenerate(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// Top-level dispatch: `plumb COMMAND ...`, `plumb --help`, `plumb --version`.
int RunMain(std::span<const std::string> args, std::ostream& out, std::ostream& err);

}  // namespace plumb::cli
