// What pressured believes about a pod, source by source: a pod's author
// cannot make it static or critical by anything it writes into the API
// server (annotations, a priority class, a quantity), mirror pods match their
// static pod's cgroup, and a pod the source does not describe is not evicted.
#include <gtest/gtest.h>

#include <mutex>

#include "fakes/fake_node.hpp"
#include "metrics/exposition.hpp"
#include "pods/pod_json.hpp"
#include "pressured/engine.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

using testing::exported;

constexpr uint64_t MiB = 1ULL << 20;

// A tenant's pod as the API server stores it, with `extra` spliced into its
// metadata and `spec` as its spec.
std::string tenant_pod(const std::string& uid, const std::string& extra_meta, const std::string& spec) {
  return R"({"kind":"Pod","metadata":{"name":")" + uid + R"(","namespace":"tenant","uid":")" + uid + "\"" +
         extra_meta + R"(},"spec":)" + spec + R"(,"status":{"phase":"Running"}})";
}

PodMetadata only(const Result<pods::ParsedPods>& r) {
  EXPECT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->pods.size(), 1u);
  return r->pods.at(0);
}

TEST(PodTrust, AnApiServerPodIsNotStaticByItsOwnConfigSourceAnnotation) {
  const std::string text = tenant_pod("u1", R"(,"annotations":{"kubernetes.io/config.source":"file"})",
                                      R"({"containers":[{"name":"c"}]})");
  const PodMetadata api = only(pods::parse_pod_documents(text, pods::DocumentFormat::Json, pods::PodTrust::ApiServer));
  EXPECT_FALSE(api.static_pod);
  EXPECT_FALSE(api.critical);
  // The least trusting is the default (the API-server source passes none).
  EXPECT_FALSE(only(pods::parse_pod_documents(text)).critical);
  // The kubelet's own copy carries the source it wrote itself.
  const PodMetadata kubelet = only(pods::parse_pod_documents(text, pods::DocumentFormat::Json, pods::PodTrust::Kubelet));
  EXPECT_TRUE(kubelet.static_pod);
  EXPECT_TRUE(kubelet.critical);
}

TEST(PodTrust, PriorityComesFromSpecPriorityNotTheClassName) {
  const std::string named = tenant_pod("u1", "", R"({"priorityClassName":"system-node-critical","containers":[]})");
  EXPECT_FALSE(only(pods::parse_pod_documents(named, pods::DocumentFormat::Json, pods::PodTrust::ApiServer)).critical);
  EXPECT_FALSE(only(pods::parse_pod_documents(named, pods::DocumentFormat::Json, pods::PodTrust::Kubelet)).critical);
  EXPECT_TRUE(only(pods::parse_pod_documents(named, pods::DocumentFormat::Json, pods::PodTrust::File)).critical)
      << "an operator's file may name the class alone";
  const std::string resolved = tenant_pod("u1", "", R"({"priority":2000001000,"containers":[]})");
  EXPECT_TRUE(only(pods::parse_pod_documents(resolved, pods::DocumentFormat::Json, pods::PodTrust::ApiServer)).critical);
}

TEST(PodTrust, MirrorPodsCarryTheirStaticPodsConfigHash) {
  const std::string mirror = tenant_pod(
      "api-uid", R"(,"annotations":{"kubernetes.io/config.mirror":"0123456789abcdef0123456789abcdef"})",
      R"({"priority":2000001000,"containers":[]})");
  const PodMetadata m = only(pods::parse_pod_documents(mirror));
  EXPECT_TRUE(m.static_pod);
  EXPECT_EQ(m.mirror_of, "0123456789abcdef0123456789abcdef");
}

// Every quantity the API server stores reads (saturating), and the pod stays
// evictable: 1e309 in each place a quantity is read.
TEST(PodTrust, QuantitiesPastADoubleSaturateInEveryField) {
  const char* specs[] = {
      R"({"containers":[{"name":"c","resources":{"limits":{"ephemeral-storage":"1e309"}}}]})",
      R"({"containers":[{"name":"c","resources":{"requests":{"ephemeral-storage":"1e309"}}}]})",
      R"({"containers":[{"name":"c","resources":{"limits":{"memory":"1e309","cpu":"1e309"}}}]})",
      R"({"containers":[{"name":"c","resources":{"requests":{"memory":"1e309","cpu":"1e309"}}}]})",
      R"({"initContainers":[{"name":"i","resources":{"limits":{"memory":"1e309","ephemeral-storage":"1e309"}}}],"containers":[]})",
      R"({"overhead":{"memory":"1e309"},"containers":[{"name":"c"}]})",
      R"({"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1e309"}}],"containers":[{"name":"c"}]})",
  };
  for (const char* spec : specs) {
    auto r = pods::parse_pod_documents(tenant_pod("u1", "", spec));
    const PodMetadata& p = only(r);
    EXPECT_FALSE(p.unparsable) << spec;
    EXPECT_FALSE(p.memory_spec_unparsable) << spec;
    EXPECT_FALSE(p.storage_spec_unparsable) << spec;
    EXPECT_TRUE(r->errors.empty()) << spec << ": " << r->errors.front();
  }
  const PodMetadata lim = only(pods::parse_pod_documents(tenant_pod("u1", "", specs[0])));
  EXPECT_EQ(lim.local_storage.pod_limit_bytes, std::optional<uint64_t>(UINT64_MAX));
  const PodMetadata ed = only(pods::parse_pod_documents(tenant_pod("u1", "", specs[6])));
  ASSERT_EQ(ed.local_storage.empty_dirs.size(), 1u);
  EXPECT_EQ(ed.local_storage.empty_dirs[0].size_limit_bytes, std::optional<uint64_t>(UINT64_MAX));
  EXPECT_EQ(only(pods::parse_pod_documents(tenant_pod("u1", "", specs[3]))).requests.memory_bytes, UINT64_MAX);
}

// A bad quantity costs the signals it concerns, not the pod.
TEST(PodTrust, AnUnreadableQuantityBlocksOnlyItsOwnResource) {
  auto mem = pods::parse_pod_documents(tenant_pod(
      "u1", "", R"({"containers":[{"name":"c","resources":{"requests":{"memory":"12Qi","ephemeral-storage":"1Gi"}}}]})"));
  const PodMetadata m = only(mem);
  EXPECT_FALSE(m.unparsable);
  EXPECT_TRUE(m.memory_spec_unparsable);
  EXPECT_FALSE(m.storage_spec_unparsable);
  EXPECT_EQ(m.requests.ephemeral_storage_bytes, 1024 * MiB) << "the rest is read";
  ASSERT_EQ(mem->errors.size(), 1u);
  EXPECT_NE(mem->errors[0].find("container c.requests.memory"), std::string::npos) << mem->errors[0];

  auto disk = pods::parse_pod_documents(tenant_pod(
      "u1", "", R"({"volumes":[{"name":"v","emptyDir":{"sizeLimit":"-1Gi"}}],"containers":[{"name":"c","resources":{"requests":{"memory":"64Mi"}}}]})"));
  const PodMetadata d = only(disk);
  EXPECT_FALSE(d.unparsable);
  EXPECT_FALSE(d.memory_spec_unparsable);
  EXPECT_TRUE(d.storage_spec_unparsable);
  EXPECT_EQ(d.requests.memory_bytes, 64 * MiB);

  Pod p;
  p.uid = "u1";
  p.metadata_known = true;
  p.memory_spec_unparsable = true;
  EvictionConfig ec;
  EXPECT_FALSE(never_evicted(p, ec));
  EXPECT_TRUE(never_evicted_for(p, StarvedResource::Memory, ec));
  EXPECT_FALSE(never_evicted_for(p, StarvedResource::EphemeralStorage, ec));
  EXPECT_FALSE(never_evicted_for(p, StarvedResource::Pids, ec));
  std::vector<Pod> pods{p};
  EXPECT_TRUE(rank_pods(pods, StarvedResource::Memory, ec).empty());
  EXPECT_EQ(rank_pods(pods, StarvedResource::Pids, ec).size(), 1u);
  pods[0].memory_spec_unparsable = false;
  pods[0].storage_spec_unparsable = true;
  EXPECT_TRUE(rank_pods(pods, StarvedResource::EphemeralStorage, ec).empty());
  EXPECT_EQ(rank_pods(pods, StarvedResource::Memory, ec).size(), 1u);
}

// A source serving a fixed map, as the API-server source would publish it.
class FixedSource final : public PodMetadataSource {
 public:
  explicit FixedSource(const std::string& text) {
    auto parsed = pods::parse_pod_documents(text, pods::DocumentFormat::Json, pods::PodTrust::ApiServer);
    EXPECT_TRUE(parsed) << parsed.error().message;
    auto map = std::make_shared<PodMetadataMap>();
    if (parsed) {
      for (auto& p : parsed->pods) {
        std::string uid = p.uid;
        (*map)[uid] = std::move(p);
      }
    }
    map_ = std::move(map);
    stats_.refreshes = 1;
    stats_.pods = map_->size();
    stats_.last_success = TimePoint(std::chrono::seconds(1));
  }
  Result<void> refresh() override { return {}; }
  std::shared_ptr<const PodMetadataMap> current() const override { return map_; }
  void start(Duration) override {}
  void stop() override {}
  void request_refresh() override {}
  PodMetadataStats stats() const override { return stats_; }
  std::string describe() const override { return "fixed"; }

 private:
  std::shared_ptr<const PodMetadataMap> map_;
  PodMetadataStats stats_;
};

TEST(PodTrust, TheObserverMatchesMirrorPodsAndNeverEvictsWhatNoSourceDescribes) {
  const std::string hash = "0123456789abcdef0123456789abcdef";
  testing::FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  // etcd: a static pod, its cgroup named after the config hash.
  node.add_pod(hash, QosClass::Burstable, testing::FakePodMemory{900 * MiB, 900 * MiB, 0, 0, 0});
  // A tenant claiming to be static by annotation, a priority class name, and
  // a second pod pretending to be the first one's mirror.
  node.add_pod("tenant-a", QosClass::BestEffort, testing::FakePodMemory{500 * MiB, 500 * MiB, 0, 0, 0});
  // A pod the source does not list (yet).
  node.add_pod("unlisted", QosClass::BestEffort, testing::FakePodMemory{800 * MiB, 800 * MiB, 0, 0, 0});
  const std::string list =
      R"({"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[)" +
      tenant_pod("mirror-uid",
                 R"(,"annotations":{"kubernetes.io/config.mirror":")" + hash +
                     R"(","kubernetes.io/config.source":"file"})",
                 R"({"priority":2000001000,"containers":[{"name":"etcd"}]})") +
      "," +
      tenant_pod("tenant-a", R"(,"annotations":{"kubernetes.io/config.source":"file"})",
                 R"({"priorityClassName":"system-node-critical","containers":[{"name":"c"}]})") +
      "," +
      tenant_pod("tenant-b", R"(,"annotations":{"kubernetes.io/config.mirror":"tenant-a"})",
                 R"({"containers":[{"name":"c"}]})") +
      "]}";
  std::shared_ptr<PodMetadataSource> md = std::make_shared<FixedSource>(list);
  auto obs = make_node_observer(node.config(), md);
  ASSERT_TRUE(obs);
  auto snap = (*obs)->observe(TimePoint(std::chrono::seconds(2)));
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->pods.size(), 3u);
  EvictionConfig ec;
  for (const auto& p : snap->pods) {
    if (p.uid == hash) {
      EXPECT_TRUE(p.metadata_known);
      EXPECT_EQ(p.name, "mirror-uid");
      EXPECT_TRUE(p.static_pod);
      EXPECT_TRUE(never_evicted(p, ec));
    } else if (p.uid == "tenant-a") {
      EXPECT_TRUE(p.metadata_known);
      EXPECT_FALSE(p.static_pod) << "its own annotation, not the kubelet's";
      EXPECT_FALSE(p.critical) << "a class name without spec.priority";
    } else {
      EXPECT_EQ(p.uid, "unlisted");
      EXPECT_FALSE(p.metadata_known);
      EXPECT_TRUE(p.metadata_unavailable);
    }
  }
  auto ranked = rank_pods(snap->pods, StarvedResource::Memory, ec);
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0]->uid, "tenant-a");
  EXPECT_EQ(exported((*obs)->counters(), "pressured_observer_pods_without_metadata"), 1);
  EXPECT_EQ(exported((*obs)->counters(), "pressured_pods_unevictable_without_metadata"), 1);
  // The mirror pod has its cgroup; tenant-b (a fake mirror, never run) has none.
  EXPECT_EQ(exported((*obs)->counters(), "pressured_observer_metadata_without_cgroup"), 1);
}

}  // namespace
}  // namespace pressured
