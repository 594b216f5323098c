// daemon.predictiveLead: read, dumped back, and refused with a message that
// names the key and says what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "config/load.hpp"

namespace pressured {
namespace {

std::string error_of(const std::string& yaml) {
  auto r = parse_config_yaml(yaml);
  EXPECT_FALSE(r.ok()) << "accepted:\n" << yaml;
  return r.ok() ? "" : r.error().message;
}

TEST(PredictiveLead, OffByDefault) {
  auto r = parse_config_yaml("evictionHard: {memory.available: 100Mi}\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->daemon.predictive_lead, Duration::zero());
}

TEST(PredictiveLead, ReadAndDumpedBack) {
  auto r = parse_config_yaml("evictionHard: {allocatableMemory.available: 100Mi}\ndaemon: {predictiveLead: 250ms}\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->daemon.predictive_lead, std::chrono::milliseconds(250));
  auto again = parse_config_yaml(dump_config(*r));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->daemon.predictive_lead, std::chrono::milliseconds(250));
}

TEST(PredictiveLead, RefusedWithAReason) {
  const std::string hard = "evictionHard: {memory.available: 100Mi}\n";
  auto negative = error_of(hard + "daemon: {predictiveLead: -1s}\n");
  EXPECT_NE(negative.find("daemon.predictiveLead: '-1s' is negative"), std::string::npos) << negative;
  auto too_long = error_of(hard + "daemon: {predictiveLead: 11s}\n");
  EXPECT_NE(too_long.find("daemon.predictiveLead: '11s' is longer than 10s"), std::string::npos) << too_long;
  auto not_duration = error_of(hard + "daemon: {predictiveLead: soon}\n");
  EXPECT_NE(not_duration.find("predictiveLead"), std::string::npos) << not_duration;
  // Nothing to predict: only a soft memory threshold, or only a disk one.
  auto soft = error_of(
      "evictionHard: {nodefs.available: 10%}\nevictionSoft: {memory.available: 1Gi}\n"
      "evictionSoftGracePeriod: {memory.available: 30s}\ndaemon: {predictiveLead: 200ms}\n");
  EXPECT_NE(soft.find("needs a hard memory.available or allocatableMemory.available threshold"), std::string::npos)
      << soft;
}

}  // namespace
}  // namespace pressured
