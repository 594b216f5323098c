// The eviction's log line names the pod the same way with or without
// metadata (daemon/eviction_executor.hpp).
#include <gtest/gtest.h>

#include "daemon/eviction_executor.hpp"

namespace pressured {
namespace {

TEST(EvictionLogLine, NamesThePodOnceWithOrWithoutMetadata) {
  // A pod known from cgroups only was logged as "pod pod <uid>".
  Eviction e;
  e.id = "6b012f60-2";
  e.uid = "u-anon";
  e.signal = Signal::MemoryAvailable;
  e.kind = ThresholdKind::Hard;
  const std::string anon = eviction_start_line(e, false);
  EXPECT_NE(anon.find("eviction 6b012f60-2: pod u-anon qos="), std::string::npos) << anon;
  EXPECT_EQ(anon.find("pod pod"), std::string::npos) << anon;
  e.name = "cache";
  e.namespace_ = "shop";
  const std::string named = eviction_start_line(e, true);
  EXPECT_NE(named.find("[dry-run] eviction 6b012f60-2: pod shop/cache (u-anon) qos="), std::string::npos) << named;
  EXPECT_EQ(pod_label("shop", "cache", "u-anon"), "pod shop/cache (u-anon)");
  EXPECT_EQ(pod_label("", "", "u-anon"), "pod u-anon");
}

}  // namespace
}  // namespace pressured
