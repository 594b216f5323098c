// The observer's pod-set part (node/pod_set.hpp) on its own: the listing and
// the watch that tells a decision the set moved, the metadata merge by uid
// and mirror, and the fail-safe for pods no good answer describes.
#include "cgroup/layout.hpp"
#include "node/pod_set.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include "node/observer_test_helpers.hpp"

namespace pressured {
namespace {

using namespace observer_test;

// A source whose map and health the test sets.
class SetSource final : public PodMetadataSource {
 public:
  Result<void> refresh() override { return {}; }
  std::shared_ptr<const PodMetadataMap> current() const override { return map; }
  void start(Duration) override {}
  void stop() override {}
  void request_refresh() override { ++refresh_requests; }
  PodMetadataStats stats() const override { return health; }
  std::string describe() const override { return "set"; }

  void answer(std::vector<PodMetadata> pods) {
    auto m = std::make_shared<PodMetadataMap>();
    for (auto& p : pods) (*m)[p.uid] = std::move(p);
    map = std::move(m);
    health.last_success = t(1);
    health.last_error.clear();
  }
  std::shared_ptr<const PodMetadataMap> map;
  PodMetadataStats health;
  int refresh_requests = 0;
};

PodMetadata md(const std::string& uid, const std::string& name) {
  PodMetadata m;
  m.uid = uid;
  m.name = name;
  m.namespace_ = "ns";
  m.priority = 7;
  m.phase = "Running";
  return m;
}

struct Set {
  FakeNode fake{CgroupVersion::V1, CgroupDriver::Cgroupfs};
  ObserverCounters counters;
  std::shared_ptr<SetSource> source = std::make_shared<SetSource>();
  std::unique_ptr<node::PodSet> set;
  explicit Set(bool with_source = true) {
    auto layout = detect_layout(fake.config());
    if (!layout) throw std::runtime_error(layout.error().message);
    set = std::make_unique<node::PodSet>(*layout, with_source ? source : nullptr, counters);
  }
  // The pods of a listing as the usage reader would hand them over.
  std::vector<Pod> pods() {
    std::vector<Pod> out;
    for (const auto& d : set->list(nullptr)) {
      Pod p;
      p.uid = d.uid;
      p.qos = d.qos;
      p.cgroup_path = d.memory_path;
      out.push_back(p);
    }
    return out;
  }
};

TEST(PodSet, ListsThePodCgroupsSortedAndTellsWhenTheSetMoved) {
  Set s;
  s.fake.add_pod("b", QosClass::BestEffort, FakePodMemory{MiB, 0, 0, 0, 0});
  s.fake.add_pod("a", QosClass::Burstable, FakePodMemory{MiB, 0, 0, 0, 0});
  s.fake.add_pod("g", QosClass::Guaranteed, FakePodMemory{MiB, 0, 0, 0, 0});
  EXPECT_TRUE(s.set->changed_since_listing()) << "never listed";
  auto dirs = s.set->list(nullptr);
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_TRUE(std::is_sorted(dirs.begin(), dirs.end(),
                             [](const auto& x, const auto& y) { return x.memory_path < y.memory_path; }));
  EXPECT_FALSE(s.set->changed_since_listing());
  s.fake.remove_pod("b", QosClass::BestEffort);
  s.fake.add_pod("c", QosClass::BestEffort, FakePodMemory{MiB, 0, 0, 0, 0});
  EXPECT_TRUE(s.set->changed_since_listing()) << "one pod replaced by another in the same tier";
  EXPECT_EQ(s.set->list(nullptr).size(), 3u);
  EXPECT_FALSE(s.set->changed_since_listing());
}

// The watch on kubepods and its tiers: a pod removed alone, a tier removed
// and created again are changes; a container cgroup created inside a pod is
// none (the pod set is the same).
TEST(PodSet, TellsAPodRemovedOrATierReplacedButNotAContainerStarted) {
  Set s;
  s.fake.add_pod("a", QosClass::Burstable, FakePodMemory{MiB, 0, 0, 0, 0});
  s.fake.add_pod("b", QosClass::BestEffort, FakePodMemory{MiB, 0, 0, 0, 0});
  ASSERT_EQ(s.set->list(nullptr).size(), 2u);
  pressured::testing::mkdirs(s.fake.pod_dir("a", QosClass::Burstable) + "/second-container");
  EXPECT_FALSE(s.set->changed_since_listing()) << "a container is not a pod";
  s.fake.remove_pod("a", QosClass::Burstable);
  EXPECT_TRUE(s.set->changed_since_listing()) << "a pod removed";
  EXPECT_TRUE(s.set->changed_since_listing()) << "until the next listing";
  ASSERT_EQ(s.set->list(nullptr).size(), 1u);
  EXPECT_FALSE(s.set->changed_since_listing());
  const std::string tier = s.fake.kubepods() + "/burstable";
  ASSERT_EQ(::rmdir(tier.c_str()), 0);
  EXPECT_TRUE(s.set->changed_since_listing()) << "a tier removed";
  ASSERT_EQ(s.set->list(nullptr).size(), 1u) << "no burstable tier";
  EXPECT_FALSE(s.set->changed_since_listing());
  s.fake.add_pod("c", QosClass::Burstable, FakePodMemory{MiB, 0, 0, 0, 0});
  EXPECT_TRUE(s.set->changed_since_listing()) << "the tier back, with a pod";
  EXPECT_EQ(s.set->list(nullptr).size(), 2u);
  EXPECT_FALSE(s.set->changed_since_listing());
  s.fake.remove_pod("c", QosClass::Burstable);
  EXPECT_TRUE(s.set->changed_since_listing()) << "the tier created after the watch was armed is watched too";
}

TEST(PodSet, DescribesThePodsWithTheirContainers) {
  Set s;
  s.fake.add_pod("a", QosClass::Burstable, FakePodMemory{MiB, 0, 0, 0, 0}, "c1");
  auto pods = s.set->describe();
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].uid, "a");
  EXPECT_EQ(pods[0].qos, QosClass::Burstable);
  ASSERT_EQ(pods[0].containers.size(), 1u);
  EXPECT_EQ(pods[0].containers[0].id, "c1");
}

TEST(PodSet, MergesMetadataByUidAndByMirror) {
  Set s;
  s.fake.add_pod("a", QosClass::Burstable, FakePodMemory{MiB, 0, 0, 0, 0});
  s.fake.add_pod("confighash", QosClass::BestEffort, FakePodMemory{MiB, 0, 0, 0, 0});
  PodMetadata mirror = md("mirror-uid", "static-web");
  mirror.mirror_of = "confighash";
  mirror.static_pod = true;
  PodMetadata a_md = md("a", "web");
  a_md.phase = "Failed";  // the eviction policy watches a record's phase (docs/kubernetes.md)
  s.source->answer({a_md, mirror, md("elsewhere", "other")});
  auto pods = s.pods();
  s.set->merge_metadata(t(2), pods);
  ASSERT_EQ(pods.size(), 2u);
  const Pod& a = pods[0].uid == "a" ? pods[0] : pods[1];
  const Pod& st = pods[0].uid == "a" ? pods[1] : pods[0];
  EXPECT_TRUE(a.metadata_known);
  EXPECT_EQ(a.name, "web");
  EXPECT_EQ(a.priority, 7);
  EXPECT_EQ(a.phase, "Failed");
  EXPECT_TRUE(st.metadata_known);
  EXPECT_EQ(st.name, "static-web");
  EXPECT_TRUE(st.static_pod);
  EXPECT_EQ(s.counters.pods_without_metadata.load(), 0u);
  EXPECT_EQ(s.counters.metadata_without_cgroup.load(), 1u) << "the running pod listed without a cgroup";
}

TEST(PodSet, APodNoGoodAnswerDescribesIsNeverEvictable) {
  Set s;
  s.fake.add_pod("a", QosClass::BestEffort, FakePodMemory{MiB, 0, 0, 0, 0});
  s.fake.add_pod("b", QosClass::BestEffort, FakePodMemory{MiB, 0, 0, 0, 0});
  // No answer yet: every pod is protected.
  auto pods = s.pods();
  s.set->merge_metadata(t(1), pods);
  for (const auto& p : pods) EXPECT_TRUE(p.metadata_unavailable) << p.uid;
  EXPECT_EQ(s.counters.pods_unevictable_without_metadata.load(), 2u);
  // The source answers for one: the other stays protected and a refresh is asked for.
  s.source->answer({md("a", "web")});
  const int asked = s.source->refresh_requests;
  pods = s.pods();
  s.set->merge_metadata(t(2), pods);
  const Pod& a = pods[0].uid == "a" ? pods[0] : pods[1];
  const Pod& b = pods[0].uid == "a" ? pods[1] : pods[0];
  EXPECT_FALSE(a.metadata_unavailable);
  EXPECT_TRUE(b.metadata_unavailable);
  EXPECT_EQ(s.counters.pods_unevictable_without_metadata.load(), 1u);
  EXPECT_GT(s.source->refresh_requests, asked);
}

TEST(PodSet, WithoutASourcePodsAreKnownFromCgroupsOnly) {
  Set s(false);
  s.fake.add_pod("a", QosClass::BestEffort, FakePodMemory{MiB, 0, 0, 0, 0});
  auto pods = s.pods();
  s.set->merge_metadata(t(1), pods);
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_FALSE(pods[0].metadata_unavailable);
  EXPECT_FALSE(pods[0].metadata_known);
  EXPECT_EQ(s.counters.pods_unevictable_without_metadata.load(), 0u);
}

}  // namespace
}  // namespace pressured
