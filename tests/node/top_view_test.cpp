// `pressured top` rendering from a fake node: signals against thresholds and
// pods in the engine's eviction order, as text and JSON.
#include <gtest/gtest.h>

#include "fakes/fake_node.hpp"
#include "node/top_view.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

constexpr uint64_t MiB = 1ULL << 20;

TEST(TopView, TextAndJsonShowSignalsAndEvictionOrder) {
  testing::FakeNode node(CgroupVersion::V2, CgroupDriver::Systemd);
  node.add_pod("u-guar", QosClass::Guaranteed, testing::FakePodMemory{500 * MiB, 500 * MiB, 0, 0, 0});
  node.add_pod("u-burst", QosClass::Burstable, testing::FakePodMemory{300 * MiB, 300 * MiB, 0, 0, 0});
  node.add_pod("u-be", QosClass::BestEffort, testing::FakePodMemory{10 * MiB, 10 * MiB, 0, 0, 0});
  // u-guar is not listed: never evicted (it might be static), shown by uid.
  testing::write_text(node.root() + "/pods.yaml", R"(kind: Pod
metadata: {name: burst, namespace: app, uid: u-burst}
spec:
  containers:
  - name: c
    resources: {requests: {memory: 100Mi}}
---
kind: Pod
metadata: {name: be, namespace: batch, uid: u-be}
spec:
  containers:
  - name: c
)");
  PodSourceConfig pc;
  pc.kind = PodSourceKind::File;
  pc.path = node.root() + "/pods.yaml";
  std::shared_ptr<PodMetadataSource> md = std::move(*make_pod_metadata_source(pc));
  ASSERT_TRUE(md->refresh());
  auto obs = make_node_observer(node.config(), md);
  ASSERT_TRUE(obs);
  auto snap = (*obs)->observe(TimePoint{});
  ASSERT_TRUE(snap);
  EvictionConfig ev;
  Threshold th;
  th.signal = Signal::MemoryAvailable;
  th.value.kind = ThresholdValue::Kind::Percent;
  th.value.percent = 90;  // 7.2 GiB of 8 GiB: met (available is 6.5 GiB)
  ev.thresholds.push_back(th);
  node::TopInput in;
  in.snapshot = &*snap;
  in.layout = &(*obs)->layout();
  in.eviction = &ev;
  in.counters = (*obs)->counters().values();
  in.metadata_source = md->describe();
  std::string text = node::render_top_text(in);
  EXPECT_NE(text.find("cgroup v2 (systemd driver)"), std::string::npos) << text;
  EXPECT_NE(text.find("memory.available"), std::string::npos);
  EXPECT_NE(text.find("hard<90% (7.2Gi) MET"), std::string::npos) << text;
  // BestEffort first, then Burstable (usage over request 3.00), Guaranteed last.
  auto be = text.find("batch/be"), burst = text.find("app/burst"), guar = text.find("<u-guar>");
  ASSERT_NE(be, std::string::npos) << text;
  ASSERT_NE(burst, std::string::npos) << text;
  ASSERT_NE(guar, std::string::npos) << text;
  EXPECT_LT(be, burst);
  EXPECT_LT(burst, guar);
  EXPECT_NE(text.find("3.00"), std::string::npos) << "usage over request";

  auto j = node::render_top_json(in);
  ASSERT_EQ(j["pods"].size(), 3u);
  EXPECT_EQ(j["pods"][0]["uid"], "u-be");
  EXPECT_EQ(j["pods"][0]["rank"], 1);
  EXPECT_EQ(j["pods"][1]["name"], "burst");
  EXPECT_DOUBLE_EQ(j["pods"][1]["usage_over_request"].get<double>(), 3.0);
  EXPECT_EQ(j["signals"][0]["signal"], "memory.available");
  EXPECT_EQ(j["signals"][0]["thresholds"][0]["met"], true);
  EXPECT_EQ(j["layout"]["version"], "v2");
  EXPECT_EQ(j["counters"]["pods_without_metadata"], 1);
  // Who would go next, and why: the engine's choice on this frame.
  EXPECT_NE(text.find("memory.available (hard): batch/be"), std::string::npos) << text;
  EXPECT_NE(text.find("runner-up app/burst qos=Burstable over-request"), std::string::npos) << text;
  EXPECT_NE(text.find("chosen by qos: BestEffort before Burstable"), std::string::npos) << text;
  ASSERT_EQ(j["next_evictions"].size(), 1u);
  const auto& next = j["next_evictions"][0];
  EXPECT_EQ(next["uid"], "u-be");
  EXPECT_EQ(next["signal"], "memory.available");
  EXPECT_EQ(next["why"]["victim"]["qos"], "BestEffort");
  EXPECT_EQ(next["why"]["victim"]["usage"], 10 * MiB);
  EXPECT_EQ(next["why"]["runner_up"]["uid"], "u-burst");
  EXPECT_EQ(next["why"]["runner_up"]["request"], 100 * MiB);
  EXPECT_EQ(next["why"]["runner_up"]["amount"], 200 * MiB);
  EXPECT_EQ(next["why"]["decided_by"], "qos");
  EXPECT_EQ(j["pods"][1]["memory_rank_keys"]["over_request"], true);
  EXPECT_EQ(j["pods"][1]["memory_rank_keys"]["request"], 100 * MiB);

  // A soft threshold shows its victim at once (a frame has no history); an
  // unmet one shows nobody.
  ev.thresholds[0].kind = ThresholdKind::Soft;
  ev.thresholds[0].grace_period = std::chrono::minutes(5);
  j = node::render_top_json(in);
  ASSERT_EQ(j["next_evictions"].size(), 1u);
  EXPECT_EQ(j["next_evictions"][0]["kind"], "soft");
  EXPECT_EQ(j["next_evictions"][0]["uid"], "u-be");
  EXPECT_TRUE(j["next_evictions_none_for"].empty());
  // Met, but with every pod critical: nobody can go, and it says so.
  NodeSnapshot all_critical = *snap;
  for (auto& p : all_critical.pods) p.critical = true;
  in.snapshot = &all_critical;
  j = node::render_top_json(in);
  EXPECT_TRUE(j["next_evictions"].empty());
  EXPECT_EQ(j["next_evictions_none_for"], nlohmann::json::array({"memory.available"}));
  EXPECT_NE(node::render_top_text(in).find(
                "NEXT EVICTION: none (met with no pod that can be evicted: memory.available)"),
            std::string::npos);
  in.snapshot = &*snap;
  ev.thresholds[0].value.percent = 10;
  j = node::render_top_json(in);
  EXPECT_TRUE(j["next_evictions"].empty());
  EXPECT_TRUE(j["next_evictions_none_for"].empty());
  EXPECT_NE(node::render_top_text(in).find("NEXT EVICTION: none (no eviction threshold is met)"), std::string::npos);

  // A pod over its own emptyDir sizeLimit goes next whatever the thresholds
  // say, shown with the rule rather than a signal.
  NodeSnapshot over_limit = *snap;
  Pod& p0 = over_limit.pods[0];
  p0.metadata_known = true;
  p0.local_storage.empty_dirs = {{"cache", 1 * MiB}};
  p0.ephemeral_storage = EphemeralStorageBreakdown{};
  p0.ephemeral_storage->empty_dir_volumes = {{"cache", 2 * MiB, 1}};
  p0.usage.ephemeral_storage_bytes = 2 * MiB;
  in.snapshot = &over_limit;
  j = node::render_top_json(in);
  ASSERT_EQ(j["next_evictions"].size(), 1u);
  EXPECT_EQ(j["next_evictions"][0]["signal"], "emptydirfs.limit");
  EXPECT_EQ(j["next_evictions"][0]["uid"], p0.uid);
  EXPECT_NE(node::render_top_text(in).find("emptydirfs.limit (hard): "), std::string::npos);
  in.snapshot = &*snap;

  EXPECT_EQ(human_bytes(1536.0 * MiB), "1.5Gi");
  EXPECT_EQ(human_bytes(512), "512");
}

}  // namespace
}  // namespace pressured

namespace pressured {
namespace {

// Each pod's containers under it, read once per frame: what each grew by
// since the frame before, its own memory stall (v2); the next eviction says
// which container grew and who was hurt.
TEST(TopView, ContainersUnderEachPodAndTheNextEvictionsGrowthAndStall) {
  testing::FakeNode node(CgroupVersion::V2, CgroupDriver::Systemd);
  const std::string pod =
      node.add_pod("u-be", QosClass::BestEffort, testing::FakePodMemory{300 * MiB, 300 * MiB, 0, 0, 0}, "abc123");
  testing::write_text(node.root() + "/pods.yaml", R"(kind: Pod
metadata: {name: be, namespace: batch, uid: u-be}
spec:
  containers:
  - name: worker
status:
  containerStatuses:
  - name: worker
    containerID: containerd://abc123
)");
  PodSourceConfig pc;
  pc.kind = PodSourceKind::File;
  pc.path = node.root() + "/pods.yaml";
  std::shared_ptr<PodMetadataSource> md = std::move(*make_pod_metadata_source(pc));
  ASSERT_TRUE(md->refresh());
  auto obs = make_node_observer(node.config(), md);
  ASSERT_TRUE(obs);
  EvictionConfig ev;
  Threshold th;
  th.signal = Signal::MemoryAvailable;
  th.value.kind = ThresholdValue::Kind::Percent;
  th.value.percent = 95;
  ev.thresholds.push_back(th);
  int reads = 0;
  auto frame = [&](bool json) {
    auto snap = (*obs)->observe(TimePoint{});
    EXPECT_TRUE(snap);
    node::TopInput in;
    in.snapshot = &*snap;
    in.layout = &(*obs)->layout();
    in.eviction = &ev;
    in.metadata_source = md->describe();
    in.container_memory = [&](const Pod& p) {
      ++reads;
      return (*obs)->container_memory(p);
    };
    return json ? node::render_top_json(in).dump() : node::render_top_text(in);
  };
  std::string first = frame(false);
  EXPECT_EQ(reads, 1) << "one read per pod and frame, for the list and the next eviction";
  EXPECT_NE(first.find("  worker"), std::string::npos) << first;
  EXPECT_NE(first.find("grew: container worker is 300Mi over its request"), std::string::npos)
      << "BestEffort: no request; no frame before to tell growth\n" << first;
  EXPECT_NE(first.find("hurt: memory stall (some avg10): pod 4.00%, worker 4.00%"), std::string::npos) << first;

  node.write_memcg(pod + "/cri-containerd-abc123.scope", testing::FakePodMemory{340 * MiB, 340 * MiB, 0, 0, 0});
  std::string second = frame(false);
  EXPECT_NE(second.find("+40.0Mi/"), std::string::npos) << "grown since the frame before\n" << second;
  EXPECT_NE(second.find("grew: container worker grew by 40.0Mi in"), std::string::npos) << second;

  auto j = nlohmann::json::parse(frame(true));
  const auto& c = j["pods"][0]["containers"][0];
  EXPECT_EQ(c["name"], "worker");
  EXPECT_EQ(c["working_set_bytes"], 340 * MiB);
  EXPECT_EQ(c["growth_bytes"], 0) << "a third frame: no growth since the second";
  EXPECT_DOUBLE_EQ(c["memory_pressure_some_avg10"].get<double>(), 4.0);
  EXPECT_EQ(j["next_evictions"][0]["why"]["grew"]["container"], "worker");
  EXPECT_DOUBLE_EQ(j["next_evictions"][0]["why"]["memory_stall"]["pod"].get<double>(), 4.0);
}

}  // namespace
}  // namespace pressured
