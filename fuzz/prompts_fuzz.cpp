// Feeds the input to the prompts-file reader of plumb generate --prompts-file / --prompt-ids-file
// (cli/prompt_lines.h): ReadPromptLines over the bytes as a file, then ParseIdLine on every line it keeps, as
// --prompt-ids-file does. A plumb::Error is the expected answer (no prompts; a field that is not a token id);
// a finding is anything else: a crash, a sanitizer report, another exception, a hang, a kept line that is
// blank or holds a '\n', or line numbers out of order.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "plumb/cli/prompt_lines.h"
#include "plumb/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    int previous = 0;
    for (const auto& [number, line] : cli::ReadPromptLines(in, "fuzz-prompts.txt")) {
      if (number <= previous || line.find_first_not_of(" \t") == std::string::npos ||
          line.find('\n') != std::string::npos)
        __builtin_trap();
      previous = number;
      try {
        for (const int id : cli::ParseIdLine("fuzz-prompts.txt", number, line))
          if (id < 0) __builtin_trap();
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
