#include "plumb/engine/stop_reason.h"

namespace plumb {

std::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
      return "stop id";
    case StopReason::kMaxTokens:
      return "max tokens";
    case StopReason::kContextFull:
      return "context full";
    case StopReason::kAborted:
      return "aborted";
    case StopReason::kNone:
      break;
  }
  return "none";
}

}  // namespace plumb
