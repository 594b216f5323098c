// trim_space: what counts as whitespace around text others write.
#include <string>

#include <gtest/gtest.h>

#include "common/text.hpp"

namespace pressured {
namespace {

TEST(TrimSpace, DropsEveryKindOfSpaceAtBothEnds) {
  EXPECT_EQ(trim_space(" \t\r\n\v\ftoken\r\n"), "token");
  EXPECT_EQ(trim_space("a b"), "a b");  // inner space is kept
  EXPECT_EQ(trim_space("  "), "");
  EXPECT_EQ(trim_space(""), "");
}

TEST(TrimSpace, KeepsBytesThatAreNotSpace) {
  // A byte above 0x7f is no space in the C locale (and is not sign-extended into one).
  const std::string s = "\xa0value\xa0";
  EXPECT_EQ(trim_space(s), s);
  EXPECT_EQ(trim_space(std::string("\0x\0", 3)), std::string("\0x\0", 3));
}

}  // namespace
}  // namespace pressured
