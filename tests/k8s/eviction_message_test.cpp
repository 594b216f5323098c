// The eviction message (Event and log line): the kubelet's message exactly
// as its evictionMessage writes it (pkg/kubelet/eviction/helpers.go,
// 1.33-1.36), quantities as it prints them, then pressured's own facts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/eviction_words.hpp"
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
  e.containers = {{"cache", static_cast<uint64_t>(1536 * kMi), static_cast<uint64_t>(512 * kMi)},
                  {"sidecar", static_cast<uint64_t>(10 * kMi), static_cast<uint64_t>(64 * kMi)}};
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
            "Container cache was using 1536Mi, request is 512Mi, has larger consumption of memory. "
            "Evicted by pressured (eviction 6b012f60-1) for memory.available (hard threshold), woken by psi, "
            "decided 3.2 ms after the kernel's event; chosen before shop/web by qos: Burstable before Guaranteed.");
}

// The message of a real kubelet's eviction (kubectl describe, a memory hog
// container "mem-eater" with a 100Mi request): pressured's kubelet part is
// the same text, and the whole message starts with it.
TEST(EvictionMessage, KubeletMessageIsTheKubeletsExactText) {
  Eviction e = memory_victim();
  e.threshold_value = 100 * kMi;
  e.observed = 58472 * 1024.0;
  e.containers = {{"mem-eater", 3694056ull * 1024, static_cast<uint64_t>(100 * kMi)}};
  const std::string kubelet =
      "The node was low on resource: memory. Threshold quantity: 100Mi, available: 58472Ki. Container mem-eater was "
      "using 3694056Ki, request is 100Mi, has larger consumption of memory. ";
  EXPECT_EQ(kubelet_eviction_message(e), kubelet);
  EXPECT_EQ(eviction_message(e).rfind(kubelet, 0), 0u) << "pressured's facts come after the kubelet's text";
  EXPECT_EQ(eviction_annotations(e).at("offending_containers"), "mem-eater");
  EXPECT_EQ(eviction_annotations(e).at("offending_containers_usage"), "3694056Ki");
}

// The kubelet names only the containers over their own request, in the
// spec's order, and no container when none was measured.
TEST(EvictionMessage, OnlyContainersOverTheirOwnRequestAreNamed) {
  Eviction e = memory_victim();
  e.containers = {{"a", 300, 100}, {"b", 100, 100}, {"c", 5, 0}};
  EXPECT_EQ(kubelet_eviction_message(e),
            "The node was low on resource: memory. Threshold quantity: 256Mi, available: 255Mi. "
            "Container a was using 300, request is 100, has larger consumption of memory. "
            "Container c was using 5, request is 0, has larger consumption of memory. ");
  EXPECT_EQ(eviction_annotations(e).at("offending_containers"), "a,c");
  EXPECT_EQ(eviction_annotations(e).at("offending_containers_usage"), "300,5");
  e.containers.clear();
  EXPECT_EQ(kubelet_eviction_message(e),
            "The node was low on resource: memory. Threshold quantity: 256Mi, available: 255Mi. ");
  EXPECT_EQ(eviction_annotations(e).at("offending_containers"), "");
}

// The "Pod X was using" sentence and offending_pod annotations: only for a
// memory eviction of a pod with a pod-level memory request (evictionMessage,
// PodLevelResources), before the container sentences, whatever its usage.
TEST(EvictionMessage, PodSentenceOnlyForMemoryEvictionsOfPodsWithPodLevelRequests) {
  Eviction e = memory_victim();
  EXPECT_EQ(kubelet_eviction_message(e).find("Pod cache"), std::string::npos) << "no pod-level request: no pod sentence";
  EXPECT_EQ(eviction_annotations(e).count("offending_pod"), 0u);
  e.pod_level_request = static_cast<uint64_t>(2048 * kMi);
  EXPECT_EQ(kubelet_eviction_message(e),
            "The node was low on resource: memory. Threshold quantity: 256Mi, available: 255Mi. "
            "Pod cache was using 1536Mi, request is 2Gi, has larger consumption of memory. "
            "Container cache was using 1536Mi, request is 512Mi, has larger consumption of memory. ");
  EXPECT_EQ(eviction_annotations(e).at("offending_pod"), "cache");
  EXPECT_EQ(eviction_annotations(e).at("offending_pod_usage"), "1536Mi");
  e.signal = Signal::NodefsAvailable;  // memory only
  EXPECT_EQ(kubelet_eviction_message(e).find("Pod cache"), std::string::npos);
  EXPECT_EQ(eviction_annotations(e).count("offending_pod"), 0u);
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
  e.containers.clear();
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
  e.containers = {{"cache", 2048, 0}};
  std::string m = eviction_message(e);
  EXPECT_EQ(m.rfind("The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 3Ti. "
                    "Container cache was using 2Ki, request is 0, has larger consumption of ephemeral-storage. ",
                    0),
            0u)
      << m;

  e.signal = Signal::PidAvailable;
  e.threshold_value = 1638.4;  // 5% of 32768: the kubelet rounds quantities too
  e.observed = 100;
  e.keys.usage = 3000;
  e.containers = {{"cache", 3000, 0}};
  m = eviction_message(e);
  // The kubelet measures no usage against a request for pids (nor inodes).
  EXPECT_EQ(m.rfind("The node was low on resource: pids. Threshold quantity: 1638, available: 100. Evicted by ", 0),
            0u)
      << m;

  e.signal = Signal::MemoryPressureSomeAvg10;
  e.threshold_value = 20;
  e.observed = 31.256;
  e.keys.usage = static_cast<uint64_t>(kMi);
  e.containers = {{"cache", static_cast<uint64_t>(kMi), 0}};
  m = eviction_message(e);
  EXPECT_EQ(m.rfind("The node was low on resource: memory. Threshold: 20%, observed: 31.26%. Container cache was using 1Mi", 0), 0u)
      << m;
  EXPECT_NE(m.find("for memory.pressure.some.avg10 (hard threshold)"), std::string::npos) << m;
}

TEST(EvictionMessage, IsBoundedForTheEventsApi) {
  Eviction e = memory_victim();
  e.runner_up->name = std::string(3000, 'x');
  std::string m = eviction_message(e);
  EXPECT_EQ(m.size(), kMaxEventMessage);
  EXPECT_EQ(m.substr(m.size() - 3), "...");
  EXPECT_EQ(m.rfind(kubelet_eviction_message(e), 0), 0u) << "the cut takes pressured's part, not the kubelet's";
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

TEST(EvictionAnnotations, TheKubeletsKeysWithTheContainersOverTheirRequest) {
  Eviction e = memory_victim();
  EXPECT_EQ(eviction_annotations(e), (std::map<std::string, std::string>{{"offending_containers", "cache"},
                                                                          {"offending_containers_usage", "1536Mi"},
                                                                          {"starved_resource", "memory"}}));
  e.containers.clear();
  EXPECT_EQ(eviction_annotations(e), (std::map<std::string, std::string>{{"offending_containers", ""},
                                                                          {"offending_containers_usage", ""},
                                                                          {"starved_resource", "memory"}}));
  e.signal = Signal::NodefsInodesFree;
  EXPECT_EQ(eviction_annotations(e).at("starved_resource"), "inodes");
  e.signal = Signal::PidAvailable;
  e.keys.over_request = true;
  EXPECT_EQ(eviction_annotations(e).at("starved_resource"), "pids");
  e.containers = {{"cache", 3000, 0}};
  EXPECT_EQ(eviction_annotations(e).at("offending_containers"), "") << "no usage against a request for pids";
  e.signal = Signal::NodefsAvailable;
  e.local_storage_rule = "emptydirfs.limit";
  EXPECT_TRUE(eviction_annotations(e).empty()) << "none for an own storage limit, as the kubelet's";
}

// Which container grew rides beside the kubelet's keys, under pressured's
// prefix, so the API keeps it after the pod is gone (kubectl get events -o
// yaml) without changing what the kubelet's keys say.
TEST(EvictionAnnotations, TheContainerThatGrewUnderPressuredsPrefix) {
  Eviction e = memory_victim();
  e.grew = ContainerGrowth{"cache", ContainerGrowth::Basis::Growth, static_cast<uint64_t>(1536 * kMi),
                           static_cast<uint64_t>(512 * kMi), static_cast<int64_t>(300 * kMi), 2.0};
  const auto a = eviction_annotations(e);
  EXPECT_EQ(a.at("pressured.io/grown-container"), "cache");
  EXPECT_EQ(a.at("pressured.io/grown-container-detail"), "container cache grew by 300Mi in 2.0s to 1.5Gi (request 512Mi)");
  EXPECT_EQ(a.at("offending_containers"), "cache") << "the kubelet's keys unchanged";
  e.grew.reset();
  EXPECT_EQ(eviction_annotations(e).count("pressured.io/grown-container"), 0u);
  auto ev = nlohmann::json::parse(event_body(memory_victim(), "node-1", "2026-01-01T00:00:00Z"));
  EXPECT_FALSE(ev["metadata"]["annotations"].contains("pressured.io/grown-container"));
}

TEST(EvictionAnnotations, RideOnTheEventsMetadata) {
  auto ev = nlohmann::json::parse(event_body(memory_victim(), "node-1", "2026-01-01T00:00:00Z"));
  EXPECT_EQ(ev["metadata"]["annotations"]["starved_resource"], "memory");
  EXPECT_EQ(ev["metadata"]["annotations"]["offending_containers_usage"], "1536Mi");
  EXPECT_EQ(ev["metadata"]["name"], "cache.6b012f60-1");
}

// eviction_manager.go: m.recorder.Eventf(m.nodeRef, v1.EventTypeWarning,
// "EvictionThresholdMet", "Attempting to reclaim %s", resourceToReclaim).
TEST(NodeEvent, EvictionThresholdMetAttemptingToReclaimTheResource) {
  Eviction e = memory_victim();
  auto body = threshold_met_event_body(e, "node-1", "2026-01-01T00:00:00Z");
  ASSERT_TRUE(body);
  auto ev = nlohmann::json::parse(*body);
  EXPECT_EQ(ev["reason"], "EvictionThresholdMet");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["message"], "Attempting to reclaim memory");
  EXPECT_EQ(ev["involvedObject"], (nlohmann::json{{"kind", "Node"}, {"name", "node-1"}, {"uid", "node-1"}}));
  EXPECT_EQ(ev["metadata"]["name"], "node-1.6b012f60-1");
  EXPECT_EQ(ev["metadata"]["namespace"], "default");
  e.signal = Signal::ImagefsInodesFree;
  EXPECT_EQ(nlohmann::json::parse(*threshold_met_event_body(e, "node-1", "t"))["message"], "Attempting to reclaim inodes");
  e.local_storage_rule = "emptydirfs.limit";
  EXPECT_FALSE(threshold_met_event_body(e, "node-1", "t")) << "an own limit is not a node threshold";
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
