// The kubelet's local ephemeral-storage limits as a pure function of pods:
// each rule, its order, and the cases where nothing can be decided. The same
// rules on a fake node (walker + metadata + observer) are in
// tests/node/writable_layers_test.cpp, LocalStorageLimits.
#include <gtest/gtest.h>

#include "engine/local_storage.hpp"

namespace pressured {
namespace {

constexpr uint64_t Ki = 1024, Mi = 1024 * Ki, Gi = 1024 * Mi;

Pod walked_pod(std::string uid) {
  Pod p;
  p.uid = std::move(uid);
  p.name = "web";
  p.namespace_ = "shop";
  p.metadata_known = true;
  p.ephemeral_storage = EphemeralStorageBreakdown{};
  return p;
}

void add_volume(Pod& p, const std::string& name, std::optional<uint64_t> limit, uint64_t used) {
  p.local_storage.empty_dirs.push_back({name, limit});
  p.ephemeral_storage->empty_dir_volumes.push_back({name, used, 1});
  p.ephemeral_storage->empty_dir_bytes += used;
  p.usage.ephemeral_storage_bytes += used;
}

void add_container(Pod& p, const std::string& name, const std::string& id, std::optional<uint64_t> limit,
                   uint64_t logs, uint64_t layer) {
  p.local_storage.containers.push_back({name, id, limit});
  p.ephemeral_storage->container_logs.push_back({name, logs, 1});
  p.ephemeral_storage->container_layers.push_back({id, layer, 1});
  p.usage.ephemeral_storage_bytes += logs + layer;
  if (limit) p.local_storage.pod_limit_bytes = p.local_storage.pod_limit_bytes.value_or(0) + *limit;
}

TEST(LocalStorage, EmptyDirOverItsSizeLimit) {
  Pod p = walked_pod("u1");
  add_volume(p, "scratch", std::nullopt, 5 * Gi);  // no limit: never
  add_volume(p, "zero", 0, 5 * Gi);                // sizeLimit 0 is no limit (the kubelet's Sign() == 1)
  add_volume(p, "cache", 1 * Gi, 1 * Gi);          // at the limit: not over
  EXPECT_FALSE(local_storage_violation(p, {}));
  p.ephemeral_storage->empty_dir_volumes.back().bytes = 1 * Gi + 1;
  auto v = local_storage_violation(p, {});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->uid, "u1");
  EXPECT_EQ(v->rule, LocalStorageRule::EmptyDir);
  EXPECT_EQ(v->subject, "cache");
  EXPECT_EQ(v->usage_bytes, 1 * Gi + 1);
  EXPECT_EQ(v->limit_bytes, 1 * Gi);
  EXPECT_EQ(v->message, "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Gi\". ");
  EXPECT_EQ(name(v->rule), "emptydirfs.limit");
}

TEST(LocalStorage, AVolumeNotWalkedIsNotJudged) {
  Pod p = walked_pod("u1");
  p.local_storage.empty_dirs.push_back({"cache", 1 * Mi});  // in the spec, no usage measured for it
  p.usage.ephemeral_storage_bytes = 10 * Gi;
  EXPECT_FALSE(local_storage_violation(p, {}));
}

TEST(LocalStorage, ContainerOverItsLimitCountsLogsAndWritableLayer) {
  Pod p = walked_pod("u2");
  add_container(p, "app", "c1", 1 * Gi, 600 * Mi, 500 * Mi);
  add_container(p, "side", "c2", 10 * Gi, 0, 0);
  auto v = local_storage_violation(p, {});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, LocalStorageRule::Container);
  EXPECT_EQ(v->subject, "app");
  EXPECT_EQ(v->usage_bytes, 1100 * Mi);
  EXPECT_EQ(v->message, "Container app exceeded its local ephemeral storage limit \"1Gi\". ");
  EXPECT_EQ(name(v->rule), "ephemeralcontainerfs.limit");
  // Layers on a dedicated image filesystem: the kubelet counts logs only.
  LocalStorageOptions dedicated;
  dedicated.dedicated_imagefs = true;
  EXPECT_FALSE(local_storage_violation(p, dedicated));
  p.ephemeral_storage->container_logs[0].bytes = 2 * Gi;
  p.usage.ephemeral_storage_bytes += 2 * Gi;
  p.local_storage.pod_limit_bytes = 100 * Gi;  // keep the pod rule out of it
  ASSERT_TRUE(local_storage_violation(p, dedicated));
  EXPECT_EQ(local_storage_violation(p, dedicated)->usage_bytes, 2 * Gi);
}

TEST(LocalStorage, AContainerWithoutARuntimeIdCountsItsLogsOnly) {
  Pod p = walked_pod("u2");
  add_container(p, "app", "", 1 * Gi, 10 * Mi, 0);
  p.ephemeral_storage->container_layers.push_back({"other", 5 * Gi, 1});  // another container's layer
  p.local_storage.pod_limit_bytes = 100 * Gi;
  EXPECT_FALSE(local_storage_violation(p, {}));
}

TEST(LocalStorage, PodOverTheSumOfItsContainersLimits) {
  Pod p = walked_pod("u3");
  add_container(p, "a", "c1", 1 * Gi, 900 * Mi, 0);
  add_container(p, "b", "c2", 1 * Gi, 900 * Mi, 0);
  add_volume(p, "data", std::nullopt, 300 * Mi);  // 2100Mi in all, over 2Gi; no container over its own
  auto v = local_storage_violation(p, {});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, LocalStorageRule::Pod);
  EXPECT_EQ(v->subject, "");
  EXPECT_EQ(v->usage_bytes, 2100 * Mi);
  EXPECT_EQ(v->limit_bytes, 2 * Gi);
  EXPECT_EQ(v->message, "Pod ephemeral local storage usage exceeds the total limit of containers 2Gi. ");
  EXPECT_EQ(name(v->rule), "ephemeralpodfs.limit");
}

TEST(LocalStorage, RulesAreCheckedInTheKubeletsOrder) {
  // Over all three: the emptyDir names the reason, then the pod, then the container.
  Pod p = walked_pod("u4");
  add_container(p, "a", "c1", 1 * Gi, 2 * Gi, 0);
  add_volume(p, "cache", 1 * Mi, 2 * Mi);
  EXPECT_EQ(local_storage_violation(p, {})->rule, LocalStorageRule::EmptyDir);
  p.local_storage.empty_dirs[0].size_limit_bytes = 1 * Gi;
  EXPECT_EQ(local_storage_violation(p, {})->rule, LocalStorageRule::Pod);
  p.local_storage.pod_limit_bytes.reset();
  EXPECT_EQ(local_storage_violation(p, {})->rule, LocalStorageRule::Container);
}

TEST(LocalStorage, NothingIsDecidedWithoutSpecUsageOrForCriticalPods) {
  Pod p = walked_pod("u5");
  add_volume(p, "cache", 1 * Mi, 2 * Mi);
  ASSERT_TRUE(local_storage_violation(p, {}));
  Pod no_walk = p;
  no_walk.ephemeral_storage.reset();
  EXPECT_FALSE(local_storage_violation(no_walk, {}));
  Pod unknown = p;
  unknown.metadata_known = false;
  EXPECT_FALSE(local_storage_violation(unknown, {}));
  Pod unavailable = p;
  unavailable.metadata_unavailable = true;
  EXPECT_FALSE(local_storage_violation(unavailable, {}));
  Pod critical = p;
  critical.critical = true;
  EXPECT_FALSE(local_storage_violation(critical, {}));
  Pod static_pod = p;
  static_pod.static_pod = true;
  EXPECT_FALSE(local_storage_violation(static_pod, {}));

  NodeSnapshot snap;
  snap.pods = {no_walk, p, critical, walked_pod("u6")};
  auto all = local_storage_violations(snap, {});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].uid, "u5");
}

}  // namespace
}  // namespace pressured
