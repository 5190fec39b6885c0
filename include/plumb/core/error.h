// plumb::Error: the one exception type the library throws for bad input.
//
// Errors carry their context in the message (file, field, offset or value) so that the CLI can print
// exactly one line and exit non-zero. Build messages with Error::At() / the stream-style helper below.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace plumb {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates its arguments with operator<< into one message:  throw MakeError("file ", path, ": bad x")
template <typename... Args>
Error MakeError(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return Error(out.str());
}

}  // namespace plumb
