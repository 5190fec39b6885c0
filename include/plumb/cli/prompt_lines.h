// The text inputs of the commands: plumb generate's prompts files (--prompts-file / --prompt-ids-file: one
// prompt per non-empty line; split out of src/cli/generate_batch.cpp so that tests and
// fuzz/prompts_fuzz.cpp reach them) and the whole text files of --file (perplexity, tokenize).
#pragma once

#include <istream>
#include <string>
#include <utility>
#include <vector>

namespace plumb::cli {

// The lines of `in` that hold more than spaces and tabs (a trailing '\r' dropped), each with its 1-based line
// number. `name` (the file's path) starts the error thrown when there is no such line.
std::vector<std::pair<int, std::string>> ReadPromptLines(std::istream& in, const std::string& name);

// One line of a --prompt-ids-file: comma-separated token ids, each a decimal integer in [0, INT_MAX] with
// spaces or tabs around it allowed. Errors name the file, the line number and the field.
std::vector<int> ParseIdLine(const std::string& name, int number, const std::string& line);

// The bytes of the file at `path`, as they are; throws plumb::Error naming the path when it cannot be read.
std::string ReadTextFile(const std::string& path);

}  // namespace plumb::cli
