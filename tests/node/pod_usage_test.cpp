// The observer's per-pod usage part (node/pod_usage.hpp) on its own: a
// listing read in full, pods that vanish or fail (stale, last usage), the
// page counters for decisions, and the storage walker's cache merged.
#include "cgroup/layout.hpp"
#include "node/pod_usage.hpp"

#include <algorithm>
#include <iterator>

#include <gtest/gtest.h>

#include "node/observer_test_helpers.hpp"
#include "pressured/engine.hpp"

namespace pressured {
namespace {

using namespace observer_test;

class CachedStorage final : public PodStorageSource {
 public:
  void walk_now(TimePoint) override {}
  std::optional<PodDiskUsage> lookup(const std::string& uid) const override {
    if (uid != "a") return std::nullopt;
    PodDiskUsage u;
    u.bytes = 42 * MiB;
    u.inodes = 7;
    u.measured_at = t(1);
    return u;
  }
  void start(Duration, const Clock&) override {}
  void stop() override {}
  PodStorageStats stats() const override { return {}; }
};

struct Usage {
  FakeNode fake{CgroupVersion::V1, CgroupDriver::Cgroupfs};
  CgroupLayout layout;
  ObserverCounters counters;
  std::unique_ptr<node::PodUsageReader> usage;
  Usage() {
    auto l = detect_layout(fake.config());
    if (!l) throw std::runtime_error(l.error().message);
    layout = *l;
    usage = std::make_unique<node::PodUsageReader>(layout, std::make_shared<CachedStorage>(), counters);
  }
  std::vector<cgroup::PodDir> listing() {
    auto dirs = cgroup::scan_pods(layout);
    std::sort(dirs.begin(), dirs.end(), [](const auto& x, const auto& y) { return x.memory_path < y.memory_path; });
    return dirs;
  }
};

FakePodMemory mem(uint64_t usage_mib, uint64_t inactive_mib) {
  return FakePodMemory{usage_mib * MiB, (usage_mib - inactive_mib) * MiB, inactive_mib * MiB, inactive_mib * MiB, 0};
}

const Pod* find(const std::vector<Pod>& pods, const std::string& uid) {
  for (const auto& p : pods) {
    if (p.uid == uid) return &p;
  }
  return nullptr;
}

TEST(PodUsage, ReadsEveryListedPodAndMergesTheStorageCache) {
  Usage u;
  u.fake.add_pod("a", QosClass::BestEffort, mem(100, 30));
  u.fake.add_pod("b", QosClass::Burstable, mem(50, 10));
  std::vector<Pod> pods;
  u.usage->read_listed(u.listing(), t(2), pods);
  ASSERT_EQ(pods.size(), 2u);
  const Pod* a = find(pods, "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->memory_usage_bytes, 100 * MiB);
  EXPECT_EQ(a->usage.memory_working_set_bytes, 70 * MiB);
  EXPECT_EQ(a->usage_observed_at, t(2));
  EXPECT_NE(a->cgroup_id, 0u);
  EXPECT_EQ(a->usage.ephemeral_storage_bytes, 42 * MiB);
  EXPECT_EQ(a->usage.inodes, 7u);
  EXPECT_EQ(find(pods, "b")->usage.ephemeral_storage_bytes, 0u);
  EXPECT_EQ(u.usage->tracked().size(), 2u);
}

TEST(PodUsage, APodGoneBeforeItsReadIsLeftOutAndAFailingOneIsStale) {
  Usage u;
  u.fake.add_pod("a", QosClass::BestEffort, mem(100, 30));
  u.fake.add_pod("b", QosClass::BestEffort, mem(50, 10));
  u.fake.add_pod("c", QosClass::BestEffort, mem(20, 10));
  auto dirs = u.listing();
  // b is new to this reader (no kept-open file that would still read it).
  std::vector<cgroup::PodDir> known;
  std::copy_if(dirs.begin(), dirs.end(), std::back_inserter(known), [](const auto& d) { return d.uid != "b"; });
  std::vector<Pod> first;
  u.usage->read_listed(known, t(1), first);
  ASSERT_EQ(first.size(), 2u);
  u.fake.remove_pod("b", QosClass::BestEffort);  // between the listing and the read
  testing::write_text(u.fake.pod_dir("c", QosClass::BestEffort) + "/memory.stat", "cache 1");  // truncated
  std::vector<Pod> second;
  u.usage->read_listed(dirs, t(2), second);
  EXPECT_EQ(find(second, "b"), nullptr);
  EXPECT_EQ(u.counters.vanished_pods.load(), 1u);
  const Pod* c = find(second, "c");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->stale);
  EXPECT_EQ(c->usage.memory_working_set_bytes, 10 * MiB) << "its last good usage";
  EXPECT_EQ(u.counters.stale_pod_reads.load(), 1u);
}

TEST(PodUsage, RefreshesOnePodAndReopensARecreatedCgroup) {
  Usage u;
  u.fake.add_pod("a", QosClass::BestEffort, mem(100, 30));
  std::vector<Pod> pods;
  u.usage->read_listed(u.listing(), t(1), pods);
  Pod a = pods.at(0);
  const uint64_t old_id = a.cgroup_id;
  u.fake.remove_pod("a", QosClass::BestEffort);
  u.fake.add_pod("a", QosClass::BestEffort, mem(300, 30));
  ASSERT_TRUE(u.usage->refresh_pod(a, t(2)));
  EXPECT_EQ(a.memory_usage_bytes, 300 * MiB);
  EXPECT_EQ(a.usage.memory_working_set_bytes, 270 * MiB);
  EXPECT_NE(a.cgroup_id, old_id);
  EXPECT_EQ(u.counters.reopened_cgroups.load(), 1u);
  u.fake.remove_pod("a", QosClass::BestEffort);
  auto r = u.usage->refresh_pod(a, t(3));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ENOENT);
  EXPECT_TRUE(a.stale);
}

TEST(PodUsage, PageCountersAreReadFreshAndAGoneCgroupIsStale) {
  Usage u;
  u.fake.add_pod("a", QosClass::BestEffort, mem(100, 30));
  u.fake.add_pod("b", QosClass::BestEffort, mem(50, 10));
  std::vector<Pod> pods;
  u.usage->read_listed(u.listing(), t(1), pods);
  u.fake.write_memcg(u.fake.pod_dir("a", QosClass::BestEffort), mem(400, 30));
  std::vector<Pod*> ptrs{&pods[0], &pods[1]};
  ASSERT_TRUE(u.usage->refresh_memory_usage(ptrs));
  EXPECT_EQ(find(pods, "a")->memory_usage_bytes, 400 * MiB);
  EXPECT_EQ(find(pods, "a")->usage.memory_working_set_bytes, 70 * MiB) << "only the page counter is read";
  Pod stranger = pods[0];
  stranger.uid = "x";
  stranger.cgroup_path = u.fake.pod_dir("x", QosClass::BestEffort);
  auto r = u.usage->refresh_memory_usage({&stranger});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ESTALE) << "a pod the last listing did not have";
}

// The kubelet's eviction message weighs each container on its own (its
// cgroup's working set: usage - inactive_file), so the observer reads each
// container cgroup below the pod's, with either driver, on v1 and v2; the
// pod's sandbox (no container of the spec) is read but matches nothing.
TEST(PodUsage, ContainerMemoryIsReadFromEachContainersOwnCgroup) {
  for (auto version : {CgroupVersion::V1, CgroupVersion::V2}) {
    for (auto driver : {CgroupDriver::Cgroupfs, CgroupDriver::Systemd}) {
      SCOPED_TRACE(std::string(version == CgroupVersion::V1 ? "v1 " : "v2 ") +
                   (driver == CgroupDriver::Systemd ? "systemd" : "cgroupfs"));
      FakeNode fake(version, driver);
      const std::string dir = fake.add_pod("u-1", QosClass::Burstable, mem(200, 60), "aaa");
      fake.write_memcg(dir + (driver == CgroupDriver::Systemd ? "/cri-containerd-bbb.scope" : "/bbb"), mem(40, 10));
      fake.write_memcg(dir + (driver == CgroupDriver::Systemd ? "/cri-containerd-pause.scope" : "/pause"), mem(1, 0));
      auto layout = detect_layout(fake.config());
      ASSERT_TRUE(layout) << layout.error().message;
      ObserverCounters counters;
      node::PodUsageReader reader(*layout, nullptr, counters);
      Pod pod;
      pod.uid = "u-1";
      pod.cgroup_path = dir;
      auto readings = reader.container_memory(pod);
      std::sort(readings.begin(), readings.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
      ASSERT_EQ(readings.size(), 3u);
      EXPECT_EQ(readings[0], (ContainerMemory{"aaa", 140 * MiB}));
      EXPECT_EQ(readings[1], (ContainerMemory{"bbb", 30 * MiB}));
      // Matched to the spec by runtime id, with each container's own request.
      pod.containers = {ContainerSpec{"app", "aaa", false, 100 * MiB, 0}, ContainerSpec{"log", "bbb", false, 64 * MiB, 0},
                        ContainerSpec{"init", "", true, 0, 0}};
      EXPECT_EQ(container_usage(pod, StarvedResource::Memory, readings),
                (std::vector<ContainerUsage>{{"app", 140 * MiB, 100 * MiB}, {"log", 30 * MiB, 64 * MiB}}));
    }
  }
}

}  // namespace
}  // namespace pressured
