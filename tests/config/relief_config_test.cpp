// The relief section: defaults, parsing, and the errors an operator sees.
#include <gtest/gtest.h>

#include "config/config_errors.hpp"
#include "config/load.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;

using testing::error_of;

TEST(ReliefConfig, DefaultsAreOnWithASmallHardBudget) {
  auto r = parse_config_yaml("{}\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->relief.enabled);
  EXPECT_EQ(r->relief.hard_threshold_budget, 250ms);
  EXPECT_EQ(r->relief.backoff, 5min);
  EXPECT_EQ(r->relief.timeout, 5s);
  EXPECT_EQ(r->relief.low_yield_percent, 25);
}

TEST(ReliefConfig, ParsesEveryKey) {
  auto r = parse_config_yaml(
      "relief:\n  enabled: false\n  hardThresholdBudget: 0s\n  backoff: 90s\n  timeout: 2s\n  lowYieldPercent: 10\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->relief.enabled);
  EXPECT_EQ(r->relief.hard_threshold_budget, 0s) << "0 disables reclaim on hard thresholds";
  EXPECT_EQ(r->relief.backoff, 90s);
  EXPECT_EQ(r->relief.timeout, 2s);
  EXPECT_EQ(r->relief.low_yield_percent, 10);
}

TEST(ReliefConfig, RejectsBadValuesNamingTheKey) {
  EXPECT_HAS(error_of("relief:\n  hardThresholdBudget: 3s\n"), "relief.hardThresholdBudget: '3s' is over 2s");
  EXPECT_HAS(error_of("relief:\n  hardThresholdBudget: -1s\n"), "relief.hardThresholdBudget");
  EXPECT_HAS(error_of("relief:\n  backoff: 100ms\n"), "relief.backoff: '100ms' is under 1s");
  EXPECT_HAS(error_of("relief:\n  timeout: 0s\n"), "relief.timeout: '0s' must be positive");
  EXPECT_HAS(error_of("relief:\n  timeout: 10m\n"), "relief.timeout: '10m0s' is over 5m");
  EXPECT_HAS(error_of("relief:\n  lowYieldPercent: 120\n"), "relief.lowYieldPercent: '120' is not between 0 and 100");
  EXPECT_HAS(error_of("relief:\n  enable: true\n"), "relief.enable: unknown key");
  EXPECT_HAS(error_of("relief:\n  enabled: maybe\n"), "relief.enabled");
}

TEST(ReliefConfig, CheckConfigShowsWhereEachValueCameFrom) {
  auto r = parse_config_yaml("relief:\n  backoff: 2m\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string text = describe_sources(*r);
  EXPECT_HAS(text, "relief.hardThresholdBudget: 250ms  <- default");
  EXPECT_HAS(text, "relief.enabled: true  <- default");
  EXPECT_NE(text.find("relief.backoff: 2m"), std::string::npos) << text;
  EXPECT_EQ(text.find("relief.backoff: 2m  <- default"), std::string::npos) << text;
}

}  // namespace
}  // namespace pressured
