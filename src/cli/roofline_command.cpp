#include "plumb/cli/commands.h"
#include "plumb/core/error.h"

namespace plumb::cli {
int RunRoofline(std::span<const std::string>, std::ostream&, std::ostream&) {
  throw MakeError("plumb roofline: not built yet");
}
}  // namespace plumb::cli
