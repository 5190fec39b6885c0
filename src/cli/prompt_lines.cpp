#include "plumb/cli/prompt_lines.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include "plumb/cli/flags.h"
#include "plumb/core/error.h"

namespace plumb::cli {

std::vector<std::pair<int, std::string>> ReadPromptLines(std::istream& in, const std::string& name) {
  std::vector<std::pair<int, std::string>> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) lines.emplace_back(number, line);
  }
  if (lines.empty()) throw MakeError(name, ": no prompts (one per non-empty line)");
  return lines;
}

std::vector<int> ParseIdLine(const std::string& name, int number, const std::string& line) {
  std::vector<int> ids;
  std::size_t start = 0;
  while (start <= line.size()) {
    const std::size_t comma = std::min(line.find(',', start), line.size());
    std::string field = line.substr(start, comma - start);
    field.erase(0, field.find_first_not_of(" \t"));
    field.erase(field.find_last_not_of(" \t") + 1);
    ids.push_back(static_cast<int>(ParseInteger(field, 0, std::numeric_limits<int>::max(),
                                                name + " line " + std::to_string(number) + " token id")));
    start = comma + 1;
  }
  return ids;
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw MakeError(path, ": cannot open text file");
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) throw MakeError(path, ": read error");
  return text.str();
}

}  // namespace plumb::cli
