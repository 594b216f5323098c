// The ephemeral storage walker: logs + emptyDir per pod (writable layers:
// writable_layers_test.cpp), no symlinks followed, bounded by its entry budget.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fakes/fake_node.hpp"
#include "metrics/exposition.hpp"
#include "pressured/metrics.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

uint64_t allocated(const std::string& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

TEST(Storage, LogsAndEmptyDirPerPod) {
  testing::FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  const std::string logs = node.root() + "/var/log/pods/shop_web-1_u-web";
  const std::string ed = node.root() + "/var/lib/kubelet/pods/u-web/volumes/kubernetes.io~empty-dir/cache";
  testing::write_text(logs + "/app/0.log", std::string(100000, 'x'));
  testing::write_text(ed + "/data.bin", std::string(300000, 'y'));
  testing::write_text(ed + "/sub/more.bin", std::string(50000, 'z'));
  // A symlink to a big file elsewhere must not be followed.
  testing::write_text(node.root() + "/outside/big.bin", std::string(2000000, 'o'));
  ASSERT_EQ(::symlink((node.root() + "/outside").c_str(), (ed + "/link").c_str()), 0);
  testing::write_text(node.root() + "/var/lib/kubelet/pods/u-other/volumes/kubernetes.io~empty-dir/e/f", "1");

  auto src = make_pod_storage_source(node.config());
  src->walk_now(TimePoint(std::chrono::seconds(5)));
  auto u = src->lookup("u-web");
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->complete);
  EXPECT_EQ(u->measured_at, TimePoint(std::chrono::seconds(5)));
  uint64_t files = allocated(logs + "/app/0.log") + allocated(ed + "/data.bin") + allocated(ed + "/sub/more.bin");
  EXPECT_GE(u->bytes, files);
  EXPECT_LT(u->bytes, files + allocated(node.root() + "/outside/big.bin")) << "symlink target not counted";
  // logs dir, app, 0.log; empty-dir root, cache, data.bin, sub, more.bin, link
  EXPECT_EQ(u->inodes, 9u);
  // The parts: logs (dir, app, 0.log) and emptyDir (the other 6); no runtime root here.
  EXPECT_EQ(u->breakdown.logs_inodes, 3u);
  EXPECT_EQ(u->breakdown.empty_dir_inodes, 6u);
  EXPECT_GE(u->breakdown.logs_bytes, allocated(logs + "/app/0.log"));
  EXPECT_EQ(u->breakdown.logs_bytes + u->breakdown.empty_dir_bytes, u->bytes);
  EXPECT_EQ(u->breakdown.writable_layers_bytes, 0u);
  EXPECT_FALSE(u->breakdown.writable_layers_measured);
  // Split by volume and by container, each with its subtree (not the parent dirs).
  ASSERT_EQ(u->breakdown.empty_dir_volumes.size(), 1u);
  EXPECT_EQ(u->breakdown.empty_dir_volumes[0].name, "cache");
  EXPECT_EQ(u->breakdown.empty_dir_volumes[0].inodes, 5u);  // cache, data.bin, sub, more.bin, link
  EXPECT_EQ(u->breakdown.empty_dir_volumes[0].bytes,
            u->breakdown.empty_dir_bytes - allocated(node.root() + "/var/lib/kubelet/pods/u-web/volumes/kubernetes.io~empty-dir"));
  ASSERT_EQ(u->breakdown.container_logs.size(), 1u);
  EXPECT_EQ(u->breakdown.container_logs[0].name, "app");
  EXPECT_EQ(u->breakdown.container_logs[0].inodes, 2u);
  EXPECT_EQ(u->breakdown.container_logs[0].bytes, allocated(logs + "/app") + allocated(logs + "/app/0.log"));
  EXPECT_FALSE(src->stats().writable_layers.measured);
  EXPECT_TRUE(src->lookup("u-other"));
  EXPECT_FALSE(src->lookup("u-none"));

  // Merged into the snapshot.
  node.add_pod("u-web", QosClass::Burstable, testing::FakePodMemory{1 << 20, 1 << 20, 0, 0, 0});
  std::shared_ptr<PodStorageSource> shared = std::move(src);
  auto obs = make_node_observer(node.config(), nullptr, shared);
  ASSERT_TRUE(obs);
  auto snap = (*obs)->observe(TimePoint(std::chrono::seconds(6)));
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->pods.size(), 1u);
  EXPECT_EQ(snap->pods[0].usage.ephemeral_storage_bytes, u->bytes);
  EXPECT_EQ(snap->pods[0].usage.inodes, 9u);
  ASSERT_TRUE(snap->pods[0].ephemeral_storage);
  EXPECT_EQ(*snap->pods[0].ephemeral_storage, u->breakdown);
}

TEST(Storage, EntryBudgetStopsTheWalk) {
  testing::FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  for (int i = 0; i < 200; ++i) {
    testing::write_text(node.root() + "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/v/f" + std::to_string(i), "x");
  }
  ObserveConfig c = node.config();
  c.disk_walk_max_entries = 50;
  auto src = make_pod_storage_source(c);
  src->walk_now(TimePoint{});
  auto u = src->lookup("u1");
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->complete);
  EXPECT_LE(u->inodes, 52u);
  EXPECT_EQ(src->stats().incomplete_walks, 1u);
}

// A tenant's hard links must not spend the budget before deduplication (they
// hid a whole pod's usage), and one pod's huge tree must not starve the others.
TEST(Storage, HardLinksAreDeduplicatedBeforeSpendingTheBudget) {
  testing::FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  const std::string a = node.root() + "/var/lib/kubelet/pods/u-a/volumes/kubernetes.io~empty-dir/v";
  const std::string b = node.root() + "/var/lib/kubelet/pods/u-b/volumes/kubernetes.io~empty-dir/v";
  testing::write_text(a + "/big.bin", std::string(200000, 'a'));
  for (int i = 0; i < 3000; ++i) {
    ASSERT_EQ(::link((a + "/big.bin").c_str(), (a + "/l" + std::to_string(i)).c_str()), 0);
  }
  for (int i = 0; i < 20; ++i) testing::write_text(b + "/f" + std::to_string(i), std::string(100000, 'b'));
  ObserveConfig c = node.config();
  c.disk_walk_max_entries = 1000;
  auto src = make_pod_storage_source(c);
  src->walk_now(TimePoint{});
  auto ua = src->lookup("u-a"), ub = src->lookup("u-b");
  ASSERT_TRUE(ua && ub);
  EXPECT_TRUE(ua->complete) << "3000 links to one file are one file";
  EXPECT_GE(ua->bytes, allocated(a + "/big.bin"));
  EXPECT_LT(ua->bytes, 2 * allocated(a + "/big.bin") + 64 * 1024);
  EXPECT_TRUE(ub->complete);
  EXPECT_GE(ub->bytes, 20 * allocated(b + "/f0"));
  EXPECT_EQ(src->stats().truncated_pods, 0u);
}

TEST(Storage, TheBudgetIsSharedFairlyAndTruncationIsPerPod) {
  testing::FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  const std::string big = node.root() + "/var/lib/kubelet/pods/u-a-big/volumes/kubernetes.io~empty-dir/v";
  const std::string small = node.root() + "/var/lib/kubelet/pods/u-b-small/volumes/kubernetes.io~empty-dir/v";
  for (int i = 0; i < 1500; ++i) testing::write_text(big + "/f" + std::to_string(i), "x");
  for (int i = 0; i < 10; ++i) testing::write_text(small + "/f" + std::to_string(i), std::string(50000, 's'));
  ObserveConfig c = node.config();
  c.disk_walk_max_entries = 1000;
  auto src = make_pod_storage_source(c);
  src->walk_now(TimePoint{});
  auto ub = src->lookup("u-a-big"), us = src->lookup("u-b-small");
  ASSERT_TRUE(ub && us);
  EXPECT_FALSE(ub->complete) << "the big pod is cut at its share";
  EXPECT_LE(ub->inodes, 502u);
  EXPECT_TRUE(us->complete) << "the small pod walked after the big one is measured in full";
  EXPECT_EQ(us->inodes, 12u);  // empty-dir root, v, 10 files
  EXPECT_EQ(src->stats().truncated_pods, 1u);
  EXPECT_EQ(src->stats().incomplete_walks, 1u);
}

// What an operator scrapes of the walker: the same numbers as `top` shows,
// exported as the daemon exports them.
TEST(Storage, WalkStatsAreExported) {
  testing::FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  for (int i = 0; i < 200; ++i) {
    testing::write_text(node.root() + "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/v/f" + std::to_string(i), "x");
  }
  testing::write_text(node.root() + "/var/lib/kubelet/pods/u2/volumes/kubernetes.io~empty-dir/v/f", "x");
  ObserveConfig c = node.config();
  c.disk_walk_max_entries = 50;
  auto src = make_pod_storage_source(c);
  MetricsOptions mo;
  mo.node = "node-a";
  Metrics metrics(mo);
  const StatsExport handle = metrics.export_counters(src->exported_stats());
  ASSERT_TRUE(handle.active());
  EXPECT_EQ(testing::scraped(metrics, "pressured_storage_walks_total"), 0.0) << "there from the start, at 0";

  src->walk_now(TimePoint{});
  src->walk_now(TimePoint{});
  const auto st = src->stats();
  auto e = testing::scrape(metrics);
  EXPECT_EQ(e.value("pressured_storage_walks_total"), 2.0);
  EXPECT_EQ(e.value("pressured_storage_incomplete_walks_total"), 2.0);
  EXPECT_EQ(e.value("pressured_storage_walk_truncated_pods"), 1.0) << "u1 cut, u2 whole";
  EXPECT_EQ(e.types["pressured_storage_walk_truncated_pods"], "gauge");
  EXPECT_EQ(e.value("pressured_storage_walk_entries"), static_cast<double>(st.entries));
  EXPECT_GT(st.entries, 0u);
  EXPECT_EQ(e.value("pressured_storage_walk_errors_total"), 0.0);
  EXPECT_EQ(e.value("pressured_storage_walk_duration_microseconds"),
            static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(st.last_walk_duration).count()));
  EXPECT_EQ(e.value("pressured_storage_writable_layer_containers"), 0.0) << "no runtime root in this tree";
  EXPECT_EQ(st.walks, 2u);
  EXPECT_EQ(st.incomplete_walks, 2u);
}

}  // namespace
}  // namespace pressured

namespace pressured {
namespace {

// Creates `depth` nested directories named `name` below `dir` (through fds:
// the path may be longer than PATH_MAX) and a file of `bytes` at the bottom;
// returns the file's allocated bytes.
uint64_t deep_file(const std::string& dir, int depth, const std::string& name, std::size_t bytes) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << dir;
  for (int i = 0; i < depth && fd >= 0; ++i) {
    EXPECT_EQ(::mkdirat(fd, name.c_str(), 0755), 0);
    int sub = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    fd = sub;
  }
  EXPECT_GE(fd, 0);
  int f = ::openat(fd, "data.bin", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  EXPECT_GE(f, 0);
  const std::string data(bytes, 'd');
  EXPECT_EQ(::write(f, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  struct stat st {};
  EXPECT_EQ(::fstat(f, &st), 0);
  ::close(f);
  ::close(fd);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

// 24 MiB written at depth 131 read as 516 KiB: the walk stopped at depth 128,
// and the pod escaped the sizeLimit its twin (the file at depth 1) was
// evicted for. Every byte counts, however deep, within the walk's budget.
TEST(Storage, EveryDepthIsMeasured) {
  testing::FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  const std::string root = node.root() + "/var/lib/kubelet/pods/";
  const std::string suffix = "/volumes/kubernetes.io~empty-dir/cache";
  testing::write_text(root + "u-flat" + suffix + "/.keep", "");
  testing::write_text(root + "u-deep" + suffix + "/.keep", "");
  testing::write_text(root + "u-long" + suffix + "/.keep", "");
  const uint64_t flat = deep_file(root + "u-flat" + suffix, 1, "d", 300000);
  const uint64_t deep = deep_file(root + "u-deep" + suffix, 300, "d", 300000);
  // Names of 200 characters, 30 deep: a path of 6000, past PATH_MAX.
  const uint64_t longer = deep_file(root + "u-long" + suffix, 30, std::string(200, 'n'), 300000);
  auto src = make_pod_storage_source(node.config());
  src->walk_now(TimePoint{});
  for (const char* uid : {"u-flat", "u-deep", "u-long"}) {
    auto u = src->lookup(uid);
    ASSERT_TRUE(u) << uid;
    EXPECT_TRUE(u->complete) << uid;
    ASSERT_EQ(u->breakdown.empty_dir_volumes.size(), 1u) << uid;
    EXPECT_GE(u->breakdown.empty_dir_volumes[0].bytes, std::string(uid) == "u-flat" ? flat
                                                         : std::string(uid) == "u-deep" ? deep
                                                                                        : longer)
        << uid;
  }
  EXPECT_EQ(src->lookup("u-deep")->inodes, src->lookup("u-flat")->inodes + 299) << "every level counted";
  EXPECT_EQ(src->stats().errors, 0u);

  // The budget is the only bound: a tree deeper than it is cut, and says so.
  ObserveConfig c = node.config();
  c.disk_walk_max_entries = 100;
  auto small = make_pod_storage_source(c);
  small->walk_now(TimePoint{});
  auto cut = small->lookup("u-deep");
  ASSERT_TRUE(cut);
  EXPECT_FALSE(cut->complete);
  EXPECT_GE(small->stats().incomplete_walks, 1u);
}

}  // namespace
}  // namespace pressured
