// Node-level and limit OOM kills told apart from the kernel's per-memcg
// counters of two walks in a row (node/oom_scope.hpp). The cases follow the
// kernel: an OOM's domain is the memcg whose charge failed at its own limit
// (v2 memory.events.local `oom`, v1 memory.failcnt moves there), the victim is
// at or below it, and a global OOM moves no memcg's limit counters.
#include "node/oom_scope.hpp"

#include <gtest/gtest.h>

namespace pressured::node {
namespace {

const std::string kKp = "/sys/fs/cgroup/kubepods.slice";
const std::string kTier = kKp + "/kubepods-burstable.slice";
const std::string kPod = kTier + "/kubepods-burstable-podA.slice";
const std::string kCtr = kPod + "/cri-containerd-c1.scope";
const std::string kOther = kTier + "/kubepods-burstable-podB.slice";

// A v2 tree: each memcg's local `oom` and `oom_kill`.
struct V2 {
  uint64_t kp = 0, tier = 0, pod = 0, ctr = 0, other = 0;
  uint64_t ctr_kills = 0;
  std::vector<MemcgOomKills> counters() const {
    auto m = [](uint64_t id, const std::string& path, uint64_t oom, uint64_t kills) {
      MemcgOomKills k{id, path, kills};
      k.oom_events = oom;
      return k;
    };
    return {m(1, kKp, kp, 0), m(2, kTier, tier, 0), m(3, kPod, pod, 0), m(4, kCtr, ctr, ctr_kills),
            m(5, kOther, other, 0)};
  }
};

const std::vector<std::string> kPods = {kPod, kOther};

OomScope after(V2 before, V2 now, const std::string& victim, bool victim_memcg = true) {
  OomScopeClassifier c;
  c.update(before.counters(), kPods);
  c.update(now.counters(), kPods);
  return c.classify(victim, victim_memcg);
}

TEST(OomScope, V2ContainerAtItsOwnLimitIsACgroupKill) {
  EXPECT_EQ(after({}, {.ctr = 1, .ctr_kills = 1}, kCtr), OomScope::Cgroup);
}

TEST(OomScope, V2PodAtItsLimitIsACgroupKillOfItsContainer) {
  EXPECT_EQ(after({}, {.pod = 2, .ctr_kills = 1}, kCtr), OomScope::Cgroup);
}

TEST(OomScope, TheSameReadingsAgainSayNoLimitWasReachedSinceAsAFullUpdateWould) {
  const V2 hit{.ctr = 1, .ctr_kills = 1};
  OomScopeClassifier c;
  c.update(V2{}.counters(), kPods);
  c.update(hit.counters(), kPods);
  ASSERT_EQ(c.classify(kCtr, true), OomScope::Cgroup);
  c.update(hit.counters(), kPods);  // no walk since: the last update's counters
  EXPECT_EQ(c.classify(kCtr, true), OomScope::Node) << "the container's limit was reached before, not since";
  // A memcg whose evidence cannot be read stays unknown the same way.
  auto unreadable = hit.counters();
  unreadable[3].oom_events.reset();
  OomScopeClassifier u;
  u.update(unreadable, kPods);
  u.update(unreadable, kPods);
  u.update(unreadable, kPods);
  EXPECT_EQ(u.classify(kCtr, true), OomScope::Unknown);
}

TEST(OomScope, V2KillWithNoLimitReachedIsAGlobalOomOfTheNode) {
  EXPECT_EQ(after({}, {.ctr_kills = 1}, kCtr), OomScope::Node);
}

TEST(OomScope, V2KubepodsOrATierAtItsLimitIsTheNodeAllocatableRunningOut) {
  EXPECT_EQ(after({}, {.kp = 1, .ctr_kills = 1}, kCtr), OomScope::Node);
  EXPECT_EQ(after({}, {.tier = 1, .ctr_kills = 1}, kCtr), OomScope::Node);
}

TEST(OomScope, AnotherPodsLimitSaysNothingAboutThisKill) {
  EXPECT_EQ(after({}, {.other = 3, .ctr_kills = 1}, kCtr), OomScope::Node);
}

TEST(OomScope, OnlyTheChangeSinceTheLastReadingCounts) {
  EXPECT_EQ(after({.ctr = 5}, {.ctr = 5, .ctr_kills = 1}, kCtr), OomScope::Node) << "an old OOM of the container";
}

TEST(OomScope, BothTheNodesAndAWorkloadsLimitReachedCannotBeToldApart) {
  EXPECT_EQ(after({}, {.kp = 1, .ctr = 1, .ctr_kills = 2}, kCtr), OomScope::Unknown);
}

TEST(OomScope, AVictimKnownOnlyByASubtreeLooksBelowItToo) {
  // A pod's memory.events reported the kill: the victim is at or below the pod.
  EXPECT_EQ(after({}, {.ctr = 1}, kPod, false), OomScope::Cgroup);
  EXPECT_EQ(after({}, {.ctr = 1}, kPod, true), OomScope::Node) << "the pod's own memcg: its children are not on the path";
}

TEST(OomScope, NothingIsToldWithoutTwoReadingsOrOutsideTheTree) {
  OomScopeClassifier c;
  EXPECT_EQ(c.classify(kCtr, true), OomScope::Unknown);
  c.update(V2{.ctr = 1}.counters(), kPods);
  EXPECT_EQ(c.classify(kCtr, true), OomScope::Unknown) << "one reading: no change known";
  c.update(V2{.ctr = 1, .ctr_kills = 1}.counters(), kPods);
  EXPECT_EQ(c.classify(kCtr, true), OomScope::Node);
  EXPECT_EQ(c.classify("/sys/fs/cgroup/system.slice/foo.service", true), OomScope::Unknown) << "not kubepods";
  EXPECT_EQ(c.classify("", true), OomScope::Unknown);
  c.unread();
  c.update(V2{.ctr = 2, .ctr_kills = 2}.counters(), kPods);
  EXPECT_EQ(c.classify(kCtr, true), OomScope::Unknown) << "an unread observation breaks the pair";
}

TEST(OomScope, AMemcgCreatedSinceTheLastReadingCountsFromZero) {
  OomScopeClassifier c;
  auto v = V2{}.counters();
  v.pop_back();  // podB not there yet
  c.update(v, kPods);
  c.update(V2{.other = 1}.counters(), kPods);
  EXPECT_EQ(c.classify(kOther, true), OomScope::Cgroup);
}

// v1: failcnt of a limited memcg moving is a charge failed at that limit.
std::vector<MemcgOomKills> v1(uint64_t kp_fail, uint64_t pod_fail, bool pod_limited, uint64_t ctr_fail,
                              bool ctr_readable = true) {
  auto m = [](uint64_t id, const std::string& path, std::optional<uint64_t> fail, bool limited) {
    MemcgOomKills k{id, path, 0};
    k.failcnt = fail;
    k.limited = limited;
    return k;
  };
  return {m(1, kKp, kp_fail, true), m(2, kTier, 0, false), m(3, kPod, pod_fail, pod_limited),
          m(4, kCtr, ctr_readable ? std::optional<uint64_t>(ctr_fail) : std::nullopt, false)};
}

OomScope after_v1(const std::vector<MemcgOomKills>& before, const std::vector<MemcgOomKills>& now) {
  OomScopeClassifier c;
  c.update(before, kPods);
  c.update(now, kPods);
  return c.classify(kCtr, true);
}

TEST(OomScope, V1LimitedPodsFailcntMovingIsACgroupKill) {
  EXPECT_EQ(after_v1(v1(0, 10, true, 0), v1(0, 25, true, 0)), OomScope::Cgroup);
}

TEST(OomScope, V1NoFailedChargeOnThePathIsANodeKill) {
  EXPECT_EQ(after_v1(v1(0, 10, true, 0), v1(0, 10, true, 0)), OomScope::Node);
  EXPECT_EQ(after_v1(v1(3, 0, false, 0), v1(9, 0, false, 0)), OomScope::Node) << "kubepods (allocatable) at its limit";
}

TEST(OomScope, V1UnlimitedMemcgsFailcntIsNoEvidence) {
  EXPECT_EQ(after_v1(v1(0, 10, false, 0), v1(0, 12, false, 0)), OomScope::Node);
}

TEST(OomScope, V1UnreadableEvidenceOnThePathIsUnknown) {
  EXPECT_EQ(after_v1(v1(0, 0, true, 0, false), v1(0, 0, true, 0, false)), OomScope::Unknown);
}

TEST(OomScope, NamesAreTheMetricLabels) {
  EXPECT_EQ(name(OomScope::Node), "node");
  EXPECT_EQ(name(OomScope::Cgroup), "cgroup");
  EXPECT_EQ(name(OomScope::Unknown), "unknown");
}

}  // namespace
}  // namespace pressured::node
