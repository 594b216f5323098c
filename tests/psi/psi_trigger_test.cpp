// The PSI trigger strings written to memory.pressure (pure): the kernel's
// limits on stall and window, and the 2 s window granularity unprivileged.
#include <chrono>

#include <gtest/gtest.h>

#include "psi/psi_trigger.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;

TEST(Psi, TriggerFormatAndKernelLimits) {
  auto ok = psi::format_trigger(false, 50ms, 500ms, true);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(*ok, "some 50000 500000");
  EXPECT_EQ(*psi::format_trigger(true, 100ms, 1s, true), "full 100000 1000000");
  EXPECT_FALSE(psi::format_trigger(false, 50ms, 400ms, true)) << "window below 500ms";
  EXPECT_FALSE(psi::format_trigger(false, 50ms, 11s, true)) << "window above 10s";
  EXPECT_FALSE(psi::format_trigger(false, 600ms, 500ms, true)) << "stall above window";
  EXPECT_FALSE(psi::format_trigger(false, 0ms, 500ms, true));
  EXPECT_FALSE(psi::format_trigger(false, 50ms, 1s, false)) << "unprivileged: 2s multiples only";
  EXPECT_TRUE(psi::format_trigger(false, 50ms, 2s, false));
  EXPECT_EQ(psi::effective_window(500ms, true), 500ms);
  EXPECT_EQ(psi::effective_window(500ms, false), 2s);
  EXPECT_EQ(psi::effective_window(2s, false), 2s);
  EXPECT_EQ(psi::effective_window(2100ms, false), 4s);
}

}  // namespace
}  // namespace pressured
