// Layout detection and pod discovery on fake trees (v1, v2, hybrid; both
// drivers), and on this host's real mount table.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "cgroup/discovery.hpp"
#include "cgroup/layout.hpp"
#include "fakes/fake_node.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

using testing::FakeNode;
using testing::FakePodMemory;

struct LayoutCase {
  CgroupVersion version;
  CgroupDriver driver;
};

class LayoutTest : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(LayoutTest, DetectsVersionMountsDriverAndPods) {
  const auto [version, driver] = GetParam();
  FakeNode node(version, driver);
  node.add_pod("11111111-2222-3333-4444-555555555555", QosClass::Guaranteed, FakePodMemory{100});
  node.add_pod("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", QosClass::Burstable, FakePodMemory{200});
  node.add_pod("0123abcd-0000-0000-0000-000000000001", QosClass::BestEffort, FakePodMemory{300});
  auto layout = detect_layout(node.config());
  ASSERT_TRUE(layout) << layout.error().message;
  EXPECT_EQ(layout->version, version);
  EXPECT_EQ(layout->driver, driver);
  EXPECT_EQ(layout->memory_mount, node.memory_mount());
  EXPECT_EQ(layout->kubepods_memory_path, node.kubepods());
  EXPECT_EQ(layout->memory_on_v2, version == CgroupVersion::V2);
  if (version == CgroupVersion::V1) {
    EXPECT_TRUE(layout->unified_mount.empty());
  } else {
    EXPECT_FALSE(layout->unified_mount.empty());
  }
  if (version != CgroupVersion::V2) {
    EXPECT_EQ(layout->pids_mount, node.root() + "/sys/fs/cgroup/pids");
    EXPECT_EQ(layout->freezer_mount, node.root() + "/sys/fs/cgroup/freezer");
  }

  auto obs = make_node_observer(node.config(), *layout);
  ASSERT_TRUE(obs);
  auto pods = (*obs)->list_pods();
  ASSERT_EQ(pods.size(), 3u);
  std::map<std::string, PodCgroup> by_uid;
  for (auto& p : pods) by_uid[p.uid] = p;
  ASSERT_TRUE(by_uid.count("11111111-2222-3333-4444-555555555555"));
  EXPECT_EQ(by_uid["11111111-2222-3333-4444-555555555555"].qos, QosClass::Guaranteed);
  EXPECT_EQ(by_uid["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"].qos, QosClass::Burstable);
  EXPECT_EQ(by_uid["0123abcd-0000-0000-0000-000000000001"].qos, QosClass::BestEffort);
  for (const auto& p : pods) {
    struct stat st {};
    ASSERT_EQ(::stat(p.memory_path.c_str(), &st), 0);
    EXPECT_EQ(p.cgroup_id, st.st_ino) << "cgroup id is the directory inode";
    ASSERT_EQ(p.containers.size(), 1u);
    EXPECT_EQ(p.containers[0].id, "abc123");  // cri-containerd-<id>.scope stripped for systemd
    if (version == CgroupVersion::V1) {
      EXPECT_TRUE(p.unified_path.empty());
    }
    if (version == CgroupVersion::Hybrid) {
      EXPECT_FALSE(p.unified_path.empty());
      EXPECT_NE(p.unified_cgroup_id, 0u);
    }
    if (version != CgroupVersion::V2) {
      EXPECT_FALSE(p.pids_path.empty());
      EXPECT_FALSE(p.freezer_path.empty());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, LayoutTest,
                         ::testing::Values(LayoutCase{CgroupVersion::V1, CgroupDriver::Cgroupfs},
                                           LayoutCase{CgroupVersion::V1, CgroupDriver::Systemd},
                                           LayoutCase{CgroupVersion::V2, CgroupDriver::Cgroupfs},
                                           LayoutCase{CgroupVersion::V2, CgroupDriver::Systemd},
                                           LayoutCase{CgroupVersion::Hybrid, CgroupDriver::Cgroupfs},
                                           LayoutCase{CgroupVersion::Hybrid, CgroupDriver::Systemd}));

TEST(PodNames, UidFromCgroupName) {
  EXPECT_EQ(pod_uid_from_cgroup_name("pod1234-ab", CgroupDriver::Cgroupfs), "1234-ab");
  EXPECT_EQ(pod_uid_from_cgroup_name("kubepods-burstable-pod12_34_ab.slice", CgroupDriver::Systemd), "12-34-ab");
  EXPECT_EQ(pod_uid_from_cgroup_name("kubepods-pod12_34.slice", CgroupDriver::Systemd), "12-34");
  EXPECT_EQ(pod_uid_from_cgroup_name("kubepods-besteffort-podabc.slice", CgroupDriver::Auto), "abc");
  EXPECT_FALSE(pod_uid_from_cgroup_name("burstable", CgroupDriver::Cgroupfs));
  EXPECT_FALSE(pod_uid_from_cgroup_name("kubepods-burstable.slice", CgroupDriver::Systemd));
  EXPECT_FALSE(pod_uid_from_cgroup_name("podxyz!", CgroupDriver::Cgroupfs));
  EXPECT_FALSE(pod_uid_from_cgroup_name("pod", CgroupDriver::Cgroupfs));
  EXPECT_FALSE(pod_uid_from_cgroup_name("system-pod12.slice", CgroupDriver::Systemd));
  EXPECT_FALSE(pod_uid_from_cgroup_name("pod12_34", CgroupDriver::Cgroupfs));
}

TEST(Layout, ExplicitDriverAndCgroupRoot) {
  testing::TempDir dir;
  std::string m = dir.path() + "/cg";
  testing::write_text(m + "/memory/memory.stat", "total_rss 0\n");
  testing::mkdirs(m + "/memory/custom/kubepods.slice");
  ObserveConfig c;
  c.cgroup_mount = m;
  c.cgroup_root = "/custom";
  c.mountinfo_path = dir.path() + "/no-such-mountinfo";  // falls back to probing directories
  c.driver = CgroupDriver::Systemd;
  auto l = detect_layout(c);
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->version, CgroupVersion::V1);
  EXPECT_EQ(l->driver, CgroupDriver::Systemd);
  EXPECT_EQ(l->kubepods_memory_path, m + "/memory/custom/kubepods.slice");
}

TEST(Layout, ClearErrors) {
  ObserveConfig c;
  c.cgroup_mount = "/nonexistent-pressured";
  auto l = detect_layout(c);
  ASSERT_FALSE(l);
  EXPECT_NE(l.error().message.find("does not exist"), std::string::npos);

  testing::TempDir dir;  // a directory with no controller at all
  c.cgroup_mount = dir.path();
  c.mountinfo_path = dir.path() + "/none";
  auto l2 = detect_layout(c);
  ASSERT_FALSE(l2);
  EXPECT_NE(l2.error().message.find("no memory controller"), std::string::npos);

  // v2 without the memory controller enabled.
  testing::write_text(dir.path() + "/cgroup.controllers", "cpu io pids\n");
  auto l3 = detect_layout(c);
  ASSERT_FALSE(l3);
  EXPECT_NE(l3.error().message.find("no memory controller"), std::string::npos);
}

TEST(Layout, ThisHostMatchesLibcgroup) {
  // The real mount table: hybrid with memory on v1 on this machine.
  ObserveConfig c;
  struct stat st {};
  if (::stat("/sys/fs/cgroup/memory/memory.stat", &st) != 0 && ::stat("/sys/fs/cgroup/cgroup.controllers", &st) != 0) {
    GTEST_SKIP() << "SKIPPED, missing: a cgroup memory controller on this host";
  }
  auto l = detect_layout(c);
  ASSERT_TRUE(l) << l.error().message;
  if (::stat("/sys/fs/cgroup/memory/memory.stat", &st) == 0) {
    EXPECT_EQ(l->memory_mount, "/sys/fs/cgroup/memory");
    EXPECT_FALSE(l->memory_on_v2);
    if (::stat("/sys/fs/cgroup/unified/cgroup.controllers", &st) == 0) {
      EXPECT_EQ(l->version, CgroupVersion::Hybrid);
      EXPECT_EQ(l->unified_mount, "/sys/fs/cgroup/unified");
    }
  }
  // And the same without libcgroup (our own mountinfo parse of the same table).
  ObserveConfig c2;
  c2.mountinfo_path = "/proc/self/mountinfo";
  auto l2 = detect_layout(c2);
  ASSERT_TRUE(l2);
  EXPECT_EQ(l2->memory_mount, l->memory_mount);
  EXPECT_EQ(l2->pids_mount, l->pids_mount);
  EXPECT_EQ(l2->freezer_mount, l->freezer_mount);
  EXPECT_EQ(l2->version, l->version);
}

}  // namespace
}  // namespace pressured
