// The daemon's decision loop, in process, with a fake observer, a recording
// evictor and synthetic time: ranking, one eviction at a time, soft grace,
// dry run, reload, restart from the checkpoint, faults.
#include "daemon/daemon.hpp"
#include "config/load.hpp"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "fakes/fake_observer.hpp"
#include "metrics/exposition.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t MiB = 1 << 20;

using testing::FakeObserver;

TimePoint at(double s) { return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s))); }

// Records like RecordingEvictor, but the test decides when a pod is empty.
class FakeEvictor final : public Evictor {
 public:
  Result<void> validate(const EvictionTarget& t) const override {
    if (t.cgroup_path.rfind("/fake/kubepods/", 0) != 0) return Error{EPERM, "outside the pods root"};
    return {};
  }
  Result<KillReport> terminate(const EvictionTarget& t) override {
    calls.push_back("terminate " + t.uid);
    if (exit_on_sigterm) gone.push_back(t.uid);
    return KillReport{};
  }
  Result<KillReport> kill(const EvictionTarget& t) override {
    if (enforce_root && !validate(t)) return validate(t).error();
    if (on_kill) on_kill(t);
    calls.push_back("kill " + t.uid);
    if (!stuck) gone.push_back(t.uid);
    KillReport r;
    r.empty = !stuck;
    return r;
  }
  Result<bool> is_empty(const EvictionTarget& t) const override {
    if (enforce_root && !validate(t)) return validate(t).error();
    return std::find(gone.begin(), gone.end(), t.uid) != gone.end();
  }
  std::vector<std::string> calls, gone;
  std::function<void(const EvictionTarget&)> on_kill;
  bool exit_on_sigterm = false;
  bool stuck = false;
  bool enforce_root = false;  // kill and is_empty refuse outside the pods root, as CgroupEvictor's
};

Threshold threshold(ThresholdKind kind, uint64_t bytes, Duration grace = 0s) {
  Threshold t;
  t.signal = Signal::AllocatableMemoryAvailable;
  t.kind = kind;
  t.value.quantity = static_cast<double>(bytes);
  t.grace_period = grace;
  return t;
}

Config base_config(const std::string& state = "") {
  Config c;
  c.eviction.thresholds = {threshold(ThresholdKind::Hard, 200 * MiB)};
  c.eviction.pressure_transition_period = 1s;
  c.daemon.state_file = state;
  c.daemon.release_wait_timeout = 5s;
  return c;
}

struct Rig {
  Metrics metrics{MetricsOptions{.node = "test"}};
  FakeObserver obs;
  FakeEvictor ev;
  RecordingEvictor dry;
  std::unique_ptr<Daemon> d;
  std::vector<bool> busy_changes;  // what on_busy_changed was told, in order
  void make(Config c, std::function<Result<Config>()> reload = {}) {
    DaemonDeps deps;
    deps.observer = &obs;
    deps.evictor = &ev;
    deps.metrics = &metrics;
    deps.boot_id = "test-boot";
    deps.reload = std::move(reload);
    deps.on_busy_changed = [this](bool busy) { busy_changes.push_back(busy); };
    d = std::make_unique<Daemon>(std::move(c), deps);
    d->set_dry_run_evictor(&dry);
  }
  // A series as an operator reads it at /metrics, summed over the labels not given.
  std::optional<double> scraped(const std::string& name, const std::map<std::string, std::string>& match = {}) const {
    return testing::scraped(metrics, name, match);
  }
  // The kernel frees a killed pod's memory.
  void release(const std::string& uid) {
    if (auto* p = obs.find(uid)) p->usage.memory_working_set_bytes = 0;
  }
};

std::string temp_state() {
  char tmpl[] = "/tmp/pressured-daemon-XXXXXX";
  return std::string(::mkdtemp(tmpl)) + "/state.json";
}

TEST(DaemonLogic, HardThresholdEvictsTheBestEffortPodFirst) {
  Rig r;
  r.obs.add("guaranteed", QosClass::Guaranteed, 300 * MiB, 300 * MiB);
  r.obs.add("burstable", QosClass::Burstable, 300 * MiB, 100 * MiB);
  r.obs.add("besteffort", QosClass::BestEffort, 250 * MiB);
  r.make(base_config());
  r.d->evaluate(at(1), "test", std::nullopt);  // 1024-850 = 174 MiB < 200 MiB
  ASSERT_EQ(r.ev.calls.size(), 1u);
  EXPECT_EQ(r.ev.calls[0], "kill besteffort");
  EXPECT_EQ(r.scraped("pressured_evictions_total"), 1u);
  ASSERT_TRUE(r.d->policy().busy());
}

// A kernel OOM kill is counted once, whether its event came (first or late)
// or was lost: each full observation reads the kernel's counters of the
// kubepods tree, and a kill there that no event reported is counted then,
// labelled by the pod its memcg (here a container's) is below.
TEST(DaemonLogic, KernelOomKillsAreCountedOnceFromEventsAndTheKernelsCounters) {
  Rig r;
  r.obs.add("besteffort", QosClass::BestEffort, 100 * MiB).cgroup_id = 40;
  const std::string pod = r.obs.find("besteffort")->cgroup_path;
  r.obs.oom_kills = std::vector<MemcgOomKills>{{1, "/fake/kubepods", 0}, {40, pod, 3}, {41, pod + "/ctr", 0}};
  r.make(base_config());
  auto kills = [&](const std::string& qos) { return r.scraped("pressured_kernel_oom_kills_total", {{"qos_class", qos}}); };
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_EQ(kills("BestEffort"), 0.0) << "3 kills before the daemon started";

  (*r.obs.oom_kills)[2].oom_kills = 1;  // its event lost
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(kills("BestEffort"), 1.0);
  EXPECT_EQ(r.scraped("pressured_kernel_oom_kills_unreported_total"), 1.0);

  PressureEvent ev;
  ev.type = EventType::OomVictim;
  ev.cgroup_id = 41;
  ev.pid = 77;
  r.d->on_events({&ev, 1}, at(3));  // read late: already counted
  EXPECT_EQ(kills("BestEffort"), 1.0);

  ev.pid = 78;  // the next kill's event comes before the counter is read
  r.d->on_events({&ev, 1}, at(4));
  r.d->on_events({&ev, 1}, at(4.1));  // another thread of the same victim
  EXPECT_EQ(kills("BestEffort"), 2.0);
  (*r.obs.oom_kills)[2].oom_kills = 2;
  r.d->evaluate(at(5), "test", std::nullopt);
  EXPECT_EQ(kills("BestEffort"), 2.0);
  EXPECT_EQ(r.scraped("pressured_kernel_oom_kills_unreported_total"), 1.0);
  EXPECT_EQ(r.scraped("pressured_kernel_oom_kills_total"), 2.0) << "no other class";
}

// Each kill is counted with its scope, told from the counters' change since
// the last reading (node/oom_scope.hpp): a container at its own limit (its
// memcg's local `oom` moved) is the workload's; a kill with no limit reached
// on the victim's path is the node's, pressured's failure. An event's kill
// waits for the full observation the event asks for.
TEST(DaemonLogic, KernelOomKillsAreCountedByScopeTheNodeOrTheWorkloadsOwnLimit) {
  Rig r;
  r.obs.add("besteffort", QosClass::BestEffort, 100 * MiB).cgroup_id = 40;
  const std::string pod = r.obs.find("besteffort")->cgroup_path;
  auto memcg = [](uint64_t id, std::string path) {
    MemcgOomKills k{id, std::move(path), 0};
    k.oom_events = 0;
    return k;
  };
  r.obs.oom_kills = std::vector<MemcgOomKills>{memcg(1, "/fake/kubepods"), memcg(40, pod), memcg(41, pod + "/ctr")};
  r.make(base_config());
  auto kills = [&](const std::string& scope) {
    return r.scraped("pressured_kernel_oom_kills_total", {{"qos_class", "BestEffort"}, {"scope", scope}});
  };
  r.d->evaluate(at(1), "test", std::nullopt);

  auto& ctr = (*r.obs.oom_kills)[2];
  ctr.oom_events = 1;  // the container at its own limit, then killed
  ctr.oom_kills = 1;
  PressureEvent ev;
  ev.type = EventType::OomVictim;
  ev.cgroup_id = 41;
  ev.pid = 77;
  r.d->on_events({&ev, 1}, at(2));
  EXPECT_EQ(kills("cgroup"), 1.0) << "counted by the full observation the event asked for";
  EXPECT_EQ(kills("node"), 0.0);

  ctr.oom_kills = 2;  // no limit reached: a global OOM (its event lost)
  r.d->evaluate(at(3), "test", std::nullopt);
  EXPECT_EQ(kills("node"), 1.0);
  EXPECT_EQ(kills("cgroup"), 1.0);
  EXPECT_EQ(kills("unknown"), 0.0);

  r.obs.oom_kills.reset();  // counters not read: an event's kill is counted, scope unknown
  ev.cgroup_id = 40;
  ev.pid = 78;
  r.d->on_events({&ev, 1}, at(4));
  EXPECT_EQ(kills("unknown"), 1.0);
  EXPECT_EQ(r.scraped("pressured_kernel_oom_kills_total"), 3.0);
}

// A safety-net poll that finds a threshold met which was not met at the last
// evaluation found a crossing no kernel event reported: counted once, and
// only by the safety net (a poll that sees it still met, or an event-driven
// evaluation, is not a detection).
TEST(DaemonLogic, SafetyNetCountsTheCrossingsItFoundItself) {
  Rig r;
  r.obs.add("burstable", QosClass::Burstable, 500 * MiB, 600 * MiB);
  r.obs.add("besteffort", QosClass::BestEffort, 100 * MiB);
  r.make(base_config());
  r.d->on_tick(at(1), true);  // 1024-600 = 424 MiB available: nothing met
  EXPECT_EQ(r.scraped("pressured_safety_net_detections_total"), 0.0);
  r.obs.find("besteffort")->usage.memory_working_set_bytes = 400 * MiB;  // 124 MiB < 200 MiB
  r.d->on_tick(at(2), true);
  EXPECT_EQ(r.scraped("pressured_safety_net_detections_total"), 1.0);
  ASSERT_EQ(r.ev.calls, std::vector<std::string>{"kill besteffort"}) << "and acted on";
  r.d->on_tick(at(2.1), true);  // still met: the same crossing
  EXPECT_EQ(r.scraped("pressured_safety_net_detections_total"), 1.0);

  Rig e;
  e.obs.add("besteffort", QosClass::BestEffort, 100 * MiB);
  e.make(base_config());
  e.d->on_tick(at(1), true);
  e.obs.find("besteffort")->usage.memory_working_set_bytes = 900 * MiB;
  e.d->evaluate(at(2), "bpf", std::nullopt);  // an event saw it first
  e.d->on_tick(at(3), true);
  EXPECT_EQ(e.scraped("pressured_safety_net_detections_total"), 0.0);
}

TEST(DaemonLogic, NoSecondEvictionWhenTheFirstFreedEnough) {
  Rig r;
  r.obs.add("burstable", QosClass::Burstable, 500 * MiB, 100 * MiB);
  r.obs.add("besteffort", QosClass::BestEffort, 350 * MiB);
  r.make(base_config());
  r.d->evaluate(at(1), "test", std::nullopt);
  ASSERT_EQ(r.ev.calls, std::vector<std::string>{"kill besteffort"});
  // Before the memory comes back the signal still says "pressure": no decision acts.
  for (double t = 1.05; t < 1.3; t += 0.05) r.d->evaluate(at(t), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls.size(), 1u);
  EXPECT_GT(r.scraped("pressured_eviction_policy_actions_total", {{"action", "deferred"}}), 0u);
  r.release("besteffort");
  for (double t = 1.3; t < 3; t += 0.1) r.d->evaluate(at(t), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls.size(), 1u) << "the burstable pod must survive: 524 MiB are available again";
  EXPECT_FALSE(r.d->policy().busy());
  EXPECT_EQ(r.scraped("pressured_eviction_policy_actions_total", {{"action", "exited"}}), 1u);
}

TEST(DaemonLogic, SecondEvictionOnlyAfterTheFirstReleasedAndStillShort) {
  Rig r;
  r.obs.add("burstable", QosClass::Burstable, 900 * MiB, 100 * MiB);
  r.obs.add("besteffort", QosClass::BestEffort, 50 * MiB);
  r.make(base_config());
  r.d->evaluate(at(1), "test", std::nullopt);
  ASSERT_EQ(r.ev.calls, std::vector<std::string>{"kill besteffort"});
  r.d->evaluate(at(1.1), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls.size(), 1u);
  r.release("besteffort");
  r.d->evaluate(at(1.2), "test", std::nullopt);  // released: in flight ends
  r.d->evaluate(at(1.3), "test", std::nullopt);  // fresh decision: still short
  ASSERT_EQ(r.ev.calls.size(), 2u);
  EXPECT_EQ(r.ev.calls[1], "kill burstable");
}

TEST(DaemonLogic, ReleaseWaitIsBounded) {
  Rig r;
  r.obs.add("a", QosClass::BestEffort, 900 * MiB);
  r.obs.add("b", QosClass::BestEffort, 10 * MiB);
  Config c = base_config();
  c.daemon.release_wait_timeout = 2s;
  r.make(c);
  r.d->evaluate(at(1), "test", std::nullopt);
  r.d->evaluate(at(1.1), "test", std::nullopt);  // empty -> releasing, memory never comes back
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls.size(), 1u);
  r.d->evaluate(at(3.2), "test", std::nullopt);  // timeout: decide again
  EXPECT_EQ(r.scraped("pressured_eviction_policy_actions_total", {{"action", "releasetimeout"}}), 1u);
  r.d->evaluate(at(3.3), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls.size(), 2u);
}

TEST(DaemonLogic, SoftThresholdWaitsForItsGracePeriodThenTermThenKill) {
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 900 * MiB);
  Config c = base_config();
  c.eviction.thresholds = {threshold(ThresholdKind::Soft, 200 * MiB, 10s)};
  c.eviction.max_pod_grace_period_seconds = 3;
  r.make(c);
  for (double t = 0; t < 9.9; t += 1) r.d->evaluate(at(t), "test", std::nullopt);
  EXPECT_TRUE(r.ev.calls.empty()) << "grace period not over";
  r.d->evaluate(at(10.5), "test", std::nullopt);
  ASSERT_EQ(r.ev.calls, std::vector<std::string>{"terminate be"});
  r.d->evaluate(at(12), "test", std::nullopt);  // within the pod's 3 s grace
  EXPECT_EQ(r.ev.calls.size(), 1u);
  r.d->evaluate(at(13.6), "test", std::nullopt);  // grace over: SIGKILL
  ASSERT_EQ(r.ev.calls.size(), 2u);
  EXPECT_EQ(r.ev.calls[1], "kill be");
  EXPECT_EQ(r.scraped("pressured_eviction_exited_before_kill_total"), 0u);
}

TEST(DaemonLogic, VictimExitingOnItsOwnMidEvictionIsCountedNotKilled) {
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 900 * MiB);
  Config c = base_config();
  c.eviction.thresholds = {threshold(ThresholdKind::Soft, 200 * MiB, 1s)};
  c.eviction.max_pod_grace_period_seconds = 30;
  r.make(c);
  r.ev.exit_on_sigterm = true;
  r.d->evaluate(at(0), "test", std::nullopt);
  r.d->evaluate(at(1.5), "test", std::nullopt);
  ASSERT_EQ(r.ev.calls, std::vector<std::string>{"terminate be"});
  r.d->evaluate(at(1.6), "test", std::nullopt);
  EXPECT_EQ(r.scraped("pressured_eviction_exited_before_kill_total"), 1u);
  EXPECT_EQ(r.ev.calls.size(), 1u) << "no SIGKILL for a pod that is gone";
}

TEST(DaemonLogic, DryRunKillsNothingButDecides) {
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 900 * MiB);
  Config c = base_config();
  c.daemon.dry_run = true;
  c.daemon.release_wait_timeout = 1s;
  r.make(c);
  for (double t = 0; t < 5; t += 0.2) r.d->evaluate(at(t), "test", std::nullopt);
  EXPECT_TRUE(r.ev.calls.empty());
  EXPECT_GE(r.dry.calls().size(), 2u);
  EXPECT_GE(r.scraped("pressured_evictions_total"), 2u) << "the same pod is reported again after the release wait";
}

TEST(DaemonLogic, RefusesTargetsOutsideThePodsRoot) {
  Rig r;
  auto& p = r.obs.add("be", QosClass::BestEffort, 900 * MiB);
  p.cgroup_path = "/fake/elsewhere/podbe";
  r.make(base_config());
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_TRUE(r.ev.calls.empty());
  EXPECT_EQ(r.scraped("pressured_eviction_refused_targets_total"), 1u);
}

// Counts log records at warn and above (their text is not the test's business).
struct WarnCount final : spdlog::sinks::base_sink<std::mutex> {
  std::atomic<int> n{0};
  void sink_it_(const spdlog::details::log_msg& m) override { n += m.level >= spdlog::level::warn ? 1 : 0; }
  void flush_() override {}
};

// A victim outside the pods root resumed from a checkpoint (copied from
// elsewhere, or edited): its kill and its probe are refused at every decision
// while it is in flight (every 50 ms under pressure). Each failure is counted;
// each is logged once.
TEST(DaemonLogic, AVictimOutsideThePodsRootIsLoggedOnceNotAtEveryDecision) {
  const std::string state = temp_state();
  {
    Checkpoint cp;
    cp.boot_id = "test-boot";
    EvictionRecord f;
    f.eviction.id = "ev-outside";
    f.eviction.uid = "be";
    f.eviction.name = "be";
    f.eviction.namespace_ = "ns";
    f.eviction.cgroup_path = "/fake/elsewhere/podbe";
    f.eviction.qos = QosClass::BestEffort;
    f.eviction.metadata_known = true;
    f.eviction.signal = Signal::AllocatableMemoryAvailable;
    f.eviction.decided_at = at(0.5);
    f.kill_at = at(0.5);
    f.phase_deadline = at(30);
    f.killed = true;
    cp.policy.records.push_back(f);
    cp.policy.sequence = 1;
    ASSERT_TRUE(write_file_atomically(state, encode_checkpoint(cp)));
  }
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 900 * MiB).cgroup_path = "/fake/elsewhere/podbe";
  r.ev.enforce_root = true;
  r.make(base_config(state));
  r.d->restore_checkpoint();
  auto sink = std::make_shared<WarnCount>();
  spdlog::default_logger()->sinks().push_back(sink);
  for (int i = 0; i < 40; ++i) r.d->evaluate(at(1 + 0.05 * i), "test", std::nullopt);
  spdlog::default_logger()->sinks().pop_back();
  EXPECT_TRUE(r.ev.calls.empty()) << r.ev.calls.front();
  EXPECT_GE(r.scraped("pressured_local_kills_total", {{"result", "failure"}}), 2u) << "kills refused, each counted";
  EXPECT_LE(sink->n.load(), 3) << "warn/error records over 40 decisions 50 ms apart";
  std::filesystem::remove_all(std::filesystem::path(state).parent_path());
}

TEST(DaemonLogic, ReloadRejectsInvalidConfigAndKeepsTheOld) {
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 700 * MiB);  // 324 MiB available
  Result<Config> next = Error{EINVAL, "bad"};
  r.make(base_config(), [&next] { return next; });
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_TRUE(r.ev.calls.empty());
  EXPECT_FALSE(r.d->reload());
  EXPECT_EQ(r.scraped("pressured_config_reloads_total", {{"result", "failure"}}), 1u);
  EXPECT_EQ(r.d->config().eviction.thresholds.size(), 1u);
  Config c = base_config();
  c.eviction.thresholds = {threshold(ThresholdKind::Hard, 400 * MiB)};
  next = c;
  r.d->on_signal(SIGHUP);
  EXPECT_EQ(r.scraped("pressured_config_reloads_total", {{"result", "success"}}), 1u);
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls, std::vector<std::string>{"kill be"});
}

// The node's KubeletConfiguration caught mid-rewrite at SIGHUP: refused, the
// refusal counted as a failed reload, the last good kubelet settings kept.
TEST(DaemonLogic, ReloadRefusesAHalfWrittenKubeletFileAndKeepsTheLastGood) {
  const std::string dir = ::testing::TempDir() + "/pressured-reload-kubelet-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string kubelet = dir + "/config.yaml", own = dir + "/pressured.yaml";
  const std::string head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
  std::ofstream(kubelet, std::ios::trunc) << head << "evictionHard: {memory.available: 500Mi, pid.available: 10%}\n";
  std::ofstream(own, std::ios::trunc) << "kubelet: {configPath: " << kubelet << "}\n...\n";
  ConfigOptions options;
  options.config_path = own;
  auto first = reload_config(options);
  ASSERT_TRUE(first.ok()) << first.error().message;
  Rig r;
  r.make(*first, [&options] { return reload_config(options); });
  const auto before = r.d->config().eviction.thresholds;
  ASSERT_EQ(before.size(), 3u) << "memory, allocatable memory, pid";
  std::ofstream(kubelet, std::ios::trunc) << head << "evictionHard:\n  memory.available: \"5";
  r.d->on_signal(SIGHUP);
  EXPECT_EQ(r.scraped("pressured_config_reloads_total", {{"result", "failure"}}), 1u);
  EXPECT_EQ(r.d->config().eviction.thresholds, before) << "the last good kubelet settings stay";
  std::ofstream(kubelet, std::ios::trunc) << head << "evictionHard: {memory.available: 700Mi}\n";
  r.d->on_signal(SIGHUP);
  EXPECT_EQ(r.scraped("pressured_config_reloads_total", {{"result", "success"}}), 1u);
  EXPECT_EQ(r.d->config().eviction.thresholds.size(), 2u);
  std::filesystem::remove_all(dir);
}

// One configuration in force: a reload swaps the snapshot the daemon, the
// engine, the policy and the executor all read (none keeps a copy to be
// re-synced by hand). What the running process was built from (events,
// observation, API, metrics) stays as it runs until a restart, and the
// snapshot says so.
TEST(DaemonLogic, ReloadSwapsTheOneConfigurationEveryPartReads) {
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 700 * MiB);  // 324 MiB available
  Config next = base_config();
  r.make(base_config(), [&next] { return next; });
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_TRUE(r.ev.calls.empty());
  const Duration safety_net = r.d->config().events.safety_net_interval;

  next.eviction.thresholds = {threshold(ThresholdKind::Hard, 400 * MiB)};  // the engine's
  next.daemon.dry_run = true;                                              // the policy's and the executor's
  next.daemon.kill_timeout = 7s;
  next.events.safety_net_interval = safety_net + 4s;  // needs a restart
  r.d->on_signal(SIGHUP);
  EXPECT_EQ(r.scraped("pressured_config_reloads_total", {{"result", "success"}}), 1u);
  EXPECT_EQ(r.d->config().eviction.thresholds, next.eviction.thresholds);
  EXPECT_TRUE(r.d->config().daemon.dry_run);
  EXPECT_EQ(r.d->config().events.safety_net_interval, safety_net) << "the reactor still polls at the old interval";

  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_TRUE(r.ev.calls.empty()) << "the executor reads the dry run now in force";
  ASSERT_EQ(r.dry.calls().size(), 1u) << "the engine decides on the new threshold";
  EXPECT_TRUE(r.d->policy().config().dry_run);
  EXPECT_EQ(r.d->policy().config().kill_timeout, 7s);
}

TEST(DaemonLogic, RestartRestoresSoftGraceAndTheEvictionInFlight) {
  std::string state = temp_state();
  Config c = base_config(state);
  c.eviction.thresholds = {threshold(ThresholdKind::Soft, 200 * MiB, 10s)};
  c.eviction.max_pod_grace_period_seconds = 2;
  {
    Rig r;
    r.obs.add("be", QosClass::BestEffort, 900 * MiB);
    r.make(c);
    r.d->evaluate(at(0), "test", std::nullopt);
    r.d->evaluate(at(6), "test", std::nullopt);
    r.d->save_checkpoint();
    EXPECT_TRUE(r.ev.calls.empty());
  }
  {
    Rig r;  // a restart 2 s later: the grace period keeps counting from t=0
    r.obs.add("be", QosClass::BestEffort, 900 * MiB);
    r.make(c);
    r.d->restore_checkpoint();
    EXPECT_EQ(r.scraped("pressured_checkpoint_loads_total", {{"result", "restored"}}), 1u);
    r.d->evaluate(at(8), "test", std::nullopt);
    EXPECT_TRUE(r.ev.calls.empty());
    r.d->evaluate(at(10.5), "test", std::nullopt);
    ASSERT_EQ(r.ev.calls, std::vector<std::string>{"terminate be"});
    r.d->save_checkpoint();
  }
  {
    Rig r;  // a restart mid-eviction: the pod is still killed at the end of its grace
    r.obs.add("be", QosClass::BestEffort, 900 * MiB);
    r.make(c);
    r.d->restore_checkpoint();
    ASSERT_TRUE(r.d->policy().busy());
    ASSERT_NE(r.d->policy().in_flight(Lane::Memory), nullptr);
    EXPECT_EQ(r.d->policy().in_flight(Lane::Memory)->eviction.uid, "be");
    r.d->evaluate(at(13), "test", std::nullopt);
    EXPECT_EQ(r.ev.calls, std::vector<std::string>{"kill be"});
  }
  std::filesystem::remove_all(std::filesystem::path(state).parent_path());
}

// The progress ticks (50 ms) run only while an eviction is in flight: the
// daemon must say when one starts, also one resumed from the checkpoint, and
// when the last one ends, once per change.
TEST(DaemonLogic, TellsWhenAnEvictionStartsAndEndsForTheProgressTicks) {
  const std::string state = temp_state();
  const std::string mid_eviction = state + ".mid-eviction";
  {
    Rig r;
    r.obs.add("burstable", QosClass::Burstable, 500 * MiB, 100 * MiB);
    r.obs.add("besteffort", QosClass::BestEffort, 100 * MiB);
    r.make(base_config(state));
    r.d->evaluate(at(1), "test", std::nullopt);  // 1024-600: nothing met
    EXPECT_TRUE(r.busy_changes.empty()) << "an idle daemon needs no progress ticks";
    r.obs.find("besteffort")->usage.memory_working_set_bytes = 350 * MiB;  // 174 MiB < 200 MiB
    r.d->on_tick(at(2), true);
    ASSERT_EQ(r.ev.calls, std::vector<std::string>{"kill besteffort"});
    EXPECT_EQ(r.busy_changes, std::vector<bool>{true});
    for (double t = 2.05; t < 2.3; t += 0.05) r.d->evaluate(at(t), "progress", std::nullopt);
    EXPECT_EQ(r.busy_changes, std::vector<bool>{true}) << "told once per change";
    r.d->save_checkpoint();
    std::filesystem::copy_file(state, mid_eviction);
    r.release("besteffort");
    for (double t = 2.3; t < 3; t += 0.1) r.d->evaluate(at(t), "progress", std::nullopt);
    ASSERT_FALSE(r.d->policy().busy());
    EXPECT_EQ(r.busy_changes, (std::vector<bool>{true, false}));
  }
  {
    Rig r;  // a restart while the eviction was in flight
    r.obs.add("burstable", QosClass::Burstable, 500 * MiB, 100 * MiB);
    r.obs.add("besteffort", QosClass::BestEffort, 350 * MiB);
    r.make(base_config(mid_eviction));
    r.d->restore_checkpoint();
    ASSERT_TRUE(r.d->policy().busy());
    EXPECT_EQ(r.busy_changes, std::vector<bool>{true}) << "a resumed eviction needs its progress ticks from the start";
  }
  std::filesystem::remove_all(std::filesystem::path(state).parent_path());
}

// kubernetes#123872: a soft victim with a long grace must not hold back a hard threshold.
Config issue_config(const std::string& state = "") {
  Config c = base_config(state);
  c.eviction.thresholds = {threshold(ThresholdKind::Soft, 400 * MiB, 1s), threshold(ThresholdKind::Hard, 150 * MiB)};
  c.eviction.max_pod_grace_period_seconds = 0;
  return c;
}

void issue_pods(FakeObserver& obs) {
  obs.add("be", QosClass::BestEffort, 680 * MiB).termination_grace_period_seconds = 120;
  obs.add("bu", QosClass::Burstable, 100 * MiB, 100 * MiB);
}

TEST(DaemonLogic, SoftVictimIsKilledOnTheFirstEvaluationAfterAHardCrossing) {
  Rig r;
  issue_pods(r.obs);
  r.make(issue_config());
  r.d->evaluate(at(0), "test", std::nullopt);
  r.d->evaluate(at(1), "test", std::nullopt);
  ASSERT_EQ(r.ev.calls, std::vector<std::string>{"terminate be"});  // ignores it: grace 120 s
  for (double t = 1.05; t < 5; t += 0.05) r.d->evaluate(at(t), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls.size(), 1u);
  r.obs.find("bu")->usage.memory_working_set_bytes = 520 * MiB;  // 1024 - 1200: hard met
  r.d->evaluate(at(5), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls, (std::vector<std::string>{"terminate be", "kill be"}));
  EXPECT_EQ(r.scraped("pressured_eviction_policy_actions_total", {{"action", "escalate"}}), 1u);
  r.release("be");
  for (double t = 5.05; t < 6; t += 0.05) r.d->evaluate(at(t), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls.size(), 2u) << "the burstable pod survives: 504 MiB are back";
  EXPECT_FALSE(r.d->policy().busy());
}

TEST(DaemonLogic, CheckpointIsWrittenBeforeTheKill) {
  std::string state = temp_state();
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 900 * MiB);
  r.make(base_config(state));
  bool recorded = false;
  r.ev.on_kill = [&](const EvictionTarget& t) {
    auto l = load_checkpoint(state, "test-boot");
    recorded = l.status == CheckpointLoad::Restored && l.checkpoint.policy.records.size() == 1 &&
               l.checkpoint.policy.records[0].in_flight() && l.checkpoint.policy.records[0].eviction.uid == t.uid &&
               l.checkpoint.policy.records[0].killed;
  };
  r.d->evaluate(at(1), "test", std::nullopt);
  ASSERT_EQ(r.ev.calls, std::vector<std::string>{"kill be"});
  EXPECT_TRUE(recorded) << "a crash during the kill must find the eviction in the checkpoint";
  std::filesystem::remove_all(std::filesystem::path(state).parent_path());
}

TEST(DaemonLogic, RestartDuringEscalationNeitherLosesTheKillNorKillsTwice) {
  std::string state = temp_state();
  for (bool died : {false, true}) {
    {
      Rig r;  // escalates, then "crashes" right after the checkpoint (no save at stop)
      issue_pods(r.obs);
      r.make(issue_config(state));
      r.d->evaluate(at(0), "test", std::nullopt);
      r.d->evaluate(at(1), "test", std::nullopt);
      r.obs.find("bu")->usage.memory_working_set_bytes = 520 * MiB;
      r.d->evaluate(at(5), "test", std::nullopt);
      ASSERT_EQ(r.ev.calls.back(), "kill be");
    }
    Rig r;
    issue_pods(r.obs);
    r.obs.find("bu")->usage.memory_working_set_bytes = 520 * MiB;
    if (died) r.ev.gone = {"be"};  // the kill went out before the crash
    r.make(issue_config(state));
    r.d->restore_checkpoint();
    ASSERT_TRUE(r.d->policy().busy());
    r.d->evaluate(at(5.2), "test", std::nullopt);
    r.d->evaluate(at(5.25), "test", std::nullopt);
    if (died) {
      EXPECT_TRUE(r.ev.calls.empty()) << "nothing killed again, no second victim";
    } else {
      EXPECT_EQ(r.ev.calls, std::vector<std::string>{"kill be"}) << "the kill is resumed, once";
    }
  }
  std::filesystem::remove_all(std::filesystem::path(state).parent_path());
}

TEST(DaemonLogic, ADayOldEvictionInTheCheckpointIsNotResumed) {
  std::string state = temp_state();
  Config c = issue_config(state);
  {
    Rig r;
    issue_pods(r.obs);
    r.make(c);
    r.d->evaluate(at(0), "test", std::nullopt);
    r.d->evaluate(at(1), "test", std::nullopt);
    ASSERT_EQ(r.ev.calls, std::vector<std::string>{"terminate be"});
  }
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 100 * MiB);  // the pressure is long gone
  c.eviction.thresholds = {};                           // and so are the thresholds
  r.make(c);
  r.d->restore_checkpoint();
  r.d->evaluate(at(86400), "test", std::nullopt);
  EXPECT_TRUE(r.ev.calls.empty());
  EXPECT_EQ(r.scraped("pressured_eviction_policy_actions_total", {{"action", "expired"}}), 1u);
  EXPECT_FALSE(r.d->policy().busy());
  EXPECT_EQ(r.scraped("pressured_checkpoint_dropped_thresholds_total"), 2u) << "the soft threshold's timing and hysteresis";
  std::filesystem::remove_all(std::filesystem::path(state).parent_path());
}

TEST(DaemonLogic, CorruptCheckpointIsCountedAndIgnored) {
  std::string state = temp_state();
  std::ofstream(state) << "{\"version\":1,\"boot_id\":";
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 900 * MiB);
  r.make(base_config(state));
  r.d->restore_checkpoint();
  EXPECT_EQ(r.scraped("pressured_checkpoint_loads_total", {{"result", "corrupt"}}), 1u);
  r.d->evaluate(at(1), "test", std::nullopt);  // works normally and rewrites the file
  EXPECT_EQ(r.ev.calls.size(), 1u);
  EXPECT_EQ(load_checkpoint(state, "test-boot").status, CheckpointLoad::Restored);
  std::filesystem::remove_all(std::filesystem::path(state).parent_path());
}

TEST(DaemonLogic, LifecycleEventsOfForeignCgroupsDoNotTriggerAnEvaluation) {
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 100 * MiB).cgroup_id = 4242;
  r.make(base_config());
  r.d->evaluate(at(1), "test", std::nullopt);
  ASSERT_EQ(r.scraped("pressured_evaluations_total"), 1u);
  auto lifecycle = [](EventType t, uint64_t id) {
    PressureEvent e;
    e.type = t;
    e.cgroup_id = id;
    e.kernel_ns = 1;
    return e;
  };
  // A systemd scope elsewhere in the hierarchy comes and goes: nothing to decide.
  std::vector<PressureEvent> foreign{lifecycle(EventType::CgroupPopulated, 777), lifecycle(EventType::CgroupRmdir, 777)};
  r.d->on_events(foreign, at(2));
  EXPECT_EQ(r.scraped("pressured_evaluations_total"), 1u);
  // The pod's own cgroup emptied: decide again from fresh numbers.
  std::vector<PressureEvent> own{lifecycle(EventType::CgroupPopulated, 4242)};
  r.d->on_events(own, at(3));
  EXPECT_EQ(r.scraped("pressured_evaluations_total"), 2u);
  // A threshold edge always counts.
  std::vector<PressureEvent> edge{lifecycle(EventType::ThresholdUp, 1)};
  r.d->on_events(edge, at(4));
  EXPECT_EQ(r.scraped("pressured_evaluations_total"), 3u);
}

TEST(DaemonLogic, ObservationFailureIsCountedNotFatal) {
  Rig r;
  r.obs.add("be", QosClass::BestEffort, 900 * MiB);
  r.make(base_config());
  r.obs.fail = true;
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_EQ(r.scraped("pressured_evaluations_total", {{"observation", "failed"}}), 1u);
  r.obs.fail = false;
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls.size(), 1u);
}

TEST(DaemonLogic, DiskReclaimCommandRunsWithATimeout) {
  auto ok = run_command_with_timeout({"/bin/sh", "-c", "exit 3"}, 5s);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);
  // The command outlives its timeout: it is killed and the error says so
  // (the 30 s sleep is what the test would wait for if it were not).
  auto slow = run_command_with_timeout({"/bin/sh", "-c", "sleep 30"}, 300ms);
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.error().code, ETIMEDOUT) << slow.error().message;
  EXPECT_FALSE(run_command_with_timeout({"/nonexistent/cmd"}, 1s).ok());
}

// Records the deadlines and the alarms the daemon sets: the two interfaces it
// uses, nothing of the notification sources behind them.
class FakeReactor final : public EventLoop, public KernelAlarms {
 public:
  Result<void> run(ReactorHandler&) override { return {}; }
  void stop() override {}
  bool post(std::function<void()>) override { return false; }
  Result<WatchId> set_watch(const std::string& path, uint64_t alarm_bytes) override {
    calls.emplace_back(path, alarm_bytes);
    auto it = ids.find(path);
    WatchId id = it != ids.end() ? it->second : ++next;
    ids[path] = id;
    levels[path] = alarm_bytes;
    return id;
  }
  std::optional<uint64_t> watched_counter(const std::string& path, Duration) const override {
    auto it = seen_counters.find(path);
    if (it == seen_counters.end()) return std::nullopt;
    return it->second;
  }
  Result<WatchId> set_watch_levels(const std::string& path, uint64_t file_bytes, uint64_t counter_bytes) override {
    counter_levels[path] = counter_bytes;
    return set_watch(path, file_bytes);
  }
  void wake_at(std::optional<TimePoint> deadline) override { deadlines.push_back(deadline); }
  Result<void> clear_watch(WatchId id) override {
    for (auto it = ids.begin(); it != ids.end(); ++it) {
      if (it->second == id) {
        levels.erase(it->first);
        counter_levels.erase(it->first);
        ids.erase(it);
        ++clears;
        return {};
      }
    }
    return Error{ENOENT, "no such watch"};
  }
  Result<void> add_source(std::unique_ptr<ReactorSource>) override { return {}; }
  bool is_loop_thread() const override { return on_loop; }
  Result<void> set_pid_alarm(uint64_t tasks) override {
    ++pid_calls;
    if (!pid_supported) return Error{ENOTSUP, "fake: no task hooks"};
    pid_alarms.push_back(tasks);
    return {};
  }

  Result<uint64_t> track_memcg(const std::string& path) override {
    ++track_calls;
    if (!track_supported) return Error{ENOTSUP, "fake: no activity hooks"};
    auto it = track_ids.find(path);
    if (it == track_ids.end()) return Error{ENOENT, "fake: no such cgroup " + path};
    tracked.insert(it->second);
    return it->second;
  }
  Result<void> untrack_memcg(uint64_t id) override {
    if (tracked.erase(id) == 0) return Error{ENOENT, "fake: not tracked"};
    return {};
  }

  /// How many times set_watch was called for `path`.
  long calls_for(const std::string& path) const {
    return std::count_if(calls.begin(), calls.end(), [&](const auto& c) { return c.first == path; });
  }

  std::vector<std::optional<TimePoint>> deadlines;  // what wake_at was given
  bool on_loop = true;                              // what is_loop_thread() says
  bool track_supported = true;
  int track_calls = 0;
  std::map<std::string, uint64_t> track_ids;  // the cgroups that exist: their ids
  std::set<uint64_t> tracked;
  bool pid_supported = true;
  int pid_calls = 0;
  std::vector<uint64_t> pid_alarms;
  std::vector<std::pair<std::string, uint64_t>> calls;
  std::map<std::string, WatchId> ids;
  std::map<std::string, uint64_t> levels;
  std::map<std::string, uint64_t> counter_levels;
  std::map<std::string, uint64_t> seen_counters;  // what the BPF charge hook "saw"
  int clears = 0;
  WatchId next = 0;
};

// The daemon, its alarms faked (FakeReactor) and the page counters the
// observer reads given as numbers: a v1 node whose kubepods sits right below
// the memory hierarchy's root, as on a real node.
struct WatchRig {
  const std::string root = "/fake";
  FakeObserver obs;
  FakeEvictor ev;
  FakeReactor reactor;
  std::unique_ptr<Daemon> d;
  uint64_t outside = 0;  // charged to the root's other children (system.slice, ...)

  WatchRig() {
    obs.layout_.memory_mount = root;
    obs.memcg.kubepods_path = obs.layout_.kubepods_memory_path;
    obs.memcg.scope_path = root;
    obs.memcg.scope_is_root = true;
    obs.scopes = {{7001, obs.layout_.kubepods_memory_path, "kubepods"}};
    reactor.track_ids[obs.layout_.kubepods_memory_path] = 7001;
    obs.capacity = 4096 * MiB;  // allocatable: plenty, no threshold on it
  }
  void kubepods_usage(uint64_t bytes) {
    obs.memcg.kubepods_usage = bytes;
    obs.memcg.children_usage = bytes + outside;
  }
  /// Memory charged outside kubepods (the root's page counter sees it).
  void outside_kubepods(uint64_t bytes) {
    outside = bytes;
    obs.memcg.children_usage = obs.memcg.kubepods_usage.value_or(0) + outside;
  }
  void node(uint64_t available, uint64_t capacity) {
    SignalObservation o;
    o.value = static_cast<double>(available);
    o.capacity = static_cast<double>(capacity);
    obs.node_available = o;
  }
  void make(uint64_t threshold_bytes) {
    Config c;
    Threshold t;
    t.signal = Signal::MemoryAvailable;
    t.kind = ThresholdKind::Hard;
    t.value.quantity = static_cast<double>(threshold_bytes);
    c.eviction.thresholds = {t};
    DaemonDeps deps;
    deps.observer = &obs;
    deps.evictor = &ev;
    deps.loop = &reactor;
    deps.alarms = &reactor;
    deps.boot_id = "test-boot";
    d = std::make_unique<Daemon>(std::move(c), deps);
  }
};

TEST(DaemonWatches, NodeThresholdIsArmedOnKubepodsAtUsagePlusHeadroom) {
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.node(600 * MiB, 2048 * MiB);
  r.make(100 * MiB);
  r.d->evaluate(at(1), "test", std::nullopt);
  const std::string kp = r.obs.layout_.kubepods_memory_path;
  // 300 MiB used + (600 - 100) MiB until the threshold.
  ASSERT_EQ(r.reactor.levels.count(kp), 1u);
  EXPECT_EQ(r.reactor.levels[kp], 800 * MiB);
  EXPECT_EQ(r.reactor.counter_levels[kp], 800 * MiB);
  EXPECT_EQ(r.d->armed_watch_levels().at(kp), 800 * MiB);
}

TEST(DaemonWatches, V2RootIsWatchedThroughItsPageCounter) {
  // v2: the root has no usage file; its page counter is the sum of its
  // children's, outside kubepods too (memory taken by system.slice counts).
  WatchRig r;
  r.obs.memcg.scope_file_usage = std::nullopt;
  r.kubepods_usage(300 * MiB);
  r.outside_kubepods(200 * MiB);
  r.node(600 * MiB, 2048 * MiB);
  r.make(100 * MiB);
  r.d->evaluate(at(1), "test", std::nullopt);
  const std::string root = r.root;
  // (300 + 200) MiB charged + (600 - 100) MiB until the threshold.
  ASSERT_EQ(r.reactor.counter_levels.count(root), 1u);
  EXPECT_EQ(r.reactor.counter_levels[root], 1000 * MiB);
  EXPECT_EQ(r.reactor.levels[root], 1000 * MiB);
  auto root_calls = [&] { return r.reactor.calls_for(root); };
  EXPECT_EQ(root_calls(), 1);
  // Memory moves outside kubepods: the root watch follows past the hysteresis.
  r.outside_kubepods(400 * MiB);
  r.node(400 * MiB, 2048 * MiB);
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(r.reactor.counter_levels[root], 1000 * MiB) << "same level: 700 charged + 300 headroom";
  EXPECT_EQ(root_calls(), 1);
  r.node(300 * MiB, 2048 * MiB);
  r.d->evaluate(at(3), "test", std::nullopt);
  EXPECT_EQ(r.reactor.counter_levels[root], 900 * MiB);
}

TEST(DaemonWatches, RootLevelFollowsThePageCounterBpfSaw) {
  // Dying cgroups hold charges no child's file shows: the root's page counter
  // is above the children's sum. A fresh BPF sample gives the difference,
  // which is added to the children's sum read at each evaluation (a stale
  // sample, e.g. from before an eviction freed memory, is never used as is).
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.outside_kubepods(200 * MiB);
  r.node(600 * MiB, 2048 * MiB);
  r.make(100 * MiB);
  const std::string root = r.root;
  r.reactor.seen_counters[root] = 570 * MiB;  // 70 MiB in dying cgroups
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_EQ(r.reactor.counter_levels[root], 1070 * MiB);
  // No fresh sample now; system.slice grew by 100 MiB and available fell by as much.
  r.reactor.seen_counters.clear();
  r.outside_kubepods(300 * MiB);
  r.node(200 * MiB, 2048 * MiB);
  r.d->evaluate(at(2), "test", std::nullopt);
  // 600 MiB children + 70 MiB remembered + 100 MiB headroom.
  EXPECT_EQ(r.reactor.counter_levels[root], 770 * MiB);
}

TEST(DaemonWatches, SandboxRootScopeNeverReachesAboveTheConfiguredRoot) {
  // cgroup_root points at a sandbox: the node scope is the sandbox, not the
  // hierarchy root, and its own usage file is its page counter.
  // (The observer names the scope: tests/node/memcg_counters_test.cpp.)
  WatchRig r;
  const std::string sandbox = r.root + "/sandbox";
  r.obs.memcg.kubepods_path = sandbox + "/kubepods";
  r.obs.memcg.kubepods_usage = 300 * MiB;
  r.obs.memcg.scope_path = sandbox;
  r.obs.memcg.scope_is_root = false;
  r.obs.memcg.scope_file_usage = 350 * MiB;
  r.obs.memcg.children_usage = std::nullopt;
  r.node(600 * MiB, 2048 * MiB);
  r.make(100 * MiB);
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_EQ(r.reactor.levels[sandbox], 850 * MiB);
  EXPECT_EQ(r.reactor.counter_levels[sandbox], 850 * MiB);
  EXPECT_EQ(r.reactor.levels.count(r.obs.layout_.memory_mount), 0u) << "nothing armed above the configured root";
}

TEST(DaemonWatches, SmallMovesDoNotReArmLargeOnesDo) {
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.node(600 * MiB, 2048 * MiB);
  r.make(100 * MiB);
  r.d->evaluate(at(1), "test", std::nullopt);
  const std::string kp = r.obs.layout_.kubepods_memory_path;
  auto kp_calls = [&] { return r.reactor.calls_for(kp); };
  ASSERT_EQ(kp_calls(), 1);
  // Hysteresis: max(8 MiB, 1% of 2048 MiB) = 20.48 MiB.
  EXPECT_EQ(watch_hysteresis(2048.0 * MiB), static_cast<uint64_t>(2048.0 * MiB / 100));
  r.kubepods_usage(310 * MiB);  // level 810 MiB: +10 MiB
  r.d->evaluate(at(2), "test", std::nullopt);
  r.node(585 * MiB, 2048 * MiB);  // level 795 MiB: -5 MiB from the armed level
  r.d->evaluate(at(3), "test", std::nullopt);
  EXPECT_EQ(kp_calls(), 1) << "moves within the hysteresis must not reset the watch";
  EXPECT_EQ(r.reactor.levels[kp], 800 * MiB);
  r.node(500 * MiB, 2048 * MiB);  // level 310 + 400 = 710 MiB: -90 MiB
  r.d->evaluate(at(4), "test", std::nullopt);
  ASSERT_EQ(kp_calls(), 2);
  EXPECT_EQ(r.reactor.levels[kp], 710 * MiB);
  // Already below the threshold: no level (the evaluation acts); the watch goes.
  r.node(50 * MiB, 2048 * MiB);
  r.d->evaluate(at(5), "test", std::nullopt);
  EXPECT_EQ(r.reactor.levels.count(kp), 0u);
  EXPECT_EQ(r.reactor.clears, 2) << "the kubepods and the root watch";
  // Back above: armed again.
  r.node(400 * MiB, 2048 * MiB);
  r.d->evaluate(at(6), "test", std::nullopt);
  EXPECT_EQ(r.reactor.levels[kp], 610 * MiB);
}

TEST(DaemonWatches, AnEarlyUpEdgeReArmsTheWatchFromScratch) {
  // The page counter also grows with page cache the kubelet's formula counts
  // as free, so an up edge can come while the threshold is not crossed. The
  // kernel side then sits "above": the daemon must re-arm it, even when the
  // level barely moved, or the real crossing would go unreported.
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.node(600 * MiB, 2048 * MiB);
  r.make(100 * MiB);
  r.d->evaluate(at(1), "test", std::nullopt);
  const std::string kp = r.obs.layout_.kubepods_memory_path;
  ASSERT_EQ(r.reactor.levels[kp], 800 * MiB);
  auto kp_calls = [&] { return r.reactor.calls_for(kp); };
  PressureEvent up;
  up.type = EventType::ThresholdUp;
  up.watch_id = r.reactor.ids[kp];
  up.kernel_ns = 1;
  r.node(590 * MiB, 2048 * MiB);  // barely moved: within the hysteresis
  std::vector<PressureEvent> evs{up};
  r.d->on_events(evs, at(2));
  EXPECT_EQ(r.reactor.clears, 1) << "the fired watch is cleared";
  EXPECT_EQ(kp_calls(), 2) << "and armed again";
  EXPECT_EQ(r.reactor.levels[kp], 790 * MiB);
  // Without an edge the same small move keeps the watch.
  r.node(585 * MiB, 2048 * MiB);
  r.d->evaluate(at(3), "test", std::nullopt);
  EXPECT_EQ(kp_calls(), 2);
}

TEST(DaemonWatches, KubepodsTiersAndPodsAreTrackedForReclaimActivity) {
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  const std::string kp = r.obs.layout_.kubepods_memory_path;
  r.obs.scopes = {{7001, kp, "kubepods"}, {7002, kp + "/burstable", "burstable"}, {7003, kp + "/besteffort", "besteffort"}};
  for (const auto& s : r.obs.scopes) r.reactor.track_ids[s.path] = s.id;
  r.node(600 * MiB, 2048 * MiB);
  Pod& a = r.obs.add("a", QosClass::Burstable, 10 * MiB, 5 * MiB);
  a.cgroup_id = 9001;
  Pod& b = r.obs.add("b", QosClass::BestEffort, 10 * MiB);
  b.cgroup_id = 9002;
  r.reactor.track_ids[r.obs.pods[0].cgroup_path] = 9001;
  r.reactor.track_ids[r.obs.pods[1].cgroup_path] = 9002;
  r.make(100 * MiB);
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_EQ(r.reactor.tracked, (std::set<uint64_t>{7001, 7002, 7003, 9001, 9002}));
  EXPECT_EQ(r.d->tracked_memcgs().size(), 5u);
  // Pod b leaves: untracked; the rest is not asked again.
  r.obs.pods.pop_back();
  const int calls = r.reactor.track_calls;
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(r.reactor.tracked.count(9002), 0u);
  EXPECT_EQ(r.reactor.tracked.count(9001), 1u);
  EXPECT_EQ(r.reactor.track_calls, calls);
}

TEST(DaemonWatches, NoActivityHooksAreAskedOnce) {
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.node(600 * MiB, 2048 * MiB);
  r.reactor.track_supported = false;
  r.make(100 * MiB);
  r.d->evaluate(at(1), "test", std::nullopt);
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(r.reactor.track_calls, 1);
  EXPECT_TRUE(r.d->tracked_memcgs().empty());
}

TEST(DaemonWatches, SoftGraceEndIsATimerNotTheNextTick) {
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.node(150 * MiB, 2048 * MiB);  // below the soft threshold (200 MiB) from the start
  r.obs.add("be", QosClass::BestEffort, 100 * MiB);
  Config c;
  Threshold t;
  t.signal = Signal::MemoryAvailable;
  t.kind = ThresholdKind::Soft;
  t.value.quantity = static_cast<double>(200 * MiB);
  t.grace_period = 5s;
  c.eviction.thresholds = {t};
  DaemonDeps deps;
  deps.observer = &r.obs;
  deps.evictor = &r.ev;
  deps.loop = &r.reactor;
  deps.alarms = &r.reactor;
  r.d = std::make_unique<Daemon>(c, deps);
  r.d->evaluate(at(1), "test", std::nullopt);
  ASSERT_EQ(r.reactor.deadlines.size(), 1u);
  ASSERT_TRUE(r.reactor.deadlines[0]);
  EXPECT_EQ(*r.reactor.deadlines[0], at(1) + 5s + 1ms);
  EXPECT_TRUE(r.ev.calls.empty());
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(r.reactor.deadlines.size(), 1u) << "the same deadline is not set again";
  // The deadline comes: the pod is evicted then, not at the next 1 s tick.
  r.d->on_deadline(at(1) + 5s + 1ms);
  ASSERT_FALSE(r.ev.calls.empty());
  EXPECT_EQ(r.ev.calls[0], "terminate be");
  // Pressure gone: no grace to wait for; what is left is MemoryPressure going
  // back to False a transition period after it was last met.
  r.obs.pods.clear();
  r.node(900 * MiB, 2048 * MiB);
  r.d->evaluate(at(30), "test", std::nullopt);
  ASSERT_FALSE(r.reactor.deadlines.empty());
  ASSERT_TRUE(r.reactor.deadlines.back().has_value());
  EXPECT_EQ(*r.reactor.deadlines.back(), at(30) + DaemonConfig{}.release_wait_timeout)
      << "the victim exited: the policy's release deadline comes first";
  r.d->evaluate(at(30.1), "test", std::nullopt);  // released (the pod is gone)
  ASSERT_FALSE(r.d->busy());
  ASSERT_TRUE(r.reactor.deadlines.back().has_value());
  EXPECT_EQ(*r.reactor.deadlines.back(), at(1) + 5s + 1ms + c.eviction.pressure_transition_period + 1ms);
}

TEST(DaemonWatches, ConditionGoesBackToFalseOnADeadline) {
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.node(50 * MiB, 2048 * MiB);  // below the hard threshold (100 MiB)
  r.make(100 * MiB);             // pressure-transition period: the default
  const Duration period = r.d->config().eviction.pressure_transition_period;
  ASSERT_GT(period, Duration::zero());
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_TRUE(r.d->last_decisions().conditions[static_cast<std::size_t>(Condition::MemoryPressure)]);
  r.node(900 * MiB, 2048 * MiB);  // relieved at 2 s: the condition stays True for the period
  r.d->evaluate(at(2), "test", std::nullopt);
  ASSERT_FALSE(r.reactor.deadlines.empty());
  ASSERT_TRUE(r.reactor.deadlines.back());
  EXPECT_EQ(*r.reactor.deadlines.back(), at(1) + period + 1ms);
  r.d->on_deadline(at(1) + period + 1ms);
  EXPECT_FALSE(r.d->last_decisions().conditions[static_cast<std::size_t>(Condition::MemoryPressure)]);
  EXPECT_FALSE(r.reactor.deadlines.back().has_value()) << "nothing left to wait for";
}

TEST(DaemonWatches, StaleReadKeepsTheWatch) {
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.node(600 * MiB, 2048 * MiB);
  r.make(100 * MiB);
  r.d->evaluate(at(1), "test", std::nullopt);
  const std::string kp = r.obs.layout_.kubepods_memory_path;
  ASSERT_EQ(r.reactor.levels[kp], 800 * MiB);
  r.node(50 * MiB, 2048 * MiB);  // would clear the watch, but the read failed
  r.obs.node_available->stale = true;
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(r.reactor.clears, 0);
  EXPECT_EQ(r.reactor.levels[kp], 800 * MiB);
}

TEST(DaemonWatches, CgroupV1RootKeepsItsOwnWatch) {
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.obs.memcg.scope_file_usage = 1500 * MiB;
  r.node(600 * MiB, 2048 * MiB);
  r.make(100 * MiB);
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_EQ(r.reactor.levels[r.obs.layout_.kubepods_memory_path], 800 * MiB);
  // The eventfd compares with the statistics-based usage file, BPF with the
  // page counter (the children's sum: kubepods only here).
  EXPECT_EQ(r.reactor.levels[r.obs.layout_.memory_mount], 2000 * MiB);
  EXPECT_EQ(r.reactor.counter_levels[r.obs.layout_.memory_mount], 800 * MiB);
}

TEST(DaemonWatches, PidThresholdArmsTheNodePidAlarmOnce) {
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.node(600 * MiB, 2048 * MiB);
  r.make(100 * MiB);
  Config c = r.d->config();
  Threshold pid;
  pid.signal = Signal::PidAvailable;
  pid.kind = ThresholdKind::Hard;
  pid.value.kind = ThresholdValue::Kind::Percent;
  pid.value.percent = 10;
  Threshold soft = pid;
  soft.kind = ThresholdKind::Soft;
  soft.value.percent = 20;
  soft.grace_period = 10s;
  c.eviction.thresholds.push_back(pid);
  c.eviction.thresholds.push_back(soft);
  DaemonDeps deps;
  deps.observer = &r.obs;
  deps.evictor = &r.ev;
  deps.loop = &r.reactor;
  deps.alarms = &r.reactor;
  r.d = std::make_unique<Daemon>(c, deps);
  SignalObservation o;
  o.capacity = 10000;
  o.value = 9000;  // 1000 tasks
  r.obs.pid_available = o;
  r.d->evaluate(at(1), "test", std::nullopt);
  // The lowest level: 10000 - 20% = 8000 tasks leave 2000 available, not yet
  // below the threshold; 8001 does (the soft threshold comes first).
  ASSERT_EQ(r.reactor.pid_alarms, std::vector<uint64_t>{8001});
  EXPECT_EQ(r.d->armed_pid_alarm(), 8001u);
  r.obs.pid_available->value = 8500;  // the count moved; the alarm level did not
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(r.reactor.pid_alarms.size(), 1u);
  r.obs.pid_available->capacity = 20000;  // pid_max raised: the alarm follows
  r.d->evaluate(at(3), "test", std::nullopt);
  EXPECT_EQ(r.reactor.pid_alarms, (std::vector<uint64_t>{8001, 16001}));
}

TEST(DaemonWatches, NoPidAlarmSupportIsAskedOnce) {
  WatchRig r;
  r.reactor.pid_supported = false;
  Config c;
  Threshold pid;
  pid.signal = Signal::PidAvailable;
  pid.kind = ThresholdKind::Hard;
  pid.value.quantity = 100;
  c.eviction.thresholds = {pid};
  DaemonDeps deps;
  deps.observer = &r.obs;
  deps.evictor = &r.ev;
  deps.loop = &r.reactor;
  deps.alarms = &r.reactor;
  r.d = std::make_unique<Daemon>(c, deps);
  SignalObservation o;
  o.capacity = 1000;
  o.value = 900;
  r.obs.pid_available = o;
  r.d->evaluate(at(1), "test", std::nullopt);
  r.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(r.d->armed_pid_alarm(), 0u);
  EXPECT_TRUE(r.reactor.pid_alarms.empty());
  EXPECT_EQ(r.reactor.pid_calls, 1) << "ENOTSUP: not asked again on every evaluation";
}

TEST(DaemonDeathTest, EvaluatingOffTheLoopThreadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  WatchRig r;
  r.kubepods_usage(300 * MiB);
  r.node(600 * MiB, 2048 * MiB);
  r.make(100 * MiB);
  r.d->evaluate(at(1), "test", std::nullopt);  // on the loop: fine
  EXPECT_EQ(r.d->stats().full_observations.load(), 1u);
  r.reactor.on_loop = false;
  EXPECT_DEATH(r.d->evaluate(at(2), "test", std::nullopt), "Daemon::evaluate called off the event loop's thread");
}

}  // namespace
}  // namespace pressured
