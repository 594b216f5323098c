// Relief on a real cgroup v2 memory controller: the daemon (real observer,
// engine, relief stage, worker and memory.reclaim writer; a recording
// evictor) on a sandbox kubepods tree with a memory limit on the sandbox
// only. Root, a v2 hierarchy with the memory controller and a disk-backed
// file system for page cache (the VM's v2 guest: vmtests/run --gtest
// test_relief, which mounts its scratch disk at /scratch). The test host's
// v2 hierarchy has no memory controller: skipped loudly there.
//
// Every workload is a child of this process, bounded in size and time, and
// lives in the sandbox, which the destructor kills and removes.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "daemon/daemon.hpp"
#include "fakes/privilege.hpp"
#include "fakes/sandbox_cgroup.hpp"
#include "pressured/evictor.hpp"
#include "pressured/observer.hpp"
#include "relief/cgroup_reclaim.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kMiB = 1 << 20;
const std::string kScratch = "/scratch";

uint64_t stat_key(const std::string& cgroup, const std::string& key) {
  std::ifstream in(cgroup + "/memory.stat");
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// Forks a child that waits until it is in `rel`, then runs `job` and exits.
pid_t fork_into(testing::SandboxCgroup& sb, const std::string& rel, const std::function<void()>& job) {
  int go[2];
  if (::pipe(go) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(go[1]);
    char c = 0;
    if (::read(go[0], &c, 1) != 1) ::_exit(2);
    job();
    ::_exit(0);
  }
  ::close(go[0]);
  const bool moved = pid > 0 && sb.move(rel, pid);
  const char c = moved ? 1 : 0;
  (void)::write(go[1], &c, 1);
  ::close(go[1]);
  return moved ? pid : -1;
}

// Writes `mib` MiB to `path`, syncs it, reads it twice (page cache made
// active, charged to the caller's cgroup), then sleeps (bounded) without
// touching it again.
void write_and_reread(const std::string& path, uint64_t mib, int hold_s) {
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) ::_exit(3);
  std::vector<char> buf(kMiB, 'x');
  for (uint64_t i = 0; i < mib; ++i) {
    if (::write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) ::_exit(4);
  }
  ::fsync(fd);
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t i = 0; i < mib; ++i) {
      if (::pread(fd, buf.data(), buf.size(), static_cast<off_t>(i * kMiB)) <= 0) ::_exit(5);
    }
  }
  ::close(fd);
  ::sleep(static_cast<unsigned>(hold_s));
}

// Grows anonymous memory by `step` MiB every 50 ms up to `max` MiB, then holds (bounded).
void grow_anon(uint64_t step, uint64_t max, int hold_s) {
  std::vector<void*> held;
  for (uint64_t total = 0; total < max; total += step) {
    void* p = ::mmap(nullptr, step * kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) break;
    std::memset(p, 1, step * kMiB);
    held.push_back(p);
    ::usleep(50 * 1000);
  }
  ::sleep(static_cast<unsigned>(hold_s));
}

struct V2Node {
  std::string why;  // before mount: filled while mount is initialised
  std::string mount;
  std::unique_ptr<testing::SandboxCgroup> sb;
  std::string state_file;

  explicit V2Node(const std::string& tag) : mount(testing::SandboxCgroup::find_v2_memory_mount(&why)) {
    if (!mount.empty()) sb = std::make_unique<testing::SandboxCgroup>(mount, tag);
    state_file = "/tmp/pressured-relief-state-" + std::to_string(::getpid()) + "-" + tag + ".json";
  }
  ~V2Node() { std::filesystem::remove(state_file); }

  bool setup(uint64_t limit_mib) {
    return sb && sb->ok() && sb->make_with("kubepods/burstable/podrelief-cache-0001/c") &&
           sb->make_with("kubepods/besteffort/podrelief-anon-0002/c") && sb->set_memory_max("kubepods", limit_mib * kMiB);
  }

  Config config() const {
    Config c;
    c.observe.cgroup_mount = mount;
    c.observe.cgroup_root = sb->path().substr(mount.size());
    c.observe.kubepods_name = "kubepods";
    c.observe.driver = CgroupDriver::Cgroupfs;
    c.daemon.state_file = state_file;
    c.daemon.lock_memory = false;
    return c;
  }
};

// The daemon as the tests run it on a V2Node: the real observer, relief stage
// and memory.reclaim writer, and an evictor that only records. `daemon` is
// null (and `error` says why) when the observer cannot be made.
struct DaemonOnV2Node {
  CgroupReclaimWriter writer;
  RecordingEvictor evictor;
  std::unique_ptr<NodeObserver> observer;
  std::unique_ptr<Daemon> daemon;  // last: stopped before what it uses
  std::string error;

  // `reclaim`: what the daemon writes memory.reclaim through (null: `writer`).
  DaemonOnV2Node(const V2Node& node, const Config& c, ReclaimWriter* reclaim = nullptr)
      : writer(node.sb->path("kubepods")) {
    auto obs = make_node_observer(c.observe);
    if (!obs) {
      error = obs.error().message;
      return;
    }
    observer = std::move(*obs);
    DaemonDeps deps;
    deps.observer = observer.get();
    deps.evictor = &evictor;
    deps.reclaim = reclaim != nullptr ? reclaim : &writer;
    daemon = std::make_unique<Daemon>(c, deps);
  }
};

const char* const kCachePod = "kubepods/burstable/podrelief-cache-0001";

// Forks the cache pod's reader (240 MiB of `file`, written, read twice, then
// held) and waits, bounded, until the two passes are done: its active page
// cache near the file's size (or the kernel keeps it inactive). Returns the
// reader's pid; not above 0: it did not start.
pid_t start_cache_reader(V2Node& node, const std::string& file) {
  const pid_t reader = fork_into(*node.sb, std::string(kCachePod) + "/c", [&] { write_and_reread(file, 240, 120); });
  if (reader <= 0) return reader;
  const std::string path = node.sb->path(kCachePod);
  for (int i = 0; i < 600 && stat_key(path, "active_file") < 200 * kMiB; ++i) std::this_thread::sleep_for(100ms);
  return reader;
}

Threshold allocatable(ThresholdKind kind, uint64_t mib, uint64_t min_reclaim_mib, Duration grace = {}) {
  Threshold t;
  t.signal = Signal::AllocatableMemoryAvailable;
  t.kind = kind;
  t.value = ThresholdValue{ThresholdValue::Kind::Quantity, static_cast<double>(mib * kMiB), 0};
  t.min_reclaim = ThresholdValue{ThresholdValue::Kind::Quantity, static_cast<double>(min_reclaim_mib * kMiB), 0};
  t.grace_period = grace;
  return t;
}

bool v2_required() {
  const char* v = std::getenv("PRESSURED_REQUIRE_CGROUP_V2");
  return v != nullptr && std::string(v) == "1";
}

// A host whose memory controller is on v1 cannot provide these tests (and
// must not be changed to): they skip loudly there even as root, and the VM's
// v2 guest runs them (CTest vmtests_relief_v2), where `vmtests/run --gtest`
// sets PRESSURED_REQUIRE_CGROUP_V2=1 and a missing controller fails.
#define REQUIRE_V2(node)                                                                                 \
  do {                                                                                                   \
    PRESSURED_REQUIRE_ROOT();                                                                            \
    if ((node).mount.empty()) {                                                                          \
      if (v2_required()) FAIL() << "required for this test but missing: cgroup v2 memory controller: "  \
                                << (node).why;                                                           \
      GTEST_SKIP() << "SKIPPED, missing: cgroup v2 memory controller (" << (node).why                    \
                   << "); runs in the VM's v2 guest (ctest -R vmtests_relief_v2)";                       \
    }                                                                                                    \
  } while (0)

// What the page-cache tests need besides a v2 memory controller: a
// disk-backed /scratch for the reader's file, the sandbox set up with 384Mi
// for the pods, and memory.reclaim.
#define REQUIRE_PAGE_CACHE_NODE(node)                                                                         \
  do {                                                                                                       \
    REQUIRE_V2(node);                                                                                        \
    if (HasFatalFailure() || IsSkipped()) return;                                                            \
    struct stat scratch {};                                                                                  \
    PRESSURED_REQUIRE(::stat((kScratch + "/.").c_str(), &scratch) == 0 && ::access(kScratch.c_str(), W_OK) == 0, \
                      "a disk-backed file system at /scratch (the VM guest's scratch disk)");                \
    ASSERT_TRUE((node).setup(384)) << (node).sb->error();                                                    \
    PRESSURED_REQUIRE(memory_reclaim_available((node).sb->path("kubepods")), "memory.reclaim (Linux 5.19+)"); \
  } while (0)

TEST(V2Relief, APodWhosePageCacheMeetsTheThresholdIsNotEvictedAndItsCacheShrinks) {
  V2Node node("relief-cache");
  REQUIRE_PAGE_CACHE_NODE(node);

  const std::string file = kScratch + "/relief-" + std::to_string(::getpid()) + ".dat";
  ASSERT_GT(start_cache_reader(node, file), 0);
  const std::string pod_path = node.sb->path(kCachePod);
  const uint64_t active_before = stat_key(pod_path, "active_file");
  if (active_before < 200 * kMiB && stat_key(pod_path, "inactive_file") >= 200 * kMiB) {
    // Multi-gen LRU (e.g. Debian's 6.12): read() cache stays in the oldest
    // generation, reported as inactive_file, which memory.available counts
    // as free already: there is no false pressure to relieve. Still probe
    // what the kernel says of "swappiness=0" (one page).
    CgroupReclaimWriter probe(node.sb->path("kubepods"));
    auto r = probe.reclaim(pod_path, 4096);
    std::printf("[ measured ] relief cache: read() cache stays inactive (%.1fMi inactive_file, %.1fMi active); "
                "one-page reclaim %s, swappiness=0 %s\n",
                static_cast<double>(stat_key(pod_path, "inactive_file")) / kMiB,
                static_cast<double>(active_before) / kMiB, r ? "ok" : r.error().message.c_str(),
                probe.swappiness() == CgroupReclaimWriter::Swappiness::Accepted ? "accepted" : "refused");
    std::filesystem::remove(file);
    GTEST_SKIP() << "SKIPPED: this kernel keeps read() page cache inactive (multi-gen LRU): memory.available "
                    "already counts it free, so no threshold is met by it";
  }
  ASSERT_GE(active_before, 200 * kMiB) << "the reader's cache did not become active";

  // allocatable 384Mi - ~245Mi working set ~ 140Mi available: under 180Mi only
  // because of the active cache. Soft, with a long grace: reclaim uses it.
  Config c = node.config();
  c.eviction.thresholds = {allocatable(ThresholdKind::Soft, 180, 40, 120s)};
  DaemonOnV2Node rig(node, c);
  ASSERT_TRUE(rig.daemon) << rig.error;
  Daemon& daemon = *rig.daemon;

  // Evaluate as the loop would (bounded): until a run was judged avoided.
  bool avoided = false;
  bool met_at_start = false;
  for (int i = 0; i < 400 && !avoided; ++i) {
    daemon.evaluate(MonotonicClock().now(), "test", std::nullopt);
    if (i == 0) {
      for (const auto& t : daemon.last_decisions().thresholds) met_at_start = met_at_start || t.met;
    }
    avoided = daemon.relief().stats().avoided.load() > 0;
    std::this_thread::sleep_for(50ms);
  }
  std::filesystem::remove(file);
  const auto s = daemon.relief().stats().values();
  std::printf("[ measured ] relief cache: active_file %.1fMi -> %.1fMi, asked %.1fMi, got back %.1fMi, runs "
              "avoided=%llu still_short=%llu failed=%llu, swappiness=0 %s\n",
              static_cast<double>(active_before) / kMiB, static_cast<double>(stat_key(pod_path, "active_file")) / kMiB,
              static_cast<double>(s.asked_bytes) / kMiB, static_cast<double>(s.reclaimed_bytes) / kMiB,
              static_cast<unsigned long long>(s.avoided), static_cast<unsigned long long>(s.still_short),
              static_cast<unsigned long long>(s.failed),
              rig.writer.swappiness() == CgroupReclaimWriter::Swappiness::Accepted ? "accepted" : "refused (older kernel)");
  EXPECT_TRUE(met_at_start) << "the threshold must be met by the page cache to begin with";
  EXPECT_TRUE(avoided) << "reclaim did not bring the node back above the threshold";
  EXPECT_EQ(s.available, 1u);
  EXPECT_GT(s.reclaimed_bytes, 0u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_LT(stat_key(pod_path, "active_file"), active_before) << "the pod's cache did not shrink";
  EXPECT_TRUE(rig.evictor.calls().empty()) << "the pod was evicted although its cache could be given back";
  EXPECT_EQ(node.sb->read_key("kubepods", "memory.events", "oom_kill"), 0);
}

// The real memory.reclaim writer behind a gate: the first write waits until
// released (bounded), as a write can block in the kernel; the rest go through.
class BlockingFirstWrite final : public ReclaimWriter {
 public:
  explicit BlockingFirstWrite(const std::string& pods_root) : real_(pods_root) {}
  ~BlockingFirstWrite() override { release(); }
  Result<uint64_t> reclaim(const std::string& cgroup_path, uint64_t bytes) override {
    {
      std::unique_lock lk(mu_);
      if (!first_done_) {
        blocked_ = true;
        cv_.wait_for(lk, 90s, [&] { return released_; });
        blocked_ = false;
        first_done_ = true;
      }
    }
    return real_.reclaim(cgroup_path, bytes);
  }
  bool blocked() {
    std::lock_guard lk(mu_);
    return blocked_;
  }
  void release() {
    std::lock_guard lk(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  CgroupReclaimWriter real_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool blocked_ = false;
  bool first_done_ = false;
  bool released_ = false;
};

// The daemon writing through a BlockingFirstWrite; the gate opens before the
// daemon (and its worker, which waits for the write) stops.
struct GatedDaemon {
  BlockingFirstWrite gate;
  DaemonOnV2Node rig;
  GatedDaemon(const V2Node& node, const Config& c) : gate(node.sb->path("kubepods")), rig(node, c, &gate) {}
  ~GatedDaemon() { gate.release(); }
};

// A tenant holds page cache (a soft threshold met: a reclaim run starts and
// its write blocks), then allocates: the hard threshold met meanwhile must
// not wait for the soft run's hold (its grace period, 120 s), only for
// relief.hardThresholdBudget. The loop stops long before the grace end.
TEST(V2Relief, AHardThresholdMetDuringASoftRunIsNotHeldForIt) {
  V2Node node("relief-hard");
  REQUIRE_PAGE_CACHE_NODE(node);

  const std::string file = kScratch + "/relief-hard-" + std::to_string(::getpid()) + ".dat";
  ASSERT_GT(start_cache_reader(node, file), 0);
  const std::string cache_path = node.sb->path(kCachePod);
  if (stat_key(cache_path, "active_file") < 200 * kMiB && stat_key(cache_path, "inactive_file") >= 200 * kMiB) {
    std::filesystem::remove(file);
    GTEST_SKIP() << "SKIPPED: this kernel keeps read() page cache inactive (multi-gen LRU): no soft threshold is "
                    "met by it, so no soft run to hold a hard threshold";
  }
  ASSERT_GE(stat_key(cache_path, "active_file"), 200 * kMiB) << "the reader's cache did not become active";

  // ~140Mi available: the soft threshold (180Mi, grace 120 s) is met by the
  // cache alone; the hard one (100Mi) once the grower has ~60Mi.
  Config c = node.config();
  c.eviction.thresholds = {allocatable(ThresholdKind::Soft, 180, 40, 120s), allocatable(ThresholdKind::Hard, 100, 0)};
  GatedDaemon gated(node, c);
  ASSERT_TRUE(gated.rig.daemon) << gated.rig.error;
  Daemon& daemon = *gated.rig.daemon;

  // The soft run starts, and its first write blocks (bounded wait).
  for (int i = 0; i < 200 && !gated.gate.blocked(); ++i) {
    daemon.evaluate(MonotonicClock().now(), "test", std::nullopt);
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(gated.gate.blocked()) << "no soft run started (or its write did not reach the writer)";
  ASSERT_TRUE(daemon.relief().running());
  ASSERT_EQ(daemon.relief().stage().running()->kind, ThresholdKind::Soft);

  const std::string anon_pod = "kubepods/besteffort/podrelief-anon-0002";
  const pid_t grower = fork_into(*node.sb, anon_pod + "/c", [] { grow_anon(16, 112, 60); });
  ASSERT_GT(grower, 0);
  // Evaluate as the loop would, for at most ~30 s (a quarter of the soft grace).
  bool evicted = false, blocked_at_eviction = false, hard_met = false;
  for (int i = 0; i < 1500 && !evicted; ++i) {
    daemon.evaluate(MonotonicClock().now(), "test", std::nullopt);
    for (const auto& t : daemon.last_decisions().thresholds) {
      hard_met = hard_met || (t.met && t.threshold.kind == ThresholdKind::Hard);
    }
    evicted = !gated.rig.evictor.calls().empty();
    blocked_at_eviction = evicted && gated.gate.blocked();
    std::this_thread::sleep_for(20ms);
  }
  gated.gate.release();
  std::filesystem::remove(file);
  const auto s = daemon.relief().stats().values();
  std::printf("[ measured ] relief hard during soft run: hard met %s, evicted %s (run still blocked: %s), held=%llu\n",
              hard_met ? "yes" : "no", evicted ? "yes" : "no", blocked_at_eviction ? "yes" : "no",
              static_cast<unsigned long long>(s.held));
  ASSERT_TRUE(hard_met) << "the grower never met the hard threshold";
  ASSERT_TRUE(evicted) << "the hard threshold's candidate was held for the soft run";
  EXPECT_TRUE(blocked_at_eviction) << "the eviction must not have waited for the soft run's write";
  EXPECT_NE(gated.rig.evictor.calls().front().target.cgroup_path.find("podrelief-anon-0002"), std::string::npos);
  EXPECT_EQ(node.sb->read_key("kubepods", "memory.events", "oom_kill"), 0);
}

TEST(V2Relief, APodGrowingAnonymousMemoryIsEvictedWithoutWaitingForReclaim) {
  V2Node node("relief-anon");
  REQUIRE_V2(node);
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_TRUE(node.setup(384)) << node.sb->error();
  PRESSURED_REQUIRE(memory_reclaim_available(node.sb->path("kubepods")), "memory.reclaim (Linux 5.19+)");

  Config c = node.config();
  c.eviction.thresholds = {allocatable(ThresholdKind::Hard, 150, 0)};
  DaemonOnV2Node rig(node, c);
  ASSERT_TRUE(rig.daemon) << rig.error;
  Daemon& daemon = *rig.daemon;

  const std::string pod = "kubepods/besteffort/podrelief-anon-0002";
  const pid_t grower = fork_into(*node.sb, pod + "/c", [] { grow_anon(16, 300, 60); });
  ASSERT_GT(grower, 0);
  bool evicted = false;
  for (int i = 0; i < 1000 && !evicted; ++i) {
    daemon.evaluate(MonotonicClock().now(), "test", std::nullopt);
    evicted = !rig.evictor.calls().empty();
    std::this_thread::sleep_for(20ms);
  }
  const auto s = daemon.relief().stats().values();
  std::printf("[ measured ] relief anon: skipped not_covered=%llu no_candidate=%llu, held=%llu, runs=%llu\n",
              static_cast<unsigned long long>(s.skip_not_covered), static_cast<unsigned long long>(s.skip_no_candidate),
              static_cast<unsigned long long>(s.held),
              static_cast<unsigned long long>(s.avoided + s.still_short + s.failed));
  ASSERT_TRUE(evicted) << "the grower was never evicted";
  EXPECT_NE(rig.evictor.calls().front().target.cgroup_path.find("podrelief-anon-0002"), std::string::npos);
  EXPECT_EQ(s.held, 0u) << "anonymous pressure: the eviction must not wait for reclaim";
  EXPECT_EQ(s.skip_not_covered + s.skip_no_candidate, 1u) << "the crossing was judged not cache";
  EXPECT_EQ(node.sb->read_key("kubepods", "memory.events", "oom_kill"), 0);
}

}  // namespace
}  // namespace pressured
