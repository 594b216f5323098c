// The words of one eviction come from one pure module (engine/eviction_words):
// the log line that starts it, relief's record, the resource names. Their text
// is what operators grep and golden timelines pin, so it is checked byte for
// byte here; the kubelet's message and annotations are checked against the
// kubelet's own text in tests/k8s/eviction_message_test.cpp.
#include "engine/eviction_words.hpp"

#include <gtest/gtest.h>

namespace pressured {
namespace {

using namespace std::chrono_literals;

constexpr double kMi = 1024.0 * 1024.0;

Eviction burstable_cache() {
  Eviction e;
  e.id = "6b012f60-1";
  e.uid = "u-cache";
  e.name = "cache";
  e.namespace_ = "shop";
  e.qos = QosClass::Burstable;
  e.signal = Signal::MemoryAvailable;
  e.kind = ThresholdKind::Hard;
  e.observed = 255 * kMi;
  e.threshold_value = 256 * kMi;
  e.grace_period_seconds = 0;
  e.cgroup_path = "/sys/fs/cgroup/memory/kubepods/burstable/podu-cache";
  e.keys.qos = QosClass::Burstable;
  e.keys.usage = static_cast<uint64_t>(700 * kMi);
  return e;
}

TEST(EvictionWords, TheStartLineNamesWhoWhyAndTheThresholdThenTheMessageAndTheChoice) {
  const Eviction e = burstable_cache();
  EXPECT_EQ(eviction_start_line(e, false),
            "eviction 6b012f60-1: pod shop/cache (u-cache) qos=Burstable signal=memory.available observed=267386880 "
            "threshold=268435456 (hard) grace=0s cgroup=/sys/fs/cgroup/memory/kubepods/burstable/podu-cache: "
            "The node was low on resource: memory. Threshold quantity: 256Mi, available: 255Mi. "
            "Evicted by pressured (eviction 6b012f60-1) for memory.available (hard threshold); the only pod that could "
            "be evicted. Why: victim qos=Burstable within-request priority=0 usage=700Mi request=0; no runner-up (the "
            "only pod that could be evicted)");
  EXPECT_EQ(eviction_start_line(e, true).rfind("[dry-run] eviction 6b012f60-1: ", 0), 0u);
}

TEST(EvictionWords, TheStartLineEndsWithReliefsOutcomeWhenReclaimWasAskedFirst) {
  Eviction e = burstable_cache();
  const std::string without = eviction_start_line(e, false);
  e.relief = ReliefSummary{3, static_cast<uint64_t>(120 * kMi), static_cast<uint64_t>(100 * kMi), 0.035};
  EXPECT_EQ(eviction_start_line(e, false),
            without + " Reclaim first: relief 3 asked 120.0Mi, got back 100.0Mi in 35.0 ms; still short.");
}

TEST(EvictionWords, AStartLineCarriesTheSameMessageAsTheEventAndTheSameWhyAsTop) {
  Eviction e = burstable_cache();
  e.kind = ThresholdKind::Soft;
  e.grace_period_seconds = 30;
  e.wake_source = "psi";
  const std::string line = eviction_start_line(e, false);
  EXPECT_NE(line.find(": " + eviction_message(e) + " Why: " + explain_choice(e)), std::string::npos) << line;
  EXPECT_NE(line.find("(soft) grace=30s"), std::string::npos) << line;
}

ReliefRecord relief_of(bool avoided) {
  ReliefRecord r;
  r.id = 3;
  r.signal = Signal::MemoryAvailable;
  r.kind = ThresholdKind::Hard;
  r.shortfall_bytes = static_cast<uint64_t>(10 * kMi);
  r.asked_bytes = static_cast<uint64_t>(120 * kMi);
  r.reclaimed_bytes = static_cast<uint64_t>(100 * kMi);
  r.took = 35ms;
  r.cgroups = 2;
  r.eviction_avoided = avoided;
  return r;
}

TEST(EvictionWords, ReliefsRecordLineSaysWhatWasAskedWhatCameBackAndTheVerdict) {
  EXPECT_EQ(relief_record_line(relief_of(true)),
            "relief 3: memory.available (hard) short 10.0Mi: asked 120.0Mi from 2 pod cgroup(s), got back 100.0Mi in "
            "35.0 ms: eviction avoided");
  ReliefRecord r = relief_of(false);
  r.timed_out = true;
  EXPECT_EQ(relief_record_line(r),
            "relief 3: memory.available (hard) short 10.0Mi: asked 120.0Mi from 2 pod cgroup(s), got back 100.0Mi in "
            "35.0 ms (stopped at its budget): memory.available still short, evicting as usual");
  r.failed = true;
  EXPECT_TRUE(relief_record_line(r).ends_with(": failed, evicting as usual"));
  r.dry_run = true;
  EXPECT_TRUE(relief_record_line(r).ends_with(": dry run, nothing written"));
}

TEST(EvictionWords, ResourcesAreNamedAsTheKubeletNamesThem) {
  EXPECT_EQ(starved_resource_name(Signal::MemoryAvailable), "memory");
  EXPECT_EQ(starved_resource_name(Signal::NodefsAvailable), "ephemeral-storage");
  EXPECT_EQ(starved_resource_name(Signal::NodefsInodesFree), "inodes");
  EXPECT_EQ(starved_resource_name(Signal::PidAvailable), "pids");
}

TEST(EvictionWords, APodIsNamedOnceWithOrWithoutMetadata) {
  EXPECT_EQ(pod_label("shop", "cache", "u-cache"), "pod shop/cache (u-cache)");
  EXPECT_EQ(pod_label("", "", "u-cache"), "pod u-cache");
}

}  // namespace
}  // namespace pressured
