// containerfs.* in the eviction maps: checked like any signal, then ignored
// with a warning, as the kubelet (1.29+) overrides them with derived values.
#include <gtest/gtest.h>

#include "config/load.hpp"

namespace pressured {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << "message: " << (text)

bool has(const Config& c, Signal s) {
  for (const auto& t : c.eviction.thresholds) {
    if (t.signal == s) return true;
  }
  return false;
}

TEST(ConfigContainerfs, ExplicitThresholdsAreIgnoredWithAWarningEach) {
  std::vector<std::string> w;
  auto r = parse_config_yaml(
      "evictionHard: {nodefs.available: 10%, containerfs.available: 1Gi, containerfs.inodesFree: 5%}\n"
      "evictionSoft: {containerfs.available: 2Gi}\n"
      "evictionSoftGracePeriod: {containerfs.available: 1m}\n"
      "evictionMinimumReclaim: {containerfs.available: 1Gi}\n",
      {}, &w);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(has(*r, Signal::ContainerfsAvailable));
  EXPECT_FALSE(has(*r, Signal::ContainerfsInodesFree));
  ASSERT_EQ(r->eviction.thresholds.size(), 1u);
  EXPECT_EQ(r->eviction.thresholds[0].signal, Signal::NodefsAvailable);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_HAS(w[0], "evictionHard.containerfs.available: is ignored");
  EXPECT_HAS(w[0], "derived: from the nodefs ones");
  EXPECT_HAS(w[1], "evictionHard.containerfs.inodesFree");
  EXPECT_HAS(w[2], "evictionSoft.containerfs.available");
  EXPECT_HAS(w[3], "evictionMinimumReclaim.containerfs.available");
}

TEST(ConfigContainerfs, BadValuesAreStillErrors) {
  // The kubelet parses them before ignoring them: a bad one stops it.
  std::vector<std::string> w;
  auto r = parse_config_yaml("evictionHard: {containerfs.available: lots}\n", {}, &w);
  ASSERT_FALSE(r);
  EXPECT_HAS(r.error().message, "containerfs.available");
  r = parse_config_yaml("evictionSoft: {containerfs.available: 1Gi}\n", {}, &w);
  ASSERT_FALSE(r);
  EXPECT_HAS(r.error().message, "no grace period");
}

TEST(ConfigContainerfs, FlagsAreIgnoredTheSameWay) {
  ConfigOptions flags;
  flags.eviction_hard = "nodefs.available<10%,containerfs.available<1Gi";
  std::vector<std::string> w;
  auto r = parse_config_yaml("", flags, &w);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(has(*r, Signal::ContainerfsAvailable));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_HAS(w[0], "containerfs.available: is ignored");
}

}  // namespace
}  // namespace pressured
