#include "plumb/cli/commands.h"
#include "plumb/core/error.h"

namespace plumb::cli {
int RunExplain(std::span<const std::string>, std::ostream&, std::ostream&) {
  throw MakeError("plumb explain: not built yet");
}
}  // namespace plumb::cli
