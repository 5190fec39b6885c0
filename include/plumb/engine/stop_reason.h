// Why a sequence stopped generating: Generate's GenerationStats and the Scheduler's RequestStatus.
#pragma once

#include <cstdint>
#include <string_view>

namespace plumb {

enum class StopReason : std::uint8_t {
  kNone,         // not stopped (still running, or not started)
  kStopToken,    // emitted one of the stop ids (usually an end-of-sequence token)
  kMaxTokens,    // reached its limit of new tokens
  kContextFull,  // its KV cache or the model's context has no room for another token
  kAborted,      // the caller aborted it
};

// What plumb prints: "none", "stop id", "max tokens", "context full", "aborted".
std::string_view StopReasonName(StopReason reason);

}  // namespace plumb
