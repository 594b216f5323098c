// Host integration (root): a memory-medium emptyDir is a tmpfs mount below
// the pod's empty-dir root. The storage walker must measure it on its own for
// its sizeLimit, and leave it out of the pod's disk total (the kubelet counts
// its pages as memory).
//
// Safety: the tmpfs (size=16m) is mounted only in a child's private mount
// namespace, so it disappears with the child; the walker reaches it through
// /proc/<child>/root. The child is killed and reaped on every path, it exits
// by itself after 60 s anyway, and the temporary directory is removed.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "engine/local_storage.hpp"
#include "fakes/privilege.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMiB = 1 << 20;

// The child holding the tmpfs, killed and reaped on every path.
struct MountHolder {
  pid_t pid = -1;
  ~MountHolder() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// Child side: async-signal-safe calls only after fork. Reports one byte:
// 'k' when the tmpfs is mounted and filled, else the failed step.
[[noreturn]] void hold_tmpfs(const char* mountpoint, const char* file, int ready_fd) {
  auto fail = [&](char step) {
    (void)!::write(ready_fd, &step, 1);
    ::_exit(100 + step);
  };
  ::alarm(60);  // bounded even if the parent never kills it
  if (::unshare(CLONE_NEWNS) != 0) fail('u');
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail('p');
  if (::mount("tmpfs", mountpoint, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m") != 0) fail('m');
  int fd = ::open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail('o');
  static char chunk[64 * 1024];
  for (char& c : chunk) c = 'x';
  for (uint64_t written = 0; written < 3 * kMiB; written += sizeof chunk) {
    if (::write(fd, chunk, sizeof chunk) != static_cast<ssize_t>(sizeof chunk)) fail('w');
  }
  ::close(fd);
  char ok = 'k';
  (void)!::write(ready_fd, &ok, 1);
  for (;;) ::pause();
}

TEST(StorageHost, MemoryMediumEmptyDirIsMeasuredForItsSizeLimitOnly) {
  PRESSURED_REQUIRE_ROOT();
  char tmpl[] = "/tmp/pressured-tmpfs-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { fs::remove_all(dir); }
  } cleanup{dir};
  const std::string uid = "77777777-0000-4000-8000-000000000001";
  const std::string volumes = dir + "/nodefs/pods/" + uid + "/volumes/kubernetes.io~empty-dir";
  fs::create_directories(volumes + "/disk");
  fs::create_directories(volumes + "/mem");
  fs::create_directories(dir + "/logs");
  fs::create_directories(dir + "/cgroup");  // an empty cgroup mount: no container, no layer
  {
    std::ofstream out(volumes + "/disk/data", std::ios::binary);
    const std::string chunk(kMiB, 'x');
    out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  }

  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  const std::string mountpoint = volumes + "/mem", file = mountpoint + "/data";
  MountHolder holder;
  holder.pid = ::fork();
  ASSERT_GE(holder.pid, 0);
  if (holder.pid == 0) hold_tmpfs(mountpoint.c_str(), file.c_str(), ready[1]);
  ::close(ready[1]);
  pollfd p{ready[0], POLLIN, 0};
  char got = 0;
  const bool answered = ::poll(&p, 1, 10000) == 1 && ::read(ready[0], &got, 1) == 1;
  ::close(ready[0]);
  ASSERT_TRUE(answered) << "the child did not report within 10 s";
  ASSERT_EQ(got, 'k') << "the child failed at step '" << got << "' (u: unshare, p: private, m: mount, o/w: file)";

  ObserveConfig cfg;
  cfg.nodefs_path = "/proc/" + std::to_string(holder.pid) + "/root" + dir + "/nodefs";
  cfg.pod_logs_path = dir + "/logs";
  cfg.imagefs_path = dir + "/imagefs";  // absent: no runtime root, layers not measured
  cfg.cgroup_mount = dir + "/cgroup";
  cfg.proc_root = "/proc";
  auto storage = make_pod_storage_source(cfg);
  storage->walk_now(TimePoint(std::chrono::seconds(1)));
  auto u = storage->lookup(uid);
  ASSERT_TRUE(u) << "the pod's emptyDir was not walked";
  const auto& vols = u->breakdown.empty_dir_volumes;
  auto find = [&](const std::string& name) -> const NamedStorageUsage* {
    for (const auto& v : vols) {
      if (v.name == name) return &v;
    }
    return nullptr;
  };
  const NamedStorageUsage* disk = find("disk");
  const NamedStorageUsage* mem = find("mem");
  ASSERT_NE(disk, nullptr);
  ASSERT_NE(mem, nullptr) << "the tmpfs volume was not measured";
  EXPECT_GE(disk->bytes, kMiB);
  EXPECT_LT(disk->bytes, 2 * kMiB);
  EXPECT_GE(mem->bytes, 3 * kMiB) << "the tmpfs volume holds 3 MiB";
  EXPECT_LT(mem->bytes, 4 * kMiB);
  EXPECT_LT(u->bytes, 2 * kMiB) << "tmpfs pages are memory: not in the pod's disk total";
  EXPECT_LT(u->breakdown.empty_dir_bytes, 2 * kMiB);

  // Its sizeLimit is enforced like any emptyDir's.
  Pod pod;
  pod.uid = uid;
  pod.name = "mem";
  pod.namespace_ = "t";
  pod.metadata_known = true;
  pod.usage.ephemeral_storage_bytes = u->bytes;
  pod.ephemeral_storage = u->breakdown;
  pod.local_storage.empty_dirs = {{"disk", 4 * kMiB}, {"mem", 2 * kMiB}};
  auto v = local_storage_violation(pod, {});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, LocalStorageRule::EmptyDir);
  EXPECT_EQ(v->subject, "mem");
  EXPECT_EQ(v->message, "Usage of EmptyDir volume \"mem\" exceeds the limit \"2Mi\". ");
}

}  // namespace
}  // namespace pressured
