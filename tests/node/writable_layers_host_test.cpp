// Host integration (root): a real overlayfs container. A child process joins
// a container cgroup in a sandbox kubepods tree, unshares its mount
// namespace, mounts an overlay whose upper dir lies below a temporary
// "runtime root" (with a space in its path, so mountinfo escapes it), chroots
// into it and writes known files; the storage walker must find the layer
// through cgroup.procs and /proc/<pid>/mountinfo and measure it.
//
// Safety: the overlay is mounted only in the child's private mount namespace
// (it disappears with the child); the cgroups are below the SandboxCgroup
// root (tag "layers"); every wait is bounded; the children are killed and
// reaped on every path (Children's destructor), the temp dir is removed after.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fakes/fake_node.hpp"
#include "node/tree_usage.hpp"
#include "fakes/privilege.hpp"
#include "fakes/sandbox_cgroup.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

constexpr std::size_t kFiles = 5;
constexpr std::size_t kFileBytes = 64 * 1024;

bool overlay_supported() {
  std::ifstream in("/proc/filesystems");
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() >= 7 && line.compare(line.size() - 7, 7, "overlay") == 0) return true;
  }
  return false;
}

using testing::allocated;
using testing::tree_usage;

// The test's children: released through one pipe, killed and reaped on exit.
struct Children {
  std::vector<pid_t> pids;
  int go[2] = {-1, -1};  // children block reading go[0] until go[1] closes
  Children() {
    if (::pipe2(go, O_CLOEXEC) != 0) go[0] = go[1] = -1;
  }
  ~Children() {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
    for (int fd : go) {
      if (fd >= 0) ::close(fd);
    }
  }
  void kill_one(pid_t p) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
    std::erase(pids, p);
  }
};

// Child side helpers: async-signal-safe syscalls only after fork.
[[noreturn]] void child_fail(int ready_fd, char step) {
  (void)!::write(ready_fd, &step, 1);
  ::_exit(100 + step);
}

bool join_cgroup(const char* procs_path) {
  int fd = ::open(procs_path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[24];
  int n = std::snprintf(buf, sizeof buf, "%d", static_cast<int>(::getpid()));
  bool ok = ::write(fd, buf, static_cast<std::size_t>(n)) == n;
  ::close(fd);
  return ok;
}

// Waits (bounded) for one byte from a child: 'R' means ready.
char wait_ready(int fd, int timeout_ms) {
  struct pollfd p {fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return 't';
  char c = 'e';
  if (::read(fd, &c, 1) != 1) return 'e';
  return c;
}

TEST(HostIntegration, WritableLayerOfARealOverlayContainer) {
  PRESSURED_REQUIRE_ROOT();
  const std::string mount = testing::SandboxCgroup::find_memory_mount();
  PRESSURED_REQUIRE(!mount.empty() && testing::SandboxCgroup::memory_controller_available(mount),
                    "a memory cgroup controller");
  PRESSURED_REQUIRE(overlay_supported(), "overlayfs (overlay in /proc/filesystems)");
  const bool v2 = ::access((mount + "/cgroup.controllers").c_str(), F_OK) == 0;

  testing::TempDir tmp;
  testing::SandboxCgroup sb(mount, "layers");
  ASSERT_TRUE(sb.ok()) << sb.error();
  ASSERT_TRUE(sb.write("", v2 ? "memory.max" : "memory.limit_in_bytes", std::to_string(64 << 20)));
  const std::string uid = "0bb1c2d3-0000-4000-8000-0000000000aa";
  const std::string pod_rel = "kubepods/burstable/pod" + uid;
  for (const char* ctr : {"ctr-overlay", "ctr-host-root", "ctr-empty"}) ASSERT_TRUE(sb.make(pod_rel + "/" + ctr));

  // A runtime root with a space: mountinfo shows it as \040.
  const std::string runtime_root = tmp.path() + "/runtime root";
  const std::string snap = runtime_root + "/io.containerd.snapshotter.v1.overlayfs/snapshots";
  const std::string lower = snap + "/1/fs", upper = snap + "/2/fs", work = snap + "/2/work";
  const std::string merged = tmp.path() + "/rootfs";
  for (const auto& d : {lower + "/etc", upper, work, merged, tmp.path() + "/kubelet/pods", tmp.path() + "/logs"}) {
    testing::mkdirs(d);
  }
  testing::write_text(lower + "/etc/os-release", std::string(10000, 'l'));  // a lower layer file: not counted
  const std::string options = "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work;
  const std::string overlay_procs = sb.path(pod_rel + "/ctr-overlay") + "/cgroup.procs";
  const std::string plain_procs = sb.path(pod_rel + "/ctr-host-root") + "/cgroup.procs";

  Children kids;
  ASSERT_GE(kids.go[0], 0);
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  static char data[kFileBytes];
  std::memset(data, 'w', sizeof data);

  pid_t ctr = ::fork();
  ASSERT_GE(ctr, 0);
  if (ctr == 0) {
    ::close(ready[0]);
    ::close(kids.go[1]);
    if (::unshare(CLONE_NEWNS) != 0) child_fail(ready[1], 1);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) child_fail(ready[1], 2);
    if (::mount("overlay", merged.c_str(), "overlay", 0, options.c_str()) != 0) child_fail(ready[1], 3);
    if (!join_cgroup(overlay_procs.c_str())) child_fail(ready[1], 4);  // before chroot: the path is outside
    if (::chroot(merged.c_str()) != 0 || ::chdir("/") != 0) child_fail(ready[1], 5);
    if (::mkdir("/data", 0755) != 0) child_fail(ready[1], 6);
    for (std::size_t i = 0; i < kFiles; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "/data/f%zu", i);
      int fd = ::open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0 || ::write(fd, data, sizeof data) != static_cast<ssize_t>(sizeof data) || ::fsync(fd) != 0) {
        child_fail(ready[1], 7);
      }
      ::close(fd);
    }
    char r = 'R';
    (void)!::write(ready[1], &r, 1);
    char c;
    (void)!::read(kids.go[0], &c, 1);  // until the parent closes go[1] or kills us
    ::_exit(0);
  }
  kids.pids.push_back(ctr);
  char state = wait_ready(ready[0], 10000);
  ASSERT_EQ(state, 'R') << "overlay child failed at step " << static_cast<int>(state)
                        << " (1 unshare, 2 private, 3 mount overlay, 4 join cgroup, 5 chroot, 6 mkdir, 7 write; t timeout)";

  // A process in a container cgroup whose "/" is the host's (not an overlay).
  pid_t plain = ::fork();
  ASSERT_GE(plain, 0);
  if (plain == 0) {
    ::close(ready[0]);
    ::close(kids.go[1]);
    if (!join_cgroup(plain_procs.c_str())) child_fail(ready[1], 4);
    char r = 'R';
    (void)!::write(ready[1], &r, 1);
    char c;
    (void)!::read(kids.go[0], &c, 1);
    ::_exit(0);
  }
  kids.pids.push_back(plain);
  ASSERT_EQ(wait_ready(ready[0], 10000), 'R');
  ::close(ready[0]);
  ::close(ready[1]);

  ObserveConfig c;
  c.cgroup_root = sb.path().substr(mount.size());
  c.kubepods_name = "kubepods";
  c.driver = CgroupDriver::Cgroupfs;
  c.nodefs_path = tmp.path() + "/kubelet";
  c.pod_logs_path = tmp.path() + "/logs";
  c.imagefs_path = runtime_root;
  std::shared_ptr<PodStorageSource> storage = make_pod_storage_source(c);
  storage->walk_now(MonotonicClock().now());

  auto u = storage->lookup(uid);
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->complete);
  const auto& b = u->breakdown;
  auto st = storage->stats().writable_layers;
  ASSERT_TRUE(st.measured) << st.not_measured_reason;
  EXPECT_EQ(b.containers, 3u);
  EXPECT_EQ(b.writable_layers, 1u);
  EXPECT_EQ(b.unresolved_containers, 2u);
  EXPECT_EQ(st.unresolved[static_cast<std::size_t>(LayerFailure::NoPid)], 1u) << "ctr-empty";
  EXPECT_EQ(st.unresolved[static_cast<std::size_t>(LayerFailure::NoOverlayRoot)], 1u) << "ctr-host-root";
  // Exactly what is in the upper dir: fs, data, f0..f4.
  EXPECT_EQ(b.writable_layers_inodes, 2 + kFiles);
  auto [bytes, inodes] = tree_usage(upper);
  EXPECT_EQ(inodes, 2 + kFiles);
  EXPECT_EQ(b.writable_layers_bytes, bytes) << "the same tree measured from outside";
  // Against what the child wrote: at least the data, at most the data plus
  // 8 KiB per inode (directory blocks; an external xattr block where
  // overlayfs' trusted.overlay.* attributes do not fit in the inode).
  const uint64_t written = kFiles * kFileBytes;
  std::printf("writable layer: wrote %llu bytes in %zu files; measured %llu bytes, %llu inodes\n",
              static_cast<unsigned long long>(written), kFiles, static_cast<unsigned long long>(b.writable_layers_bytes),
              static_cast<unsigned long long>(b.writable_layers_inodes));
  EXPECT_GE(b.writable_layers_bytes, written);
  EXPECT_LE(b.writable_layers_bytes, written + (2 + kFiles) * 8192);
  EXPECT_EQ(u->bytes, b.writable_layers_bytes) << "no logs or emptyDir in this pod";

  // The observer carries it into the snapshot.
  auto obs = make_node_observer(c, nullptr, storage);
  ASSERT_TRUE(obs) << obs.error().message;
  auto snapshot = (*obs)->observe(MonotonicClock().now());
  ASSERT_TRUE(snapshot) << snapshot.error().message;
  ASSERT_EQ(snapshot->pods.size(), 1u);
  EXPECT_EQ(snapshot->pods[0].usage.ephemeral_storage_bytes, b.writable_layers_bytes);
  ASSERT_TRUE(snapshot->pods[0].ephemeral_storage);
  EXPECT_EQ(snapshot->pods[0].ephemeral_storage->writable_layers, 1u);

  // The container's process exits: its layer is no longer found (no pid).
  kids.kill_one(ctr);
  storage->walk_now(MonotonicClock().now());
  auto gone = storage->lookup(uid);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->breakdown.writable_layers, 0u);
  EXPECT_EQ(gone->breakdown.writable_layers_bytes, 0u);
  EXPECT_EQ(storage->stats().writable_layers.unresolved[static_cast<std::size_t>(LayerFailure::NoPid)], 2u);
}

}  // namespace
}  // namespace pressured
