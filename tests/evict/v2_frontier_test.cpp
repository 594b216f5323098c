// The spike frontier's cgroup v2 mechanics, as a reduced sweep: a grower
// touching fresh pages under a sandbox "node" (memory.max on its kubepods),
// at a few rates and two headrooms. When `available` falls under H the test
// does what pressured's hard threshold does, with the real CgroupEvictor, and
// the "freeze at the decision" lever first:
//   cgroup.freeze  the pod stops charging once cgroup.events says frozen
//   cgroup.kill    the evictor's v2 kill empties the frozen pod (populated 0),
//                  its memory reaped on the evictor's reaper thread
//   memory.events  kubepods counts no kernel OOM kill
// The rate achieved, H/rate and each step's time are printed, never asserted:
// under TCG the rates are low; the point is the v2 mechanics. Runs in the VM's
// v2 guest (ctest -L vm-frontier, vmtests/run --gtest test_evict); the test
// host's memory controller is on v1, where it skips loudly.
//
// The grower is a child of this process, bounded in size (under the sandbox's
// limit) and time, and lives in the sandbox, which its destructor removes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "daemon/workload.hpp"
#include "evict/cgroup_evictor.hpp"
#include "fakes/privilege.hpp"
#include "fakes/sandbox_cgroup.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kLimitMiB = 192;

bool v2_required() {
  const char* v = std::getenv("PRESSURED_REQUIRE_CGROUP_V2");
  return v != nullptr && std::string(v) == "1";
}

double ms_since(clock_type::time_point t) { return std::chrono::duration<double, std::milli>(clock_type::now() - t).count(); }

uint64_t current(const testing::SandboxCgroup& sb, const std::string& rel) {
  const std::string s = sb.read(rel, "memory.current");
  return s.empty() ? 0 : std::stoull(s);
}

// Waits, bounded, until <rel>/cgroup.events has "`key` `value`".
bool wait_event(const testing::SandboxCgroup& sb, const std::string& rel, const std::string& key, long long value,
                std::chrono::milliseconds limit) {
  const auto end = clock_type::now() + limit;
  while (clock_type::now() < end) {
    if (sb.read_key(rel, "cgroup.events", key) == value) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

struct Cell {
  uint64_t rate_mib_per_s;  // 0: flat out
  uint64_t headroom_mib;
};

void run_cell(const std::string& mount, const Cell& c) {
  testing::SandboxCgroup sb(mount, "v2-frontier");
  ASSERT_TRUE(sb.ok()) << sb.error();
  const std::string pod = "kubepods/besteffort/podgrower";
  ASSERT_TRUE(sb.make_with(pod)) << sb.error();
  ASSERT_TRUE(sb.set_memory_max("kubepods", kLimitMiB * kMiB)) << sb.error();

  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t grower = ::fork();
  if (grower == 0) {
    ::close(go[1]);
    char ch = 0;
    if (::read(go[0], &ch, 1) != 1 || ch != 1) ::_exit(2);
    volatile std::sig_atomic_t never = 0;
    // Up to the limit and beyond (the test must stop it first), 30 s at most.
    grow_continuous(kLimitMiB + 64, 2, c.rate_mib_per_s, clock_type::now() + 30s, never);
    ::sleep(30);
    ::_exit(0);
  }
  ASSERT_GT(grower, 0);
  ::close(go[0]);
  const char ok = sb.move(pod, grower) ? 1 : 0;
  (void)!::write(go[1], &ok, 1);
  ::close(go[1]);
  ASSERT_EQ(ok, 1) << sb.error();

  // The decision: available = limit - kubepods' usage under H, polled every millisecond.
  const auto start = clock_type::now();
  const uint64_t start_usage = current(sb, pod);
  uint64_t at_decision = 0;
  while (ms_since(start) < 30000) {
    at_decision = current(sb, "kubepods");
    if (kLimitMiB * kMiB - std::min(at_decision, kLimitMiB * kMiB) < c.headroom_mib * kMiB) break;
    std::this_thread::sleep_for(1ms);
  }
  const double grew_ms = ms_since(start);
  const auto decided = clock_type::now();
  ASSERT_LT(grew_ms, 30000) << "the grower never reached the threshold";

  // Freeze at the decision: nothing more is charged once frozen.
  ASSERT_TRUE(sb.write(pod, "cgroup.freeze", "1")) << sb.error();
  ASSERT_TRUE(wait_event(sb, pod, "frozen", 1, 5000ms)) << "cgroup.events never said frozen";
  const double freeze_ms = ms_since(decided);
  const uint64_t frozen_usage = current(sb, pod);
  std::this_thread::sleep_for(50ms);
  const uint64_t later_usage = current(sb, pod);
  EXPECT_LE(later_usage, frozen_usage) << "the frozen pod still charged memory";

  // The kill: cgroup.kill through the real evictor, the reaping on its thread.
  CgroupEvictorOptions o;
  o.pods_root = sb.path("kubepods");
  o.hierarchy_mount = mount;
  o.release_memory = true;
  o.release_on_worker = true;
  CgroupEvictor ev(o);
  EvictionTarget t;
  t.cgroup_path = sb.path(pod);
  const auto kill_at = clock_type::now();
  auto k = ev.kill(t);
  ASSERT_TRUE(k.ok()) << k.error().message;
  const double kill_ms = ms_since(kill_at);
  EXPECT_TRUE(k->used_cgroup_kill) << "the v2 kill did not use cgroup.kill";
  EXPECT_TRUE(wait_event(sb, pod, "populated", 0, 5000ms)) << "cgroup.kill left the frozen pod populated";
  while (current(sb, pod) > kMiB && ms_since(kill_at) < 5000) std::this_thread::sleep_for(1ms);
  const double back_ms = ms_since(kill_at);
  int status = 0;
  EXPECT_EQ(::waitpid(grower, &status, 0), grower);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  const long long oom_kills = sb.read_key("kubepods", "memory.events", "oom_kill");
  EXPECT_EQ(oom_kills, 0) << "a kernel OOM kill in the sandbox";
  const double rate = grew_ms > 0 ? static_cast<double>(at_decision - std::min(at_decision, start_usage)) / kMiB /
                                        (grew_ms / 1e3)
                                  : 0;
  std::printf("[ measured ] asked %s MiB/s, achieved %.0f MiB/s, H %llu MiB, H/rate %.0f ms | decision -> frozen "
              "%.1f ms, kill step %.1f ms, memory back %.1f ms after it | memory.events max %lld oom_kill %lld\n",
              c.rate_mib_per_s ? std::to_string(c.rate_mib_per_s).c_str() : "max", rate,
              static_cast<unsigned long long>(c.headroom_mib), rate > 0 ? c.headroom_mib / rate * 1e3 : 0.0, freeze_ms,
              kill_ms, back_ms, sb.read_key("kubepods", "memory.events", "max"), oom_kills);
}

TEST(V2Frontier, FreezeThenCgroupKillBeatsTheLimitAtEachRate) {
  PRESSURED_REQUIRE_ROOT();
  std::string why;
  const std::string mount = testing::SandboxCgroup::find_v2_memory_mount(&why);
  if (mount.empty()) {
    if (v2_required()) FAIL() << "required for this test but missing: cgroup v2 memory controller: " << why;
    GTEST_SKIP() << "SKIPPED, missing: cgroup v2 memory controller (" << why
                 << "); runs in the VM's v2 guest (ctest -L vm-frontier)";
  }
  for (const Cell& c : {Cell{20, 64}, Cell{80, 64}, Cell{0, 64}, Cell{80, 32}}) {
    SCOPED_TRACE("rate " + std::to_string(c.rate_mib_per_s) + " H " + std::to_string(c.headroom_mib));
    run_cell(mount, c);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace pressured
