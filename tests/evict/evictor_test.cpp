// CgroupEvictor safety and mechanics. The unprivileged tests use fake cgroup
// directories in /tmp holding only this test's own children; the root tests
// use a sandbox memory cgroup (and its v1 freezer mirror).
#include "evict/cgroup_evictor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "fakes/privilege.hpp"
#include "fakes/sandbox_cgroup.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string temp_dir() {
  char tmpl[] = "/tmp/pressured-evict-XXXXXX";
  return ::mkdtemp(tmpl);
}

pid_t sleeper(bool ignore_term = false) {
  pid_t p = ::fork();
  if (p == 0) {
    if (ignore_term) ::signal(SIGTERM, SIG_IGN);
    for (int i = 0; i < 300; ++i) ::usleep(100000);  // 30 s at most
    ::_exit(0);
  }
  return p;
}

// Whether `p` has SIGTERM set to SIG_IGN (bit 15 of SigIgn in /proc/<p>/status).
bool ignores_sigterm(pid_t p) {
  std::ifstream st("/proc/" + std::to_string(p) + "/status");
  for (std::string line; std::getline(st, line);) {
    if (line.rfind("SigIgn:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGTERM - 1)) & 1;
  }
  return false;
}

// A forked child installs its SIG_IGN when it first runs: on a loaded machine later.
bool wait_ignores_sigterm(pid_t p, std::chrono::milliseconds limit = 5000ms) {
  for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
    if (ignores_sigterm(p)) return true;
    std::this_thread::sleep_for(5ms);
  }
  return ignores_sigterm(p);
}

// Our child, running (not exited, not a zombie). Robust to SIGCHLD being
// ignored by whoever started the test (children are then reaped at once).
bool alive(pid_t p) {
  if (::waitpid(p, nullptr, WNOHANG) != 0) return false;
  std::ifstream st("/proc/" + std::to_string(p) + "/stat");
  std::string text((std::istreambuf_iterator<char>(st)), {});
  auto close = text.rfind(')');
  return close != std::string::npos && text.size() > close + 2 && text[close + 2] != 'Z';
}

// A spawned child moves itself into its cgroup: on a loaded machine that can
// take longer than a fixed sleep.
bool wait_member(const std::string& cgroup_dir, pid_t p, std::chrono::milliseconds limit = 5000ms) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream in(cgroup_dir + "/cgroup.procs");
    long q;
    while (in >> q) {
      if (q == p) return true;
    }
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

bool wait_dead(pid_t p, std::chrono::milliseconds limit = 3000ms) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    pid_t w = ::waitpid(p, nullptr, WNOHANG);
    if (w == p || (w < 0 && errno == ECHILD)) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST(EvictorSafety, KernelThreadDetection) {
  // flags field (9th) with PF_KTHREAD; comm with spaces and parentheses.
  EXPECT_TRUE(is_kernel_thread("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0", ""));
  EXPECT_TRUE(is_kernel_thread("57 (kworker/0:1-events) I 2 0 0 0 -1 69238880 0", ""));
  EXPECT_FALSE(is_kernel_thread("1234 (my (odd) app) S 1 1234 1234 0 -1 4194560 0", std::string("app\0", 4)));
  EXPECT_TRUE(is_kernel_thread("1235 (weird) S 2 0 0 0 -1 0 0", ""));  // empty cmdline, child of kthreadd
  EXPECT_FALSE(is_kernel_thread("garbage", ""));
  std::ifstream self("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(self)), {});
  EXPECT_FALSE(is_kernel_thread(text, "x"));
}

TEST(EvictorSafety, ThawsOnlyTheRestoredVictimsLeftFrozen) {
  // A fake v1 layout: memory and freezer hierarchies side by side.
  std::string d = temp_dir();
  for (const char* h : {"memory", "freezer"}) {
    for (const char* pod : {"podA", "podA/c1", "podB"}) fs::create_directories(d + "/" + h + "/kubepods/besteffort/" + pod);
  }
  auto state = [&](const std::string& rel) { return d + "/freezer/kubepods/besteffort/" + rel + "/freezer.state"; };
  std::ofstream(state("podA")) << "FROZEN\n";
  std::ofstream(state("podA/c1")) << "FREEZING\n";
  std::ofstream(state("podB")) << "FROZEN\n";  // paused by its runtime, not ours
  CgroupEvictorOptions o;
  o.hierarchy_mount = d + "/memory";
  o.pods_root = d + "/memory/kubepods";
  o.freezer_mount = d + "/freezer";
  CgroupEvictor ev(o);
  EXPECT_EQ(ev.thaw_leftovers({d + "/memory/kubepods/besteffort/podA", d + "/memory/elsewhere"}), 2u);
  auto read = [](const std::string& p) {
    std::ifstream in(p);
    std::string s;
    std::getline(in, s);
    return s;
  };
  EXPECT_EQ(read(state("podA")), "THAWED");
  EXPECT_EQ(read(state("podA/c1")).rfind("THAWED", 0), 0u);  // a fake file: written over, not truncated
  EXPECT_EQ(read(state("podB")), "FROZEN");
  o.freezer_mount.clear();
  EXPECT_EQ(CgroupEvictor(o).thaw_leftovers({d + "/memory/kubepods/besteffort/podB"}), 0u) << "no freezer: nothing";
  fs::remove_all(d);
}

TEST(EvictorSafety, RefusesTargetsOutsideThePodsRoot) {
  std::string d = temp_dir();
  fs::create_directories(d + "/kubepods/besteffort/podA");
  fs::create_directories(d + "/other/podB");
  fs::create_directory_symlink(d + "/other/podB", d + "/kubepods/besteffort/podEscape");
  std::string root = d + "/kubepods";
  EXPECT_TRUE(contained_path(root, root + "/besteffort/podA").ok());
  EXPECT_FALSE(contained_path(root, root).ok()) << "the root itself is never a target";
  EXPECT_FALSE(contained_path(root, d + "/other/podB").ok());
  EXPECT_FALSE(contained_path(root, root + "/besteffort/../../other/podB").ok());
  EXPECT_FALSE(contained_path(root, root + "/besteffort/podEscape").ok()) << "symlink escaping the root";
  EXPECT_FALSE(contained_path(root, "relative/path").ok());
  EXPECT_FALSE(contained_path(root + "x", root + "x/../kubepods/besteffort/podA").ok());
  // A sibling whose name starts with the root's name is outside.
  fs::create_directories(d + "/kubepods-evil/podC");
  EXPECT_FALSE(contained_path(root, d + "/kubepods-evil/podC").ok());

  CgroupEvictorOptions o;
  o.pods_root = root;
  CgroupEvictor ev(o);
  EvictionTarget t;
  t.cgroup_path = d + "/other/podB";
  EXPECT_FALSE(ev.validate(t).ok());
  EXPECT_FALSE(ev.terminate(t).ok());
  EXPECT_FALSE(ev.kill(t).ok());
  CgroupEvictor unconfigured(CgroupEvictorOptions{});
  t.cgroup_path = root + "/besteffort/podA";
  EXPECT_FALSE(unconfigured.validate(t).ok()) << "no pods root: refuse everything";
  fs::remove_all(d);
}

TEST(EvictorSafety, NeverSignalsItselfNorKernelThreads) {
  std::string d = temp_dir();
  fs::create_directories(d + "/kubepods/podA");
  pid_t child = sleeper();
  // A fake proc root where our child looks like a kernel thread.
  fs::create_directories(d + "/proc/" + std::to_string(child));
  std::ofstream(d + "/proc/" + std::to_string(child) + "/stat")
      << child << " (kworker/0:0) I 2 0 0 0 -1 69238880 0 0\n";
  std::ofstream(d + "/proc/" + std::to_string(child) + "/cmdline") << "";
  std::ofstream(d + "/kubepods/podA/cgroup.procs") << ::getpid() << "\n" << child << "\n";
  CgroupEvictorOptions o;
  o.pods_root = d + "/kubepods";
  o.proc_root = d + "/proc";
  o.empty_wait = 50ms;
  CgroupEvictor ev(o);
  EvictionTarget t;
  t.cgroup_path = d + "/kubepods/podA";
  auto r = ev.kill(t);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->signalled, 0u);
  EXPECT_GE(r->skipped_unsafe, 2u);
  EXPECT_FALSE(r->empty);
  EXPECT_TRUE(alive(child));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  fs::remove_all(d);
}

TEST(EvictorSafety, SignalsItsOwnChildrenThroughPidfds) {
  std::string d = temp_dir();
  fs::create_directories(d + "/kubepods/podA");
  pid_t a = sleeper(), b = sleeper(/*ignore_term=*/true);
  ASSERT_TRUE(wait_ignores_sigterm(b));
  std::ofstream(d + "/kubepods/podA/cgroup.procs") << a << "\n" << b << "\n";
  CgroupEvictorOptions o;
  o.pods_root = d + "/kubepods";
  CgroupEvictor ev(o);
  EvictionTarget t;
  t.cgroup_path = d + "/kubepods/podA";
  auto r = ev.terminate(t);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->signalled, 2u);
  EXPECT_TRUE(wait_dead(a));
  EXPECT_TRUE(alive(b)) << "ignores SIGTERM";
  auto k = ev.kill(t);  // the fake cgroup.procs never empties: bounded wait
  ASSERT_TRUE(k.ok());
  EXPECT_TRUE(wait_dead(b));
  fs::remove_all(d);
}

// --- root: real cgroups ------------------------------------------------------

struct PodSandbox {
  std::string mount = testing::SandboxCgroup::find_memory_mount();
  std::unique_ptr<testing::SandboxCgroup> mem, freezer;
  explicit PodSandbox(const std::string& tag) {
    mem = std::make_unique<testing::SandboxCgroup>(mount, tag);
    if (mount == "/sys/fs/cgroup/memory" && fs::exists("/sys/fs/cgroup/freezer/cgroup.procs")) {
      freezer = std::make_unique<testing::SandboxCgroup>("/sys/fs/cgroup/freezer", tag);
    }
  }
  bool make(const std::string& rel) { return mem->make(rel) && (!freezer || freezer->make(rel)); }
  pid_t spawn(const std::string& rel, bool ignore_term, bool fork_child) {
    pid_t p = ::fork();
    if (p == 0) {
      std::string me = std::to_string(::getpid());
      int fd = ::open((mem->path(rel) + "/cgroup.procs").c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, me.data(), me.size()) < 0) ::_exit(126);
      ::close(fd);
      if (freezer) {
        fd = ::open((freezer->path(rel) + "/cgroup.procs").c_str(), O_WRONLY);
        if (fd >= 0 && ::write(fd, me.data(), me.size()) < 0) ::_exit(126);
        if (fd >= 0) ::close(fd);
      }
      if (ignore_term) ::signal(SIGTERM, SIG_IGN);
      if (fork_child && ::fork() == 0) {
        for (int i = 0; i < 300; ++i) ::usleep(100000);
        ::_exit(0);
      }
      for (int i = 0; i < 300; ++i) ::usleep(100000);
      ::_exit(0);
    }
    return p;
  }
  CgroupEvictor evictor() {
    CgroupEvictorOptions o;
    o.pods_root = mem->path("kubepods");
    o.hierarchy_mount = mount;
    if (freezer) o.freezer_mount = "/sys/fs/cgroup/freezer";
    return CgroupEvictor(o);
  }
};

TEST(EvictorHost, FreezesKillsTheWholeTreeAndConfirmsEmpty) {
  PRESSURED_REQUIRE_ROOT();
  PodSandbox sb("evict-freeze");
  PRESSURED_REQUIRE(sb.mem->ok(), "a memory cgroup sandbox: " + sb.mem->error());
  ASSERT_TRUE(sb.make("kubepods/besteffort/podx"));
  pid_t p = sb.spawn("kubepods/besteffort/podx", /*ignore_term=*/true, /*fork_child=*/true);
  auto ev = sb.evictor();
  EvictionTarget t;
  t.cgroup_path = sb.mem->path("kubepods/besteffort/podx");
  // The grandchild (SIG_IGN inherited) appears once the child has run: a loaded host is slow.
  for (int i = 0; i < 500 && CgroupEvictor::processes(t.cgroup_path).size() < 2; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(CgroupEvictor::processes(t.cgroup_path).size(), 2u);
  auto term = ev.terminate(t);
  ASSERT_TRUE(term.ok()) << term.error().message;
  EXPECT_EQ(term->signalled, 2u);
  std::this_thread::sleep_for(100ms);  // a window for SIGTERM to (wrongly) kill them
  EXPECT_FALSE(*ev.is_empty(t)) << "both ignore SIGTERM";
  auto k = ev.kill(t);
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_TRUE(k->empty);
  EXPECT_EQ(k->froze, sb.freezer != nullptr);
  EXPECT_TRUE(*ev.is_empty(t));
  EXPECT_TRUE(wait_dead(p));
  if (sb.freezer) {
    EXPECT_EQ(sb.freezer->read("kubepods/besteffort/podx", "freezer.state"), "THAWED\n");
  }
}

// A containerised daemon runs in its own cgroup namespace: /proc/<pid>/cgroup
// then reads "/../kubepods/..." for a pod. The daemon (a forked child here)
// moves to a sibling cgroup and unshares its cgroup namespace, as a DaemonSet
// pod is on cgroup v2 nodes; it must still signal the pod, and on every pass.
TEST(EvictorHost, SignalsPodsFromItsOwnCgroupNamespace) {
  PRESSURED_REQUIRE_ROOT();
  PodSandbox sb("evict-cgns");
  PRESSURED_REQUIRE(sb.mem->ok(), "a memory cgroup sandbox: " + sb.mem->error());
  ASSERT_TRUE(sb.make("kubepods/besteffort/podz"));
  ASSERT_TRUE(sb.make("daemon"));
  pid_t victim = sb.spawn("kubepods/besteffort/podz", /*ignore_term=*/false, /*fork_child=*/false);
  ASSERT_TRUE(wait_member(sb.mem->path("kubepods/besteffort/podz"), victim));
  EvictionTarget t;
  t.cgroup_path = sb.mem->path("kubepods/besteffort/podz");
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  pid_t daemon = ::fork();
  if (daemon == 0) {
    ::close(pipefd[0]);
    std::string me = std::to_string(::getpid());
    int fd = ::open((sb.mem->path("daemon") + "/cgroup.procs").c_str(), O_WRONLY);
    if (fd < 0 || ::write(fd, me.data(), me.size()) < 0) ::_exit(120);
    ::close(fd);
    if (sb.freezer) {
      fd = ::open((sb.freezer->path("daemon") + "/cgroup.procs").c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, me.data(), me.size()) < 0) ::_exit(121);
      ::close(fd);
    }
    if (::unshare(CLONE_NEWCGROUP) != 0) ::_exit(122);
    std::ifstream own("/proc/" + std::to_string(victim) + "/cgroup");
    std::string text((std::istreambuf_iterator<char>(own)), {});
    if (text.find("/..") == std::string::npos) ::_exit(123);  // not really namespaced
    auto ev = sb.evictor();
    auto term = ev.terminate(t);
    std::size_t n = term ? term->signalled : 999;
    auto k = ev.kill(t);
    std::size_t empty = (k && k->empty) ? 1 : 0;
    char out[64];
    int len = std::snprintf(out, sizeof out, "%zu %zu", n, empty);
    if (::write(pipefd[1], out, len) < 0) ::_exit(124);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(daemon, &status, 0), daemon);
  char buf[64] = {};
  ssize_t got = ::read(pipefd[0], buf, sizeof buf - 1);
  ::close(pipefd[0]);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "daemon child status " << status;
  ASSERT_GT(got, 0);
  std::size_t signalled = 99, empty = 0;
  ASSERT_EQ(std::sscanf(buf, "%zu %zu", &signalled, &empty), 2);
  EXPECT_EQ(signalled, 1u) << "SIGTERM must reach the pod from another cgroup namespace";
  EXPECT_EQ(empty, 1u);
  EXPECT_TRUE(wait_dead(victim));
}

// cgroup v1: the kill pass walks the pod's freezer cgroup, whose members need
// not be the pod's: a process the freezer hierarchy lists there but the memory
// hierarchy (the pods root) puts elsewhere is not the pod's to kill.
TEST(EvictorHost, FreezerPassKillsOnlyMembersOfThePodsMemoryCgroup) {
  PRESSURED_REQUIRE_ROOT();
  PodSandbox sb("evict-frzmember");
  PRESSURED_REQUIRE(sb.mem->ok(), "a memory cgroup sandbox: " + sb.mem->error());
  if (!sb.freezer) GTEST_SKIP() << "cgroup v1 freezer only (v2 kills through cgroup.kill)";
  ASSERT_TRUE(sb.freezer->ok()) << sb.freezer->error();
  ASSERT_TRUE(sb.make("kubepods/besteffort/podf"));
  ASSERT_TRUE(sb.make("other"));
  pid_t victim = sb.spawn("kubepods/besteffort/podf", /*ignore_term=*/true, /*fork_child=*/false);
  pid_t bystander = ::fork();
  if (bystander == 0) {
    std::string me = std::to_string(::getpid());
    int fd = ::open((sb.mem->path("other") + "/cgroup.procs").c_str(), O_WRONLY);
    if (fd < 0 || ::write(fd, me.data(), me.size()) < 0) ::_exit(126);
    ::close(fd);
    fd = ::open((sb.freezer->path("kubepods/besteffort/podf") + "/cgroup.procs").c_str(), O_WRONLY);
    if (fd < 0 || ::write(fd, me.data(), me.size()) < 0) ::_exit(126);
    ::close(fd);
    for (int i = 0; i < 300; ++i) ::usleep(100000);
    ::_exit(0);
  }
  ASSERT_TRUE(wait_member(sb.mem->path("kubepods/besteffort/podf"), victim));
  ASSERT_TRUE(wait_member(sb.freezer->path("kubepods/besteffort/podf"), bystander));
  ASSERT_TRUE(wait_member(sb.mem->path("other"), bystander));
  auto ev = sb.evictor();
  EvictionTarget t;
  t.cgroup_path = sb.mem->path("kubepods/besteffort/podf");
  auto k = ev.kill(t);
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_TRUE(k->froze);
  EXPECT_TRUE(wait_dead(victim));
  std::this_thread::sleep_for(200ms);  // a window for a stray SIGKILL to land
  EXPECT_TRUE(alive(bystander)) << "killed through the freezer cgroup although not in the pod";
  ::kill(bystander, SIGKILL);
  ::waitpid(bystander, nullptr, 0);
}

TEST(EvictorHost, PodCgroupVanishingMidEvictionIsNotAnError) {
  PRESSURED_REQUIRE_ROOT();
  PodSandbox sb("evict-vanish");
  PRESSURED_REQUIRE(sb.mem->ok(), "a memory cgroup sandbox: " + sb.mem->error());
  ASSERT_TRUE(sb.make("kubepods/besteffort/pody"));
  pid_t p = sb.spawn("kubepods/besteffort/pody", false, false);
  ASSERT_TRUE(wait_member(sb.mem->path("kubepods/besteffort/pody"), p));
  auto ev = sb.evictor();
  EvictionTarget t;
  t.cgroup_path = sb.mem->path("kubepods/besteffort/pody");
  ASSERT_TRUE(ev.terminate(t).ok());
  ASSERT_TRUE(wait_dead(p));  // the victim exits by itself
  for (int i = 0; i < 100 && ::rmdir(t.cgroup_path.c_str()) != 0; ++i) std::this_thread::sleep_for(10ms);
  if (sb.freezer) ::rmdir(sb.freezer->path("kubepods/besteffort/pody").c_str());
  auto k = ev.kill(t);
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_TRUE(k->cgroup_vanished);
  EXPECT_TRUE(k->empty);
  EXPECT_TRUE(*ev.is_empty(t));
  // Outside the pods root, in the same sandbox: refused.
  ASSERT_TRUE(sb.make("elsewhere"));
  t.cgroup_path = sb.mem->path("elsewhere");
  EXPECT_FALSE(ev.kill(t).ok());
}

// daemon.releaseVictimMemory: the killed victim's memory is reaped by the
// kill itself (process_mrelease(2)), not when its exit path gets to it.
TEST(EvictorHost, ReleasesAKilledVictimsMemoryAtOnce) {
  PRESSURED_REQUIRE_ROOT();
  PodSandbox sb("evict-mrelease");
  PRESSURED_REQUIRE(sb.mem->ok(), "a memory cgroup sandbox: " + sb.mem->error());
  const std::string rel = "kubepods/besteffort/podm";
  ASSERT_TRUE(sb.make(rel));
  const std::string usage_file = sb.mem->v2() ? "memory.current" : "memory.usage_in_bytes";
  auto usage = [&] {
    auto text = sb.mem->read(rel, usage_file);
    return text.empty() ? 0ull : std::stoull(text);
  };
  constexpr std::size_t kHog = 128u << 20;
  enum class Mode { Off, Here, Worker };
  for (Mode mode : {Mode::Off, Mode::Here, Mode::Worker}) {
    const bool release = mode != Mode::Off;
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t p = ::fork();
    if (p == 0) {
      ::close(ready[0]);
      std::string me = std::to_string(::getpid());
      for (auto* cg : {sb.mem.get(), sb.freezer.get()}) {
        if (cg != nullptr && !cg->write(rel, "cgroup.procs", me)) ::_exit(126);
      }
      void* m = ::mmap(nullptr, kHog, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) ::_exit(1);
      for (std::size_t off = 0; off < kHog; off += 4096) static_cast<volatile char*>(m)[off] = 1;
      (void)!::write(ready[1], "r", 1);
      for (int i = 0; i < 300; ++i) ::usleep(100000);
      ::_exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the hog did not start";
    ::close(ready[0]);
    ASSERT_GE(usage(), kHog);
    CgroupEvictorOptions o = sb.evictor().options();
    o.empty_wait = Duration::zero();  // as the daemon: return once the signals are sent
    o.release_memory = release;
    o.release_on_worker = mode == Mode::Worker;
    CgroupEvictor ev(o);
    EvictionTarget t;
    t.cgroup_path = sb.mem->path(rel);
    auto k = ev.kill(t);
    ASSERT_TRUE(k.ok()) << k.error().message;
    EXPECT_GE(k->signalled, 1u);  // v1: the freezer pass signals it again
    PRESSURED_REQUIRE(!k->release_unsupported, "process_mrelease(2) (Linux 5.15+)");
    if (mode == Mode::Worker) {
      // Handed to the reaper thread, which reaps (while frozen on v1) and
      // thaws: the memory comes back and the victim exits, without kill()
      // waiting for either.
      EXPECT_EQ(k->memory_released, 1u);
      for (int i = 0; i < 500 && usage() >= kHog / 4; ++i) std::this_thread::sleep_for(10ms);
      EXPECT_LT(usage(), kHog / 4) << "the reaper thread did not give the victim's memory back";
      EXPECT_TRUE(wait_dead(p)) << "the victim was not thawed after its reaping";
      if (sb.freezer) {
        // Frozen until reaped: its own exit could not race the reaper.
        for (int i = 0; i < 300 && ev.reaped_on_worker() < 1; ++i) std::this_thread::sleep_for(10ms);
        EXPECT_EQ(ev.reaped_on_worker(), 1u);
        EXPECT_EQ(sb.freezer->read(rel, "freezer.state"), "THAWED\n");
      }
    } else if (release && sb.freezer) {
      // Reaped while frozen, before kill() returned: the hog's pages are uncharged already.
      EXPECT_EQ(k->memory_released, 1u);
      EXPECT_LT(usage(), kHog / 4) << "the victim's memory was not back when the kill returned";
    } else if (release) {
      // v2, nothing frozen: the victim's own exit may drop its memory first (ESRCH).
      EXPECT_LE(k->memory_released, 1u);
    } else {
      EXPECT_EQ(k->memory_released, 0u);
    }
    EXPECT_TRUE(wait_dead(p));
    for (int i = 0; i < 300 && !*ev.is_empty(t); ++i) std::this_thread::sleep_for(10ms);
  }
}

}  // namespace
}  // namespace pressured
