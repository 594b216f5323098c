#pragma once
// Gates for tests that need root, BPF, a cgroup controller or QEMU.
//
// Missing capability => GTEST_SKIP with a loud reason, unless the environment
// sets PRESSURED_REQUIRE_PRIVILEGED=1 (CI does, on a root machine with BPF),
// in which case the test FAILS: a privileged tier must never pass by skipping.

#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace pressured::testing {

inline bool privileged_required() {
  const char* v = std::getenv("PRESSURED_REQUIRE_PRIVILEGED");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace pressured::testing

/// Use at the top of a TEST body: skips (or fails under CI) when `cond` is false.
#define PRESSURED_REQUIRE(cond, what)                                                     \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      if (::pressured::testing::privileged_required()) {                                  \
        FAIL() << "required for this test but missing: " << (what)                        \
               << " (PRESSURED_REQUIRE_PRIVILEGED=1)";                                    \
      }                                                                                   \
      GTEST_SKIP() << "SKIPPED, missing: " << (what);                                     \
    }                                                                                     \
  } while (0)

#define PRESSURED_REQUIRE_ROOT() PRESSURED_REQUIRE(::geteuid() == 0, "root")
