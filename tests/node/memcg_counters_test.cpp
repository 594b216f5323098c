// The page counters the memory watches are planned from, read by the
// observer on fake trees: kubepods, the node scope (the hierarchy root, or the
// sandbox kubepods sits in, never above it), the root's children summed, and
// the QoS tiers whose reclaim activity is tracked.
#include <gtest/gtest.h>
#include <unistd.h>

#include "fakes/fake_node.hpp"
#include "kernel/cgroup_id.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

using testing::FakeNode;
using testing::FakePodMemory;
using testing::TempDir;
using testing::write_text;

constexpr uint64_t MiB = 1ULL << 20;

std::unique_ptr<NodeObserver> make(const ObserveConfig& c) {
  auto o = make_node_observer(c);
  EXPECT_TRUE(o) << (o ? "" : o.error().message);
  return o ? std::move(*o) : nullptr;
}

FakePodMemory usage(uint64_t bytes) { return FakePodMemory{bytes, bytes / 2, bytes / 2, bytes / 4, 0}; }

TEST(MemcgCounters, AtTheV1RootTheCounterIsTheChildrensSum) {
  FakeNode node(CgroupVersion::Hybrid, CgroupDriver::Cgroupfs);
  node.write_memcg(node.kubepods(), usage(300 * MiB));
  node.write_memcg(node.memory_mount() + "/system.slice", usage(200 * MiB));
  testing::mkdirs(node.memory_mount() + "/no-usage-file");  // not a memcg child: skipped
  ::symlink((node.memory_mount() + "/system.slice").c_str(), (node.memory_mount() + "/alias").c_str());
  node.set_root_memory(usage(1500 * MiB));
  auto obs = make(node.config());
  ASSERT_TRUE(obs);

  MemcgCounters c = obs->read_memcg_counters();
  EXPECT_EQ(c.kubepods_path, node.kubepods());
  EXPECT_EQ(c.kubepods_usage, 300 * MiB);
  EXPECT_EQ(c.scope_path, node.memory_mount());
  EXPECT_TRUE(c.scope_is_root);
  EXPECT_EQ(c.scope_file_usage, 1500 * MiB) << "v1: the root's statistics-based usage file";
  EXPECT_EQ(c.children_usage, 500 * MiB) << "kubepods + system.slice, the symlink not twice";

  // Fresh on every call: a child grows, another goes away, a new one comes.
  node.write_memcg(node.kubepods(), usage(350 * MiB));
  TempDir::remove_tree(node.memory_mount() + "/system.slice");
  node.write_memcg(node.memory_mount() + "/user.slice", usage(40 * MiB));
  c = obs->read_memcg_counters();
  EXPECT_EQ(c.kubepods_usage, 350 * MiB);
  EXPECT_EQ(c.children_usage, 390 * MiB);
}

TEST(MemcgCounters, TheV2RootHasNoUsageFile) {
  FakeNode node(CgroupVersion::V2, CgroupDriver::Systemd);
  node.write_memcg(node.kubepods(), usage(300 * MiB));
  node.write_memcg(node.memory_mount() + "/system.slice", usage(100 * MiB));
  auto obs = make(node.config());
  ASSERT_TRUE(obs);
  MemcgCounters c = obs->read_memcg_counters();
  EXPECT_EQ(c.kubepods_path, node.kubepods());
  EXPECT_EQ(c.kubepods_usage, 300 * MiB);
  EXPECT_TRUE(c.scope_is_root);
  EXPECT_FALSE(c.scope_file_usage);
  EXPECT_EQ(c.children_usage, 400 * MiB);
}

TEST(MemcgCounters, ASandboxScopeNeverReachesAboveTheConfiguredRoot) {
  FakeNode node(CgroupVersion::Hybrid, CgroupDriver::Cgroupfs);
  const std::string sandbox = node.memory_mount() + "/sandbox";
  node.write_memcg(sandbox, usage(350 * MiB));
  node.write_memcg(sandbox + "/kubepods", usage(300 * MiB));
  node.set_root_memory(usage(1500 * MiB));
  ObserveConfig cfg = node.config();
  cfg.cgroup_root = "/sandbox";
  auto obs = make(cfg);
  ASSERT_TRUE(obs);
  MemcgCounters c = obs->read_memcg_counters();
  EXPECT_EQ(c.kubepods_path, sandbox + "/kubepods");
  EXPECT_EQ(c.kubepods_usage, 300 * MiB);
  EXPECT_EQ(c.scope_path, sandbox);
  EXPECT_FALSE(c.scope_is_root);
  EXPECT_EQ(c.scope_file_usage, 350 * MiB) << "the sandbox's own page counter";
  EXPECT_FALSE(c.children_usage) << "nothing read above the sandbox";
}

TEST(MemcgCounters, AnUnreadableCounterIsUnknownNotZero) {
  FakeNode node(CgroupVersion::Hybrid, CgroupDriver::Cgroupfs);
  auto obs = make(node.config());
  ASSERT_TRUE(obs);
  ASSERT_TRUE(obs->read_memcg_counters().kubepods_usage);
  write_text(node.kubepods() + "/memory.usage_in_bytes", "garbage\n");
  EXPECT_FALSE(obs->read_memcg_counters().kubepods_usage);
}

TEST(MemcgScopes, KubepodsAndTheTiersThatExistWithTheirIds) {
  for (CgroupDriver driver : {CgroupDriver::Cgroupfs, CgroupDriver::Systemd}) {
    SCOPED_TRACE(driver == CgroupDriver::Systemd ? "systemd" : "cgroupfs");
    FakeNode node(CgroupVersion::Hybrid, driver);
    auto obs = make(node.config());
    ASSERT_TRUE(obs);
    const std::string kp = node.kubepods();
    const std::string be = driver == CgroupDriver::Systemd ? kp + "/kubepods-besteffort.slice" : kp + "/besteffort";
    const std::string bu = driver == CgroupDriver::Systemd ? kp + "/kubepods-burstable.slice" : kp + "/burstable";
    auto scopes = obs->memcg_scopes();
    ASSERT_EQ(scopes.size(), 3u);
    EXPECT_EQ(scopes[0].path, kp);
    EXPECT_EQ(scopes[0].name, "kubepods");
    EXPECT_EQ(scopes[1].path, bu);
    EXPECT_EQ(scopes[1].name, "burstable");
    EXPECT_EQ(scopes[2].path, be);
    EXPECT_EQ(scopes[2].name, "besteffort");
    for (const auto& s : scopes) EXPECT_EQ(s.id, *kernel::cgroup_id_of(s.path)) << s.path;
    // A tier that is gone is not listed.
    TempDir::remove_tree(be);
    EXPECT_EQ(obs->memcg_scopes().size(), 2u);
  }
}

}  // namespace
}  // namespace pressured
