// The observer's per-pod usage part (node/pod_usage.hpp) on its own: a
// listing read in full, pods that vanish or fail (stale, last usage), the
// page counters for decisions, and the storage walker's cache merged.
#include "cgroup/layout.hpp"
#include "node/pod_usage.hpp"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "kernel/file.hpp"
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
      EXPECT_EQ(readings[0].id, "aaa");
      EXPECT_EQ(readings[0].working_set_bytes, 140 * MiB);
      EXPECT_EQ(readings[0].usage_bytes, 200 * MiB);
      EXPECT_EQ(readings[1].id, "bbb");
      EXPECT_EQ(readings[1].working_set_bytes, 30 * MiB);
      EXPECT_FALSE(readings[0].previous_working_set_bytes) << "the pod's first reading";
      // Matched to the spec by runtime id, with each container's own request.
      pod.containers = {ContainerSpec{"app", "aaa", false, 100 * MiB, 0}, ContainerSpec{"log", "bbb", false, 64 * MiB, 0},
                        ContainerSpec{"init", "", true, 0, 0}};
      auto used = container_usage(pod, StarvedResource::Memory, readings);
      ASSERT_EQ(used.size(), 2u);
      EXPECT_EQ((std::tuple{used[0].name, used[0].usage, used[0].request}), (std::tuple{"app", 140 * MiB, 100 * MiB}));
      EXPECT_EQ((std::tuple{used[1].name, used[1].usage, used[1].request}), (std::tuple{"log", 30 * MiB, 64 * MiB}));
    }
  }
}

// Which container grew needs the reading before: the reader keeps each
// container's last reading with its pod (a pod listed by the last full
// observation), gives it with the next, and forgets containers gone since.
// v2 adds each container's own memory.pressure.
TEST(PodUsage, ContainerReadingsCarryTheReadingBeforeAndV2Pressure) {
  for (auto version : {CgroupVersion::V1, CgroupVersion::V2}) {
    SCOPED_TRACE(version == CgroupVersion::V1 ? "v1" : "v2");
    FakeNode fake(version, CgroupDriver::Cgroupfs);
    const std::string dir = fake.add_pod("u-1", QosClass::Burstable, mem(200, 60), "aaa");
    fake.write_memcg(dir + "/bbb", mem(40, 10));
    const std::string psi = "some avg10=12.50 avg60=3.00 avg300=1.00 total=900\nfull avg10=2.00 avg60=1.00 avg300=0.50 total=100\n";
    testing::write_text(dir + "/bbb/memory.pressure", psi);
    auto layout = detect_layout(fake.config());
    ASSERT_TRUE(layout) << layout.error().message;
    ObserverCounters counters;
    node::PodUsageReader reader(*layout, nullptr, counters);
    std::vector<Pod> pods;
    reader.read_listed(cgroup::scan_pods(*layout), t(1), pods);
    ASSERT_EQ(pods.size(), 1u);
    auto by_id = [](std::vector<ContainerMemory> v) {
      std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
      return v;
    };
    auto first = by_id(reader.container_memory(pods[0]));
    ASSERT_EQ(first.size(), 2u);
    EXPECT_FALSE(first[1].previous_working_set_bytes);
    EXPECT_EQ(first[1].memory_pressure.has_value(), version == CgroupVersion::V2);
    if (first[1].memory_pressure) {
      EXPECT_DOUBLE_EQ(first[1].memory_pressure->some.avg10, 12.5);
    }

    fake.write_memcg(dir + "/bbb", mem(90, 10));  // bbb grew by 50 MiB
    auto second = by_id(reader.container_memory(pods[0]));
    ASSERT_EQ(second.size(), 2u);
    EXPECT_EQ(second[1].previous_working_set_bytes, 30 * MiB);
    EXPECT_EQ(second[1].working_set_bytes, 80 * MiB);
    ASSERT_TRUE(second[1].previous_age_seconds);
    EXPECT_GE(*second[1].previous_age_seconds, 0.0);
    EXPECT_EQ(second[0].previous_working_set_bytes, 140 * MiB) << "aaa, unchanged";

    testing::TempDir::remove_tree(dir + "/bbb");
    auto third = reader.container_memory(pods[0]);
    ASSERT_EQ(third.size(), 1u);
    fake.write_memcg(dir + "/bbb", mem(40, 10));  // a new container under the same id
    auto fourth = by_id(reader.container_memory(pods[0]));
    ASSERT_EQ(fourth.size(), 2u);
    EXPECT_FALSE(fourth[1].previous_working_set_bytes) << "a container gone in between is forgotten";
  }
}

// For the daemon, a full observation reads the containers of the pods
// furthest over their memory request, so that their growth is known at
// their eviction; the others' are read at their eviction only.
TEST(PodUsage, TheLikelyVictimsContainersAreReadAheadOfTheirEviction) {
  FakeNode fake(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  fake.add_pod("over", QosClass::Burstable, mem(300, 0), "c-over");
  fake.add_pod("under", QosClass::Burstable, mem(100, 0), "c-under");
  fake.add_pod("big", QosClass::Burstable, mem(500, 0), "c-big");
  auto layout = detect_layout(fake.config());
  ASSERT_TRUE(layout) << layout.error().message;
  ObserverCounters counters;
  node::PodUsageReader reader(*layout, nullptr, counters);
  std::vector<Pod> pods;
  reader.read_listed(cgroup::scan_pods(*layout), t(1), pods);
  ASSERT_EQ(pods.size(), 3u);
  for (auto& p : pods) {
    if (p.uid == "over") p.requests.memory_bytes = 50 * MiB;   // 250 MiB over
    if (p.uid == "under") p.requests.memory_bytes = 400 * MiB;
    if (p.uid == "big") p.requests.memory_bytes = 400 * MiB;   // 100 MiB over
  }
  reader.read_likely_victims_containers(pods, 1);
  for (const auto& p : pods) {
    const auto readings = reader.container_memory(p);
    ASSERT_EQ(readings.size(), 1u) << p.uid;
    EXPECT_EQ(readings[0].previous_working_set_bytes.has_value(), p.uid == "over") << p.uid;
  }
  reader.read_likely_victims_containers(pods, 10);  // more than there are: each once
  for (const auto& p : pods) EXPECT_TRUE(reader.container_memory(p)[0].previous_working_set_bytes) << p.uid;
}

// The files of a real v2 memory cgroup (a 6.1 kernel, tests/fixtures/v2-6.1)
// as a container's: its working set from memory.current and memory.stat, its
// own memory.pressure as the kernel writes it.
TEST(PodUsage, AContainerOfARealV2KernelsFilesHasItsOwnStall) {
  const std::string fx = std::string(PRESSURED_FIXTURES_DIR) + "/v2-6.1/child";
  auto slurp = [](const std::string& p) {
    auto t = kernel::read_file(p);
    EXPECT_TRUE(t) << p;
    return t ? *t : std::string();
  };
  FakeNode fake(CgroupVersion::V2, CgroupDriver::Cgroupfs);
  const std::string dir = fake.add_pod("u-1", QosClass::Burstable, mem(200, 60), "aaa");
  for (const char* f : {"memory.current", "memory.stat", "memory.pressure"}) {
    testing::write_text(dir + "/aaa/" + f, slurp(fx + "/" + f));
  }
  auto layout = detect_layout(fake.config());
  ASSERT_TRUE(layout) << layout.error().message;
  ObserverCounters counters;
  node::PodUsageReader reader(*layout, nullptr, counters);
  Pod pod;
  pod.uid = "u-1";
  pod.cgroup_path = dir;
  auto r = reader.container_memory(pod);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].usage_bytes, std::stoull(slurp(fx + "/memory.current")));
  uint64_t inactive = 0;
  std::istringstream stat(slurp(fx + "/memory.stat"));
  std::string k;
  for (uint64_t v = 0; stat >> k >> v;) {
    if (k == "inactive_file") inactive = v;
  }
  EXPECT_EQ(r[0].working_set_bytes, r[0].usage_bytes - inactive) << "less its inactive file pages";
  ASSERT_TRUE(r[0].memory_pressure);
  EXPECT_DOUBLE_EQ(r[0].memory_pressure->some.avg10, 71.53);
}

}  // namespace
}  // namespace pressured
