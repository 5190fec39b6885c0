// What the fuzz targets that read a parsed file further share: running one reading step where a plumb::Error
// is an expected answer, and a sink that keeps the bytes they touch from being optimised away.
#pragma once

#include <cstdint>

#include "plumb/core/error.h"

namespace plumb::fuzz {

// Runs f; a plumb::Error is the expected answer to a malformed input, anything else escapes (a finding).
template <class F>
void Expect(F&& f) {
  try {
    f();
  } catch (const plumb::Error&) {
  }
}

inline volatile std::uint8_t sink;

}  // namespace plumb::fuzz
