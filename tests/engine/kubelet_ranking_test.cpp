// `ranking: kubelet`: the current kubelet's eviction orders, each test named
// after the kubelet test (pkg/kubelet/eviction/helpers_test.go) it ports.
// Pods are given in reverse of the expected order, as the kubelet's tests do.
#include <gtest/gtest.h>

#include "engine/engine_helpers.hpp"
#include "engine/eviction_words.hpp"
#include "pressured/engine.hpp"

namespace pressured {
namespace {

using namespace pressured::testing;

constexpr int32_t kLow = -1, kDefault = 0, kHigh = 1;  // lowPriority, defaultPriority, highPriority

EvictionConfig kubelet_config() {
  EvictionConfig c;
  c.ranking = Ranking::Kubelet;
  return c;
}

std::vector<std::string> order(const std::vector<Pod>& pods, StarvedResource r, const EvictionConfig& c) {
  std::vector<std::string> out;
  for (const Pod* p : rank_pods(pods, r, c, {})) out.push_back(p->uid);
  return out;
}

// TestOrderedByMemory (all at default priority): the greediest relative to
// its request first, QoS class playing no part.
TEST(KubeletRanking, OrderedByMemory) {
  std::vector<Pod> pods = {
      pod("guaranteed-low", QosClass::Guaranteed, 200 * kMi, kGi, kDefault),    // -800
      pod("guaranteed-high", QosClass::Guaranteed, 800 * kMi, kGi, kDefault),   // -200
      pod("burstable-low", QosClass::Burstable, 300 * kMi, 100 * kMi, kDefault),  // 200
      pod("burstable-high", QosClass::Burstable, 800 * kMi, 100 * kMi, kDefault),  // 700
      pod("best-effort-low", QosClass::BestEffort, 300 * kMi, 0, kDefault),     // 300
      pod("best-effort-high", QosClass::BestEffort, 500 * kMi, 0, kDefault),    // 500
  };
  EXPECT_EQ(order(pods, StarvedResource::Memory, kubelet_config()),
            (std::vector<std::string>{"burstable-high", "best-effort-high", "best-effort-low", "burstable-low",
                                      "guaranteed-high", "guaranteed-low"}));
  // The default order puts QoS first: every BestEffort pod before a Burstable one.
  EXPECT_EQ(order(pods, StarvedResource::Memory, EvictionConfig{}).front(), "best-effort-high");
}

// TestOrderedByPriorityMemory: over request first, then priority, then
// usage - request.
TEST(KubeletRanking, OrderedByPriorityMemory) {
  std::vector<Pod> pods = {
      pod("below-requests-high-priority-low-usage", QosClass::Burstable, 200 * kMi, kGi, kHigh),
      pod("below-requests-high-priority-high-usage", QosClass::Burstable, 800 * kMi, kGi, kHigh),
      pod("below-requests-low-priority-low-usage", QosClass::Burstable, 200 * kMi, kGi, kLow),
      pod("below-requests-low-priority-high-usage", QosClass::Burstable, 800 * kMi, kGi, kLow),
      pod("above-requests-high-priority-low-usage", QosClass::Burstable, 150 * kMi, 100 * kMi, kHigh),
      pod("above-requests-high-priority-high-usage", QosClass::Burstable, 600 * kMi, 100 * kMi, kHigh),
      pod("above-requests-low-priority-low-usage", QosClass::BestEffort, 50 * kMi, 0, kLow),
      pod("above-requests-low-priority-high-usage", QosClass::BestEffort, 500 * kMi, 0, kLow),
  };
  EXPECT_EQ(order(pods, StarvedResource::Memory, kubelet_config()),
            (std::vector<std::string>{
                "above-requests-low-priority-high-usage", "above-requests-low-priority-low-usage",
                "above-requests-high-priority-high-usage", "above-requests-high-priority-low-usage",
                "below-requests-low-priority-high-usage", "below-requests-low-priority-low-usage",
                "below-requests-high-priority-high-usage", "below-requests-high-priority-low-usage"}));
}

// TestOrderedByPriorityProcess: priority, then the process count; no request key.
TEST(KubeletRanking, OrderedByPriorityProcess) {
  auto p = [](const char* uid, uint64_t pids, int32_t prio) {
    Pod x = pod(uid, QosClass::BestEffort, 0, 0, prio);
    x.usage.pids = pids;
    return x;
  };
  std::vector<Pod> pods = {p("high-priority-low-usage", 5, kHigh), p("high-priority-high-usage", 20, kHigh),
                           p("low-priority-low-usage", 6, kLow), p("low-priority-high-usage", 20, kLow)};
  EXPECT_EQ(order(pods, StarvedResource::Pids, kubelet_config()),
            (std::vector<std::string>{"low-priority-high-usage", "low-priority-low-usage", "high-priority-high-usage",
                                      "high-priority-low-usage"}));
}

// TestOrderedByPriorityDisk: over the ephemeral-storage request first, then
// priority, then usage - request.
TEST(KubeletRanking, OrderedByPriorityDisk) {
  auto p = [](const char* uid, uint64_t usage, uint64_t request, int32_t prio) {
    Pod x = pod(uid, QosClass::BestEffort, 0, 0, prio);
    x.usage.ephemeral_storage_bytes = usage;
    x.requests.ephemeral_storage_bytes = request;
    return x;
  };
  std::vector<Pod> pods = {
      p("below-requests-high-priority-low-usage", 200 * kMi, kGi, kHigh),
      p("below-requests-high-priority-high-usage", 800 * kMi, kGi, kHigh),
      p("below-requests-low-priority-low-usage", 200 * kMi, kGi, kLow),
      p("below-requests-low-priority-high-usage", 800 * kMi, kGi, kLow),
      p("above-requests-high-priority-low-usage", 150 * kMi, 100 * kMi, kHigh),
      p("above-requests-high-priority-high-usage", 600 * kMi, 100 * kMi, kHigh),
      p("above-requests-low-priority-low-usage", 50 * kMi, 0, kLow),
      p("above-requests-low-priority-high-usage", 500 * kMi, 0, kLow),
  };
  EXPECT_EQ(order(pods, StarvedResource::EphemeralStorage, kubelet_config()),
            (std::vector<std::string>{
                "above-requests-low-priority-high-usage", "above-requests-low-priority-low-usage",
                "above-requests-high-priority-high-usage", "above-requests-high-priority-low-usage",
                "below-requests-low-priority-high-usage", "below-requests-low-priority-low-usage",
                "below-requests-high-priority-high-usage", "below-requests-high-priority-low-usage"}));
}

// rankDiskPressureFunc(..., resourceInodes): no pod has an inode request, so
// any pod using inodes is "over" it, and the last key subtracts the pod's
// ephemeral-storage request (bytes) from its inode count, as the kubelet does.
TEST(KubeletRanking, InodesSubtractTheEphemeralStorageRequest) {
  auto p = [](const char* uid, uint64_t inodes, uint64_t eph_request) {
    Pod x = pod(uid, QosClass::BestEffort, 0, 0, kDefault);
    x.usage.inodes = inodes;
    x.requests.ephemeral_storage_bytes = eph_request;
    return x;
  };
  std::vector<Pod> pods = {p("many-inodes-big-request", 1000, 5000), p("few-inodes", 100, 0), p("none", 0, 0)};
  EXPECT_EQ(order(pods, StarvedResource::Inodes, kubelet_config()),
            (std::vector<std::string>{"few-inodes", "many-inodes-big-request", "none"}));
}

// What the "why" record says follows the mode: the kubelet's keys only.
// helpers.go exceedMemoryRequests, memory, exceedDiskRequests, disk and
// process: "prioritize evicting the pod for which no stats were found". For
// memory and disk that comes before every other key (the first comparison
// returns on it), for pids after priority (rankPIDPressure orders by
// priority, then process). Two pods without stats are equal but for
// priority. The default order keeps QoS first and takes a pod without stats
// as using none: the last resort.
TEST(KubeletRanking, PodWithoutStatsIsEvictedFirst) {
  auto no_stats = [](const char* uid, QosClass q, uint64_t request, int32_t prio) {
    Pod x = pod(uid, q, 0, request, prio);
    x.no_usage_stats = true;
    x.no_storage_stats = true;
    return x;
  };
  std::vector<Pod> pods = {
      pod("below-requests", QosClass::Burstable, 200 * kMi, kGi, kLow),
      pod("above-requests", QosClass::BestEffort, 900 * kMi, 0, kLow),
      no_stats("no-stats-high-priority", QosClass::Guaranteed, kGi, kHigh),
      no_stats("no-stats-low-priority", QosClass::Guaranteed, kGi, kLow),
  };
  EXPECT_EQ(order(pods, StarvedResource::Memory, kubelet_config()),
            (std::vector<std::string>{"no-stats-low-priority", "no-stats-high-priority", "above-requests",
                                      "below-requests"}));
  // Disk: the same, on the storage stats.
  for (auto& p : pods) {
    p.usage.ephemeral_storage_bytes = p.usage.memory_working_set_bytes;
    p.requests.ephemeral_storage_bytes = p.requests.memory_bytes;
  }
  EXPECT_EQ(order(pods, StarvedResource::EphemeralStorage, kubelet_config()),
            (std::vector<std::string>{"no-stats-low-priority", "no-stats-high-priority", "above-requests",
                                      "below-requests"}));
  pods[2].no_storage_stats = pods[3].no_storage_stats = false;  // measured, zero
  EXPECT_EQ(order(pods, StarvedResource::EphemeralStorage, kubelet_config()).front(), "above-requests");
  // PIDs: priority first, then no stats, then the process count.
  std::vector<Pod> procs = {
      pod("low-priority-many", QosClass::BestEffort, 0, 0, kLow),
      pod("default-priority-many", QosClass::BestEffort, 0, 0, kDefault),
      no_stats("default-priority-no-stats", QosClass::BestEffort, 0, kDefault),
      no_stats("high-priority-no-stats", QosClass::BestEffort, 0, kHigh),
  };
  procs[0].usage.pids = procs[1].usage.pids = 900;
  EXPECT_EQ(order(procs, StarvedResource::Pids, kubelet_config()),
            (std::vector<std::string>{"low-priority-many", "default-priority-no-stats", "default-priority-many",
                                      "high-priority-no-stats"}));
  // The default order: QoS first, a pod without stats uses none (last resort).
  const auto qos_first = order(pods, StarvedResource::Memory, EvictionConfig{});
  EXPECT_EQ(std::vector<std::string>(qos_first.end() - 2, qos_first.end()),
            (std::vector<std::string>{"no-stats-low-priority", "no-stats-high-priority"}));
  // The deciding key and its words.
  EvictionConfig c = kubelet_config();
  const RankKeys a = rank_keys(pods[3], StarvedResource::Memory, c);
  const RankKeys b = rank_keys(pods[1], StarvedResource::Memory, c);
  EXPECT_EQ(deciding_key(a, b), RankKey::NoStats);
  EXPECT_NE(describe_keys(a, StarvedResource::Memory).find("no-stats"), std::string::npos);
}

TEST(KubeletRanking, WhyNamesTheKubeletsKeys) {
  Pod a = pod("a", QosClass::Guaranteed, 800 * kMi, 100 * kMi, kDefault);
  Pod b = pod("b", QosClass::BestEffort, 300 * kMi, 0, kDefault);
  const EvictionConfig c = kubelet_config();
  const RankKeys ka = rank_keys(a, StarvedResource::Memory, c), kb = rank_keys(b, StarvedResource::Memory, c);
  EXPECT_TRUE(evicted_before(a, 800 * kMi, b, 300 * kMi, StarvedResource::Memory, c));
  EXPECT_EQ(deciding_key(ka, kb), RankKey::Amount);
  EXPECT_EQ(ka.kubelet_amount(), static_cast<int64_t>(700 * kMi));
  const std::string d = describe_keys(ka, StarvedResource::Memory);
  EXPECT_EQ(d.find("qos="), std::string::npos) << d;
  EXPECT_NE(d.find("usage-request=700Mi"), std::string::npos) << d;
  Pod within = pod("w", QosClass::Burstable, 100 * kMi, kGi, kDefault);
  EXPECT_NE(describe_keys(rank_keys(within, StarvedResource::Memory, c), StarvedResource::Memory)
                .find("usage-request=-924Mi"),
            std::string::npos);
}

}  // namespace
}  // namespace pressured
