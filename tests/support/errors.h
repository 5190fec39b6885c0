// Helpers for tests of error messages: every bad input must give a plumb::Error whose message names what
// was wrong (file, field, offset or value).
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "plumb/core/error.h"

namespace plumb::testing {

// The plumb::Error message of `action`, or a test failure (and "") if it does not throw one.
template <typename Action>
std::string ErrorOf(Action&& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a plumb::Error";
  return "";
}

// Every needle occurs in the message.
inline void ExpectMessageHas(const std::string& message, std::initializer_list<std::string> needles) {
  for (const std::string& needle : needles) {
    EXPECT_NE(message.find(needle), std::string::npos) << "message: " << message << "\nmissing: " << needle;
  }
}

}  // namespace plumb::testing
