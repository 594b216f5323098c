// NodeObserver on fake trees: every signal's formula, per-pod usage, metadata
// merge and mismatches, staleness and faults (vanished pod, truncated file,
// permission denied, recreated cgroup).
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "node/formulas.hpp"
#include "node/observer_test_helpers.hpp"
#include "metrics/exposition.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

using testing::exported;

using namespace observer_test;

const Pod* find(const NodeSnapshot& s, const std::string& uid) {
  for (const auto& p : s.pods) {
    if (p.uid == uid) return &p;
  }
  return nullptr;
}

std::unique_ptr<NodeObserver> make(const ObserveConfig& c, std::shared_ptr<PodMetadataSource> md = nullptr,
                                   std::shared_ptr<PodStorageSource> st = nullptr) {
  auto o = make_node_observer(c, std::move(md), std::move(st));
  EXPECT_TRUE(o) << (o ? "" : o.error().message);
  return o ? std::move(*o) : nullptr;
}

class VersionTest : public ::testing::TestWithParam<CgroupVersion> {};

TEST_P(VersionTest, MemoryAvailableIsTheKubeletFormula) {
  FakeNode node(GetParam(), CgroupDriver::Cgroupfs);
  // Root: v1 usage 3 GiB; v2 usage = anon + file = 1.25 + 1.75 = 3 GiB. inactive_file 1 GiB.
  node.set_root_memory(FakePodMemory{3 * GiB, 1280 * MiB, 1792 * MiB, 1 * GiB, 512 * MiB});
  node.set_meminfo(8 * GiB, 0);
  auto obs = make(node.config());
  ASSERT_TRUE(obs);
  auto snap = obs->observe(t(1));
  ASSERT_TRUE(snap) << snap.error().message;
  const auto& m = snap->signal(Signal::MemoryAvailable);
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->capacity, 8.0 * GiB);
  EXPECT_DOUBLE_EQ(m->value, 8.0 * GiB - (3.0 * GiB - 1.0 * GiB));
  EXPECT_FALSE(m->stale);
  EXPECT_EQ(m->observed_at, t(1));

  // A fresh read sees a change without a full observation.
  node.set_root_memory(FakePodMemory{5 * GiB, 2560 * MiB, 2560 * MiB, 1 * GiB, 512 * MiB});
  auto fresh = obs->refresh_signal(Signal::MemoryAvailable, t(2));
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_DOUBLE_EQ(fresh->value, 8.0 * GiB - 4.0 * GiB);
  EXPECT_EQ(fresh->observed_at, t(2));
}

TEST_P(VersionTest, OtherSignals) {
  FakeNode node(GetParam(), CgroupDriver::Systemd);
  auto obs = make(node.config());
  ASSERT_TRUE(obs);
  auto snap = obs->observe(t(1));
  ASSERT_TRUE(snap) << snap.error().message;
  // allocatable = kubepods limit 6 GiB (v1 limit_in_bytes / v2 memory.max); ws = 1 GiB - 128 MiB.
  if (GetParam() == CgroupVersion::V2) {
    // The fake writes memory.max for v2 kubepods too.
  }
  const auto& a = snap->signal(Signal::AllocatableMemoryAvailable);
  ASSERT_TRUE(a);
  EXPECT_DOUBLE_EQ(a->capacity, 6.0 * GiB);
  EXPECT_DOUBLE_EQ(a->value, 6.0 * GiB - (1.0 * GiB - 128.0 * MiB));
  // pid.available = min(pid_max 32768, threads-max 192731) - 391 tasks.
  const auto& pid = snap->signal(Signal::PidAvailable);
  ASSERT_TRUE(pid);
  EXPECT_DOUBLE_EQ(pid->capacity, 32768);
  EXPECT_DOUBLE_EQ(pid->value, 32768 - 391);
  // PSI from /proc/pressure.
  ASSERT_TRUE(snap->signal(Signal::MemoryPressureSomeAvg10));
  EXPECT_DOUBLE_EQ(snap->signal(Signal::MemoryPressureSomeAvg10)->value, 1.5);
  EXPECT_DOUBLE_EQ(snap->signal(Signal::MemoryPressureFullAvg10)->value, 0.5);
  EXPECT_DOUBLE_EQ(snap->signal(Signal::MemoryPressureSomeAvg60)->value, 0.75);
  EXPECT_DOUBLE_EQ(snap->signal(Signal::IoPressureFullAvg10)->value, 1.0);
  ASSERT_TRUE(snap->psi_cpu);
  EXPECT_DOUBLE_EQ(snap->psi_cpu->some.avg10, 3.0);
  // nodefs via statvfs of the fake nodefs path; imagefs falls back to it.
  struct statvfs v {};
  ASSERT_EQ(::statvfs((node.root() + "/var/lib/kubelet").c_str(), &v), 0);
  const auto& nf = snap->signal(Signal::NodefsAvailable);
  ASSERT_TRUE(nf);
  EXPECT_DOUBLE_EQ(nf->capacity, static_cast<double>(v.f_blocks) * static_cast<double>(v.f_frsize));
  const auto& img = snap->signal(Signal::ImagefsAvailable);
  ASSERT_TRUE(img);
  EXPECT_DOUBLE_EQ(img->capacity, nf->capacity);
}

TEST_P(VersionTest, PerPodUsage) {
  FakeNode node(GetParam(), CgroupDriver::Cgroupfs);
  FakePodMemory m{300 * MiB, 200 * MiB, 100 * MiB, 60 * MiB, 40 * MiB};
  m.limit = 512 * MiB;
  m.pids = 7;
  node.add_pod("p1", QosClass::Burstable, m);
  node.add_pod("p2", QosClass::BestEffort, FakePodMemory{10 * MiB, 5 * MiB, 5 * MiB, 20 * MiB, 0});
  auto obs = make(node.config());
  ASSERT_TRUE(obs);
  auto snap = obs->observe(t(1));
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->pods.size(), 2u);
  const Pod* p1 = find(*snap, "p1");
  ASSERT_NE(p1, nullptr);
  EXPECT_EQ(p1->qos, QosClass::Burstable);
  EXPECT_EQ(p1->usage.memory_working_set_bytes, 240 * MiB);
  EXPECT_EQ(p1->usage.memory_rss_bytes, 200 * MiB);
  EXPECT_EQ(p1->usage.memory_cache_bytes, 100 * MiB);
  EXPECT_EQ(p1->memory_usage_bytes, 300 * MiB);
  EXPECT_EQ(p1->memory_limit_bytes, std::optional<uint64_t>(512 * MiB));
  EXPECT_EQ(p1->usage.pids, 7u);
  EXPECT_FALSE(p1->stale);
  EXPECT_FALSE(p1->metadata_known);
  struct stat st {};
  ASSERT_EQ(::stat(p1->cgroup_path.c_str(), &st), 0);
  EXPECT_EQ(p1->cgroup_id, st.st_ino);
  if (GetParam() == CgroupVersion::V2) {
    ASSERT_TRUE(p1->memory_events);
    EXPECT_EQ(p1->memory_events->high, 262u);
    EXPECT_EQ(p1->memory_events->oom_kill, 1u);
  } else {
    EXPECT_FALSE(p1->memory_events);
  }
  if (GetParam() == CgroupVersion::V1) {
    EXPECT_FALSE(p1->memory_pressure);
  } else {
    ASSERT_TRUE(p1->memory_pressure);  // v2, or hybrid through the unified pod cgroup
    EXPECT_DOUBLE_EQ(p1->memory_pressure->some.avg10, 4.0);
  }
  // inactive_file > usage: working set clamps at 0 (cadvisor).
  const Pod* p2 = find(*snap, "p2");
  ASSERT_NE(p2, nullptr);
  EXPECT_EQ(p2->usage.memory_working_set_bytes, 0u);
  EXPECT_FALSE(p2->memory_limit_bytes);

  // refresh_pod re-reads in place.
  Pod copy = *p1;
  FakePodMemory m2 = m;
  m2.usage = 400 * MiB;
  node.write_memcg(p1->cgroup_path, m2);
  ASSERT_TRUE(obs->refresh_pod(copy, t(2)));
  EXPECT_EQ(copy.usage.memory_working_set_bytes, 340 * MiB);
  EXPECT_EQ(copy.usage_observed_at, std::optional<TimePoint>(t(2)));
}

INSTANTIATE_TEST_SUITE_P(Versions, VersionTest,
                         ::testing::Values(CgroupVersion::V1, CgroupVersion::V2, CgroupVersion::Hybrid),
                         [](const auto& info) { return std::string(name(info.param)) == "v1" ? std::string("V1")
                                                       : std::string(name(info.param)) == "v2" ? std::string("V2")
                                                                                               : std::string("Hybrid"); });

// The sysctls are read through kept-open fds: a value the administrator
// writes (in place, as sysctl(8) does) is seen at the next full observation.
TEST(Sysctls, AWrittenValueIsSeenAtTheNextFullObservation) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  ObserveConfig c = node.config();
  c.memory_available_mode = MemoryAvailableMode::ExcludeReserved;  // subtracts min_free_kbytes
  auto obs = make(c);
  ASSERT_TRUE(obs);
  auto a = obs->observe(t(1));
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(a->signal(Signal::PidAvailable));
  EXPECT_DOUBLE_EQ(a->signal(Signal::PidAvailable)->capacity, 32768);
  testing::write_text(c.proc_root + "/sys/kernel/pid_max", "20000\n");
  testing::write_text(c.proc_root + "/sys/vm/min_free_kbytes", "167584\n");  // 100000 KiB more
  auto b = obs->observe(t(2));
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_DOUBLE_EQ(b->signal(Signal::PidAvailable)->capacity, 20000);
  EXPECT_DOUBLE_EQ(b->signal(Signal::MemoryAvailable)->value,
                   a->signal(Signal::MemoryAvailable)->value - 100000.0 * 1024);
}

TEST(MemoryModes, WorkedExamplesFromTheDocs) {
  // docs/observation.md, "Worked examples": MemTotal 16 GiB, 2 GiB of
  // reserved hugepages, min_free_kbytes 67584 (66 MiB), usage 10 GiB,
  // inactive_file 3 GiB, active_file 2 GiB.
  node::MemoryInputs in;
  in.meminfo.mem_total = 16 * GiB;
  in.meminfo.hugetlb = 2 * GiB;
  in.root_usage = 10 * GiB;
  in.root_stat.inactive_file = 3 * GiB;
  in.root_stat.active_file = 2 * GiB;
  in.min_free_bytes = 67584ULL * 1024;
  auto k = node::memory_available(in, MemoryAvailableMode::Kubelet, 50);
  EXPECT_DOUBLE_EQ(k.available, 9.0 * GiB);
  EXPECT_DOUBLE_EQ(k.capacity, 16.0 * GiB);
  auto x = node::memory_available(in, MemoryAvailableMode::ExcludeReserved, 50);
  EXPECT_DOUBLE_EQ(x.capacity, 14.0 * GiB);
  EXPECT_DOUBLE_EQ(x.available, 7.0 * GiB - 66.0 * MiB);
  auto r = node::memory_available(in, MemoryAvailableMode::ReclaimableActive, 50);
  EXPECT_DOUBLE_EQ(r.available, 10.0 * GiB);
  EXPECT_EQ(r.working_set, 6 * GiB);
  // Never negative.
  in.root_usage = 40 * GiB;
  EXPECT_DOUBLE_EQ(node::memory_available(in, MemoryAvailableMode::Kubelet, 50).available, 0.0);
}

TEST(MemoryModes, ObserverUsesTheConfiguredMode) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  node.set_meminfo(16 * GiB, 2 * GiB);
  node.set_root_memory(FakePodMemory{10 * GiB, 7 * GiB, 3 * GiB, 3 * GiB, 2 * GiB});
  ObserveConfig c = node.config();
  c.memory_available_mode = MemoryAvailableMode::ExcludeReserved;
  auto obs = make(c);
  ASSERT_TRUE(obs);
  auto v = obs->refresh_signal(Signal::MemoryAvailable, t(1));
  ASSERT_TRUE(v);
  EXPECT_DOUBLE_EQ(v->value, 7.0 * GiB - 66.0 * MiB);
  c.memory_available_mode = MemoryAvailableMode::ReclaimableActive;
  c.reclaimable_active_file_percent = 100;
  obs = make(c);
  v = obs->refresh_signal(Signal::MemoryAvailable, t(1));
  ASSERT_TRUE(v);
  EXPECT_DOUBLE_EQ(v->value, 16.0 * GiB - 5.0 * GiB);
}

TEST(Allocatable, ConfiguredValueAndUnlimitedKubepods) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  ObserveConfig c = node.config();
  c.allocatable_memory_bytes = 4 * GiB;
  auto obs = make(c);
  auto a = obs->refresh_signal(Signal::AllocatableMemoryAvailable, t(1));
  ASSERT_TRUE(a);
  EXPECT_DOUBLE_EQ(a->capacity, 4.0 * GiB);
  // Unlimited kubepods and no configured value: MemTotal.
  FakePodMemory kp{1 * GiB, 768 * MiB, 256 * MiB, 128 * MiB, 64 * MiB};
  node.write_memcg(node.kubepods(), kp);
  auto obs2 = make(node.config());
  auto snap = obs2->observe(t(1));
  ASSERT_TRUE(snap);
  ASSERT_TRUE(snap->signal(Signal::AllocatableMemoryAvailable));
  EXPECT_DOUBLE_EQ(snap->signal(Signal::AllocatableMemoryAvailable)->capacity, 8.0 * GiB);
}

TEST(Faults, PodDeletedBetweenObservationsAndMidRead) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  node.add_pod("gone", QosClass::Burstable, FakePodMemory{100 * MiB, 50 * MiB, 50 * MiB, 0, 0});
  node.add_pod("stays", QosClass::Burstable, FakePodMemory{100 * MiB, 50 * MiB, 50 * MiB, 0, 0});
  auto obs = make(node.config());
  auto snap = obs->observe(t(1));
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->pods.size(), 2u);
  Pod gone = *find(*snap, "gone");
  node.remove_pod("gone", QosClass::Burstable);
  auto r = obs->refresh_pod(gone, t(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ENOENT);
  EXPECT_TRUE(gone.stale);
  EXPECT_EQ(exported(obs->counters(), "pressured_observer_vanished_pods_total"), 1);
  auto snap2 = obs->observe(t(3));
  ASSERT_TRUE(snap2);
  ASSERT_EQ(snap2->pods.size(), 1u);
  EXPECT_EQ(snap2->pods[0].uid, "stays");
}

TEST(Faults, PodFilesMissingWhileDirectoryExistsIsStale) {
  // The kubelet removing a pod concurrently: the directory is listed but its
  // files cannot be opened. The pod stays (its directory exists), stale, counted.
  FakeNode node(CgroupVersion::V2, CgroupDriver::Cgroupfs);
  std::string dir = node.add_pod("half", QosClass::Burstable, FakePodMemory{100 * MiB, 50 * MiB, 50 * MiB, 0, 0});
  ::unlink((dir + "/memory.current").c_str());
  auto obs = make(node.config());
  auto snap = obs->observe(t(2));
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->pods.size(), 1u);
  EXPECT_TRUE(snap->pods[0].stale);
  EXPECT_FALSE(snap->pods[0].usage_observed_at);
  EXPECT_EQ(exported(obs->counters(), "pressured_observer_stale_pod_reads_total"), 1);
  EXPECT_EQ(exported(obs->counters(), "pressured_observer_vanished_pods_total"), 0);
}

TEST(Faults, TruncatedMemoryStatMarksPodStale) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  std::string dir = node.add_pod("t", QosClass::Burstable, FakePodMemory{100 * MiB, 50 * MiB, 50 * MiB, 10 * MiB, 0});
  auto obs = make(node.config());
  auto snap = obs->observe(t(1));
  ASSERT_TRUE(snap);
  EXPECT_FALSE(snap->pods[0].stale);
  std::string full = testing::v1_memory_stat(FakePodMemory{100 * MiB, 50 * MiB, 50 * MiB, 10 * MiB, 0});
  testing::write_text(dir + "/memory.stat", full.substr(0, full.size() / 3));
  auto snap2 = obs->observe(t(2));
  ASSERT_TRUE(snap2);
  ASSERT_EQ(snap2->pods.size(), 1u);
  EXPECT_TRUE(snap2->pods[0].stale);
  EXPECT_EQ(snap2->pods[0].usage.memory_working_set_bytes, 90 * MiB);  // last good value
  EXPECT_EQ(exported(obs->counters(), "pressured_observer_stale_pod_reads_total"), 1);
  Pod p = snap2->pods[0];
  EXPECT_FALSE(obs->refresh_pod(p, t(3)));
  EXPECT_TRUE(p.stale);
  // Repaired: fresh again.
  testing::write_text(dir + "/memory.stat", full);
  auto snap3 = obs->observe(t(4));
  ASSERT_TRUE(snap3);
  EXPECT_FALSE(snap3->pods[0].stale);
}

TEST(Faults, TruncatedRootStatMarksSignalStale) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  auto obs = make(node.config());
  auto snap = obs->observe(t(1));
  ASSERT_TRUE(snap);
  double good = snap->signal(Signal::MemoryAvailable)->value;
  testing::write_text(node.memory_mount() + "/memory.stat", "cache 1\nrss 2\ntotal_ca");
  auto snap2 = obs->observe(t(2));
  ASSERT_TRUE(snap2);
  ASSERT_TRUE(snap2->signal(Signal::MemoryAvailable));
  EXPECT_TRUE(snap2->signal(Signal::MemoryAvailable)->stale);
  EXPECT_DOUBLE_EQ(snap2->signal(Signal::MemoryAvailable)->value, good);
  EXPECT_EQ(exported(obs->counters(), "pressured_observer_stale_signal_reads_total"), 1);
  EXPECT_FALSE(obs->refresh_signal(Signal::MemoryAvailable, t(3)));
  EXPECT_EQ(exported(obs->counters(), "pressured_observer_stale_signal_reads_total"), 2);
}

TEST(Faults, NoMemorySignalAtAllIsAnError) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  ::unlink((node.memory_mount() + "/memory.stat").c_str());
  auto obs = make(node.config());
  auto snap = obs->observe(t(1));
  ASSERT_FALSE(snap);
  EXPECT_NE(snap.error().message.find("memory.available"), std::string::npos);
}

// Runs `fn` as an unprivileged user when we are root (root ignores file
// modes), in a child process; returns the child's exit status.
template <typename Fn>
int as_nobody(Fn&& fn) {
  if (::geteuid() != 0) return fn();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(90);
    ::_exit(fn());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

TEST(Faults, PermissionDeniedMarksPodStale) {
  FakeNode node(CgroupVersion::V2, CgroupDriver::Cgroupfs);
  std::string dir = node.add_pod("denied", QosClass::Burstable, FakePodMemory{100 * MiB, 50 * MiB, 50 * MiB, 0, 0});
  node.add_pod("fine", QosClass::Burstable, FakePodMemory{100 * MiB, 50 * MiB, 50 * MiB, 0, 0});
  ::chmod(node.root().c_str(), 0755);
  ASSERT_EQ(::chmod((dir + "/memory.stat").c_str(), 0), 0);
  ObserveConfig c = node.config();
  int rc = as_nobody([&]() -> int {
    auto obs = make_node_observer(c);
    if (!obs) return 10;
    auto snap = (*obs)->observe(t(1));
    if (!snap) return 11;
    if (snap->pods.size() != 2) return 12;
    const Pod* d = find(*snap, "denied");
    const Pod* f = find(*snap, "fine");
    if (d == nullptr || f == nullptr) return 13;
    if (!d->stale || f->stale) return 14;
    if ((*obs)->counters().stale_pod_reads != 1) return 15;
    Pod p = *d;
    auto r = (*obs)->refresh_pod(p, t(2));
    if (r || r.error().code != EACCES || !p.stale) return 16;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "child check failed with code " << rc;
}

TEST(Faults, RecreatedPodCgroupIsReopened) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  node.add_pod("re", QosClass::Guaranteed, FakePodMemory{100 * MiB, 50 * MiB, 50 * MiB, 0, 0});
  auto obs = make(node.config());
  auto snap = obs->observe(t(1));
  ASSERT_TRUE(snap);
  uint64_t id1 = snap->pods[0].cgroup_id;
  Pod p = snap->pods[0];
  // Hold a directory so the recreated one cannot reuse the inode number.
  testing::mkdirs(node.root() + "/hold-inode");
  node.remove_pod("re", QosClass::Guaranteed);
  node.add_pod("re", QosClass::Guaranteed, FakePodMemory{300 * MiB, 250 * MiB, 50 * MiB, 0, 0});
  ASSERT_TRUE(obs->refresh_pod(p, t(2)));
  EXPECT_EQ(p.usage.memory_working_set_bytes, 300 * MiB) << "read the new cgroup, not the old fds";
  EXPECT_NE(p.cgroup_id, id1);
  EXPECT_EQ(exported(obs->counters(), "pressured_observer_reopened_cgroups_total"), 1);
}

TEST(Pods, KubepodsMissingGivesNoPodsNotAnError) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  testing::TempDir::remove_tree(node.kubepods());
  auto obs = make(node.config());
  auto snap = obs->observe(t(1));
  ASSERT_TRUE(snap);
  EXPECT_TRUE(snap->pods.empty());
  EXPECT_FALSE(snap->signal(Signal::AllocatableMemoryAvailable));
  EXPECT_TRUE(snap->signal(Signal::MemoryAvailable));
}

TEST(Pods, ManyPodsAndNoFdLeakOnChurn) {
  FakeNode node(CgroupVersion::V2, CgroupDriver::Systemd);
  for (int i = 0; i < 50; ++i) {
    node.add_pod("uid-" + std::to_string(i), i % 3 == 0 ? QosClass::Guaranteed : i % 3 == 1 ? QosClass::Burstable : QosClass::BestEffort,
                 FakePodMemory{static_cast<uint64_t>(i + 1) * MiB, 0, 0, 0, 0});
  }
  auto obs = make(node.config());
  auto count_fds = [] {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
      while (::readdir(d)) ++n;
      ::closedir(d);
    }
    return n;
  };
  auto snap = obs->observe(t(1));
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->pods.size(), 50u);
  int fds = count_fds();
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 50; i += 2) node.remove_pod("uid-" + std::to_string(i), i % 3 == 0 ? QosClass::Guaranteed : i % 3 == 1 ? QosClass::Burstable : QosClass::BestEffort);
    ASSERT_TRUE(obs->observe(t(2)));
    for (int i = 0; i < 50; i += 2) {
      node.add_pod("uid-" + std::to_string(i), i % 3 == 0 ? QosClass::Guaranteed : i % 3 == 1 ? QosClass::Burstable : QosClass::BestEffort,
                   FakePodMemory{MiB, 0, 0, 0, 0});
    }
    ASSERT_TRUE(obs->observe(t(3)));
  }
  EXPECT_LE(count_fds(), fds + 2) << "fds of removed pods are closed";
}


// With the fd table full, listing kubepods fails (EMFILE). A short pod list
// would let a lower-ranked pod be evicted first, so the pods of the last
// listing whose cgroups still exist stay in the observation, and a pod
// removed meanwhile does not. Runs in a child: it exhausts its own fd table.
TEST(Pods, FailedListingKeepsThePodsOfTheLastListing) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  node.add_pod("g", QosClass::Guaranteed, FakePodMemory{10 * MiB, 0, 0, 0, 0});
  node.add_pod("b", QosClass::Burstable, FakePodMemory{20 * MiB, 0, 0, 0, 0});
  node.add_pod("be", QosClass::BestEffort, FakePodMemory{30 * MiB, 0, 0, 0, 0});
  node.add_pod("gone", QosClass::BestEffort, FakePodMemory{40 * MiB, 0, 0, 0, 0});
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto obs = make(node.config());
    if (!obs) ::_exit(10);
    auto first = obs->observe(t(1));
    if (!first || first->pods.size() != 4) ::_exit(11);
    node.remove_pod("gone", QosClass::BestEffort);
    // UBSan checks a virtual call's type through a pipe on its first sight of
    // the type: with no fd left it would report the logger's vptr invalid.
    // One log line before the table fills up lets it check, and cache, them.
    spdlog::info("observer test child: filling the fd table ({}: {}; {})", std::string("kubepods"), "no error",
                 std::size_t{0});
    struct rlimit rl {};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = 4096;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::_exit(12);
    while (::open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0) {
    }
    if (errno != EMFILE) ::_exit(13);
    auto second = obs->observe(t(2));
    if (!second) ::_exit(14);
    if (obs->counters().failed_pod_listings != 1) ::_exit(15);
    if (second->pods.size() != 3) ::_exit(16);
    for (const char* uid : {"g", "b", "be"}) {
      if (find(*second, uid) == nullptr) ::_exit(17);
    }
    if (find(*second, "gone") != nullptr) ::_exit(18);
    // Kept-open fds still read the pods' usage: nothing went stale.
    if (find(*second, "be")->stale || find(*second, "be")->memory_usage_bytes == 0) ::_exit(19);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of a signal";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 no observer, 11 first observation, 12 setrlimit, 13 no EMFILE, "
                                        "14 second observation failed, 15 failure not counted, 16 wrong pod count, "
                                        "17 a listed pod lost, 18 a removed pod kept, 19 pod read failed";
}

}  // namespace
}  // namespace pressured

namespace pressured {
namespace {

// One pod removed and another created in the same QoS tier leave the tier's
// link count as it was: the partial refresh read the pods it knew and a
// decision picked the 300 MiB pod where a full observation picks the new
// 900 MiB one. It must send the caller to a full observation instead.
TEST(Pods, APodReplacingAnotherInItsTierSendsTheDecisionToAFullObservation) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  node.add_pod("old-pod", QosClass::Burstable, FakePodMemory{100 * MiB, 100 * MiB, 0, 0, 0});
  node.add_pod("kept-pod", QosClass::Burstable, FakePodMemory{300 * MiB, 300 * MiB, 0, 0, 0});
  auto obs = make(node.config());
  ASSERT_TRUE(obs);
  auto snap = obs->observe(t(1));
  ASSERT_TRUE(snap) << snap.error().message;
  std::vector<Pod*> pods;
  for (auto& p : snap->pods) pods.push_back(&p);
  ASSERT_TRUE(obs->refresh_memory_usage(pods, t(2))) << "nothing changed yet";

  const std::string tier = node.kubepods() + "/burstable";
  struct stat before {};
  ASSERT_EQ(::stat(tier.c_str(), &before), 0);
  node.remove_pod("old-pod", QosClass::Burstable);
  node.add_pod("new-pod", QosClass::Burstable, FakePodMemory{900 * MiB, 900 * MiB, 0, 0, 0});
  struct stat after {};
  ASSERT_EQ(::stat(tier.c_str(), &after), 0);
  ASSERT_EQ(before.st_nlink, after.st_nlink) << "the case a link count cannot see";

  // Only the pods the decision contends over (kept-pod), all still there.
  std::vector<Pod*> kept;
  for (auto& p : snap->pods) {
    if (p.uid == "kept-pod") kept.push_back(&p);
  }
  ASSERT_EQ(kept.size(), 1u);
  auto r = obs->refresh_memory_usage(kept, t(3));
  ASSERT_FALSE(r) << "new-pod is unknown to the partial path";
  EXPECT_EQ(r.error().code, ESTALE) << r.error().message;
  auto full = obs->observe(t(4));
  ASSERT_TRUE(full);
  EXPECT_NE(find(*full, "new-pod"), nullptr);
  std::vector<Pod*> all;
  for (auto& p : full->pods) all.push_back(&p);
  EXPECT_TRUE(obs->refresh_memory_usage(all, t(5))) << "a full observation takes a new stamp";
}

}  // namespace
}  // namespace pressured
