// Runs build/plumb as a real process, for tests of what a user sees: exit code and output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace plumb::testing {

struct ProcessResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// `args` is appended to the binary's path and run by /bin/sh, so it may hold redirections.
inline ProcessResult RunPlumb(const std::string& args) {
  const std::string command = std::string(PLUMB_BINARY_DIR) + "/plumb " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer;
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace plumb::testing
