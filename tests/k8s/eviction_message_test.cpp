// The eviction message (Event and log line): the kubelet's sentences with
// quantities as the kubelet prints them, then pressured's own facts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "k8s/reporter.hpp"

namespace pressured::k8s {
namespace {

constexpr double kMi = 1024.0 * 1024;

Eviction memory_victim() {
  Eviction e;
  e.id = "6b012f60-1";
  e.uid = "u-cache";
  e.name = "cache";
  e.namespace_ = "shop";
  e.signal = Signal::MemoryAvailable;
  e.kind = ThresholdKind::Hard;
  e.threshold_value = 256 * kMi;
  e.observed = 255 * kMi;
  e.keys.qos = QosClass::Burstable;
  e.keys.usage = static_cast<uint64_t>(1536 * kMi);
  e.keys.request = static_cast<uint64_t>(512 * kMi);
  e.keys.over_request = true;
  e.runner_up = RunnerUp{"u-web", "web", "shop", RankKeys{}};
  e.runner_up->keys.qos = QosClass::Guaranteed;
  e.runner_up->keys.usage = e.runner_up->keys.request = static_cast<uint64_t>(kMi);
  e.wake_source = "psi";
  e.detection_latency_seconds = 0.00321;
  return e;
}

TEST(EvictionMessage, KubeletWordingThenPressuredsFacts) {
  EXPECT_EQ(eviction_message(memory_victim()),
            "The node was low on resource: memory. Threshold quantity: 256Mi, available: 255Mi. "
            "Pod cache was using 1536Mi, request is 512Mi, has larger consumption of memory. "
            "Evicted by pressured (eviction 6b012f60-1) for memory.available (hard threshold), woken by psi, "
            "decided 3.2 ms after the kernel's event; chosen before shop/web by qos: Burstable before Guaranteed.");
}

// Within its request the pod is not named, as the kubelet names only the
// containers over theirs.
TEST(EvictionMessage, WithinRequestNoKernelEventStaleAndAlone) {
  Eviction e = memory_victim();
  e.kind = ThresholdKind::Soft;
  e.signal_stale = true;
  e.keys.over_request = false;
  e.keys.usage = 100;  // not a multiple of 1024: plain bytes, as resource.Quantity prints it
  e.keys.request = 0;
  e.observed = 255 * kMi + 1;
  e.wake_source = "poll";
  e.detection_latency_seconds.reset();
  e.runner_up.reset();
  EXPECT_EQ(eviction_message(e),
            "The node was low on resource: memory. Threshold quantity: 256Mi, available: 267386881. "
            "Evicted by pressured (eviction 6b012f60-1) for memory.available (soft threshold, stale reading), woken "
            "by poll; the only pod that could be evicted.");
}

TEST(EvictionMessage, QuantitiesFollowTheResource) {
  Eviction e = memory_victim();
  e.signal = Signal::NodefsAvailable;
  e.threshold_value = 10.0 * 1024 * 1024 * 1024;  // 10% of 100Gi, resolved
  e.observed = 3.0 * 1024 * 1024 * 1024 * 1024;
  e.keys.usage = 2048;
  e.keys.request = 0;
  std::string m = eviction_message(e);
  EXPECT_EQ(m.rfind("The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 3Ti. "
                    "Pod cache was using 2Ki, request is 0, has larger consumption of ephemeral-storage. ",
                    0),
            0u)
      << m;

  e.signal = Signal::PidAvailable;
  e.threshold_value = 1638.4;  // 5% of 32768: the kubelet rounds quantities too
  e.observed = 100;
  e.keys.usage = 3000;
  m = eviction_message(e);
  // The kubelet measures no usage against a request for pids (nor inodes).
  EXPECT_EQ(m.rfind("The node was low on resource: pids. Threshold quantity: 1638, available: 100. Evicted by ", 0),
            0u)
      << m;

  e.signal = Signal::MemoryPressureSomeAvg10;
  e.threshold_value = 20;
  e.observed = 31.256;
  e.keys.usage = static_cast<uint64_t>(kMi);
  m = eviction_message(e);
  EXPECT_EQ(m.rfind("The node was low on resource: memory. Threshold: 20%, observed: 31.26%. Pod cache was using 1Mi", 0), 0u)
      << m;
  EXPECT_NE(m.find("for memory.pressure.some.avg10 (hard threshold)"), std::string::npos) << m;
}

TEST(EvictionMessage, IsBoundedForTheEventsApi) {
  Eviction e = memory_victim();
  e.runner_up->name = std::string(3000, 'x');
  std::string m = eviction_message(e);
  EXPECT_EQ(m.size(), kMaxEventMessage);
  EXPECT_EQ(m.substr(m.size() - 3), "...");
}

TEST(EvictionMessage, AnOwnStorageLimitSpeaksOfTheVolumeNotTheNode) {
  Eviction e = memory_victim();
  e.signal = Signal::NodefsAvailable;
  e.local_storage_rule = "emptydirfs.limit";
  e.local_storage_message = "Usage of EmptyDir volume \"cache\" exceeds the limit \"4Mi\". ";
  e.observed = 8 * kMi;
  e.threshold_value = 4 * kMi;
  e.runner_up.reset();
  e.wake_source = "poll";
  e.detection_latency_seconds.reset();
  EXPECT_EQ(eviction_message(e),
            "Usage of EmptyDir volume \"cache\" exceeds the limit \"4Mi\". "
            "Evicted by pressured (eviction 6b012f60-1) for emptydirfs.limit (usage 8Mi, limit 4Mi), woken by poll; "
            "over its own local storage limit, before any node threshold.");
}

TEST(EvictionAnnotations, TheKubeletsKeysWithThePodAsTheOffender) {
  Eviction e = memory_victim();
  EXPECT_EQ(eviction_annotations(e), (std::map<std::string, std::string>{{"offending_containers", ""},
                                                                          {"offending_containers_usage", ""},
                                                                          {"offending_pod", "cache"},
                                                                          {"offending_pod_usage", "1536Mi"},
                                                                          {"starved_resource", "memory"}}));
  e.keys.over_request = false;
  EXPECT_EQ(eviction_annotations(e), (std::map<std::string, std::string>{{"offending_containers", ""},
                                                                          {"offending_containers_usage", ""},
                                                                          {"starved_resource", "memory"}}));
  e.signal = Signal::NodefsInodesFree;
  EXPECT_EQ(eviction_annotations(e).at("starved_resource"), "inodes");
  e.signal = Signal::PidAvailable;
  e.keys.over_request = true;
  EXPECT_EQ(eviction_annotations(e).at("starved_resource"), "pids");
  EXPECT_EQ(eviction_annotations(e).count("offending_pod"), 0u) << "no usage against a request for pids";
  e.signal = Signal::NodefsAvailable;
  e.local_storage_rule = "emptydirfs.limit";
  EXPECT_TRUE(eviction_annotations(e).empty()) << "none for an own storage limit, as the kubelet's";
}

TEST(EvictionAnnotations, RideOnTheEventsMetadata) {
  auto ev = nlohmann::json::parse(event_body(memory_victim(), "node-1", "2026-01-01T00:00:00Z"));
  EXPECT_EQ(ev["metadata"]["annotations"]["starved_resource"], "memory");
  EXPECT_EQ(ev["metadata"]["annotations"]["offending_pod_usage"], "1536Mi");
  EXPECT_EQ(ev["metadata"]["name"], "cache.6b012f60-1");
}

TEST(PodStatusPatch, FailedEvictedTheMessageAndDisruptionTargetForTheUid) {
  const Eviction e = memory_victim();
  auto p = nlohmann::json::parse(pod_status_patch(e, "2026-01-01T00:00:00Z"));
  EXPECT_EQ(p, (nlohmann::json{{"metadata", {{"uid", "u-cache"}}},
                               {"status",
                                {{"phase", "Failed"},
                                 {"reason", "Evicted"},
                                 {"message", eviction_message(e)},
                                 {"conditions",
                                  nlohmann::json::array({{{"type", "DisruptionTarget"},
                                                          {"status", "True"},
                                                          {"reason", "TerminationByKubelet"},
                                                          {"message", eviction_message(e)},
                                                          {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}}));
}

TEST(PodStatusPatch, AnOwnStorageLimitHasNoDisruptionTarget) {
  Eviction e = memory_victim();
  e.signal = Signal::NodefsAvailable;
  e.local_storage_rule = "emptydirfs.limit";
  e.local_storage_message = "Usage of EmptyDir volume \"cache\" exceeds the limit \"4Mi\". ";
  auto p = nlohmann::json::parse(pod_status_patch(e, "2026-01-01T00:00:00Z"));
  EXPECT_EQ(p["status"]["phase"], "Failed");
  EXPECT_EQ(p["status"]["reason"], "Evicted");
  EXPECT_FALSE(p["status"].contains("conditions"));
}

}  // namespace
}  // namespace pressured::k8s
