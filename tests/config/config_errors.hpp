#pragma once
// What an operator sees when a configuration is refused: the tests of one
// section assert on parts of the message.
#include <string>

#include <gtest/gtest.h>

#include "config/load.hpp"

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << "message: " << (text)

namespace pressured::testing {

/// The error parse_config_yaml() gives for `yaml` ("" and a failure when it accepts it).
inline std::string error_of(const std::string& yaml) {
  auto r = parse_config_yaml(yaml);
  EXPECT_FALSE(r.ok()) << "accepted:\n" << yaml;
  return r.ok() ? "" : r.error().message;
}

}  // namespace pressured::testing
