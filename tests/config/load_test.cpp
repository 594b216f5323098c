#include "config/load.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "config/quantity.hpp"

namespace pressured {
namespace {

constexpr double kMi = 1024.0 * 1024;
constexpr double kGi = kMi * 1024;

Config ok(const std::string& yaml, const ConfigOptions& flags = {}, std::vector<std::string>* warnings = nullptr) {
  std::vector<std::string> local;
  auto r = parse_config_yaml(yaml, flags, warnings ? warnings : &local);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Config{};
}

// Returns the error message; fails the test when the config is accepted.
std::string fails(const std::string& yaml, const ConfigOptions& flags = {}) {
  std::vector<std::string> warnings;
  auto r = parse_config_yaml(yaml, flags, &warnings);
  EXPECT_FALSE(r.ok()) << "accepted:\n" << yaml;
  return r.ok() ? "" : r.error().message;
}

const Threshold* find(const Config& c, Signal s, ThresholdKind k) {
  for (const auto& t : c.eviction.thresholds) {
    if (t.signal == s && t.kind == k) return &t;
  }
  return nullptr;
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << "message: " << (text)

TEST(ConfigDefaults, KubeletDefaults) {
  Config c = ok("");
  ASSERT_EQ(c.eviction.thresholds.size(), 5u);
  auto* mem = find(c, Signal::MemoryAvailable, ThresholdKind::Hard);
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->value.kind, ThresholdValue::Kind::Quantity);
  EXPECT_DOUBLE_EQ(mem->value.quantity, 100 * kMi);
  auto pct = [&](Signal s) {
    auto* t = find(c, s, ThresholdKind::Hard);
    EXPECT_NE(t, nullptr) << name(s);
    return t && t->value.kind == ThresholdValue::Kind::Percent ? t->value.percent : -1;
  };
  EXPECT_DOUBLE_EQ(pct(Signal::NodefsAvailable), 10);
  EXPECT_DOUBLE_EQ(pct(Signal::NodefsInodesFree), 5);
  EXPECT_DOUBLE_EQ(pct(Signal::ImagefsAvailable), 15);
  EXPECT_DOUBLE_EQ(pct(Signal::ImagefsInodesFree), 5);
  EXPECT_EQ(c.eviction.pressure_transition_period, std::chrono::minutes(5));
  EXPECT_EQ(c.eviction.max_pod_grace_period_seconds, 0);
  EXPECT_EQ(c.eviction.daemonset_pods, DaemonSetPolicy::EvictLast);
  EXPECT_FALSE(c.eviction.merge_default_eviction_settings);
}

TEST(ConfigEviction, SettingEvictionHardDropsTheOtherDefaults) {
  Config c = ok("evictionHard:\n  memory.available: 500Mi\n");
  ASSERT_EQ(c.eviction.thresholds.size(), 1u);
  EXPECT_DOUBLE_EQ(c.eviction.thresholds[0].value.quantity, 500 * kMi);
}

TEST(ConfigEviction, MergeDefaultEvictionSettingsKeepsTheOthers) {
  Config c = ok("mergeDefaultEvictionSettings: true\nevictionHard:\n  memory.available: 500Mi\n");
  ASSERT_EQ(c.eviction.thresholds.size(), 5u);
  EXPECT_DOUBLE_EQ(find(c, Signal::MemoryAvailable, ThresholdKind::Hard)->value.quantity, 500 * kMi);
  EXPECT_DOUBLE_EQ(find(c, Signal::ImagefsAvailable, ThresholdKind::Hard)->value.percent, 15);
}

TEST(ConfigEviction, EmptyEvictionHardMeansNoHardThresholds) {
  Config c = ok("evictionHard: {}\n");
  EXPECT_TRUE(c.eviction.thresholds.empty());
}

TEST(ConfigEviction, SoftThresholdsWithGracePeriodsAndMinimumReclaim) {
  Config c = ok(R"(
evictionHard: {memory.available: 100Mi, nodefs.available: 1Gi}
evictionSoft: {memory.available: 1.5Gi, nodefs.available: 15%}
evictionSoftGracePeriod: {memory.available: 1m30s, nodefs.available: 2m}
evictionMinimumReclaim: {memory.available: 0Mi, nodefs.available: 500Mi}
evictionMaxPodGracePeriod: 30
evictionPressureTransitionPeriod: 30s
daemonSetPods: never
)");
  ASSERT_EQ(c.eviction.thresholds.size(), 4u);
  auto* soft = find(c, Signal::MemoryAvailable, ThresholdKind::Soft);
  ASSERT_NE(soft, nullptr);
  EXPECT_DOUBLE_EQ(soft->value.quantity, 1.5 * kGi);
  EXPECT_EQ(soft->grace_period, std::chrono::seconds(90));
  auto* nsoft = find(c, Signal::NodefsAvailable, ThresholdKind::Soft);
  ASSERT_NE(nsoft, nullptr);
  EXPECT_DOUBLE_EQ(nsoft->value.percent, 15);
  EXPECT_EQ(nsoft->grace_period, std::chrono::minutes(2));
  // Minimum reclaim applies to every threshold of the signal.
  EXPECT_DOUBLE_EQ(find(c, Signal::NodefsAvailable, ThresholdKind::Hard)->min_reclaim.quantity, 500 * kMi);
  EXPECT_DOUBLE_EQ(nsoft->min_reclaim.quantity, 500 * kMi);
  EXPECT_EQ(c.eviction.max_pod_grace_period_seconds, 30);
  EXPECT_EQ(c.eviction.pressure_transition_period, std::chrono::seconds(30));
  EXPECT_EQ(c.eviction.daemonset_pods, DaemonSetPolicy::Never);
  // Hard thresholds come first, each kind in signal order.
  EXPECT_EQ(c.eviction.thresholds[0].kind, ThresholdKind::Hard);
  EXPECT_EQ(c.eviction.thresholds[0].signal, Signal::MemoryAvailable);
  EXPECT_EQ(c.eviction.thresholds[3].kind, ThresholdKind::Soft);
  EXPECT_EQ(c.eviction.thresholds[3].signal, Signal::NodefsAvailable);
}

TEST(ConfigEviction, PsiAndPidSignals) {
  Config c = ok(R"(
evictionHard: {memory.pressure.full.avg10: 40, pid.available: 5%}
evictionSoft: {memory.pressure.some.avg60: "12.5"}
evictionSoftGracePeriod: {memory.pressure.some.avg60: 30s}
)");
  EXPECT_DOUBLE_EQ(find(c, Signal::MemoryPressureFullAvg10, ThresholdKind::Hard)->value.quantity, 40);
  EXPECT_DOUBLE_EQ(find(c, Signal::PidAvailable, ThresholdKind::Hard)->value.percent, 5);
  EXPECT_DOUBLE_EQ(find(c, Signal::MemoryPressureSomeAvg60, ThresholdKind::Soft)->value.quantity, 12.5);
  EXPECT_HAS(fails("evictionHard: {memory.pressure.some.avg10: 150}\n"), "over 100");
}

TEST(ConfigEviction, IoPressureWarnsThatItNeverEvicts) {
  std::vector<std::string> w;
  Config c = ok("evictionHard: {io.pressure.full.avg10: 50}\n", {}, &w);
  EXPECT_EQ(c.eviction.thresholds.size(), 1u);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_HAS(w[0], "never evicts");
}

TEST(ConfigEviction, ZeroAndHundredPercentAreIgnoredWithAWarning) {
  std::vector<std::string> w;
  Config c = ok("evictionHard: {memory.available: 100Mi, nodefs.available: 0%, imagefs.available: 100%}\n", {}, &w);
  ASSERT_EQ(c.eviction.thresholds.size(), 1u);
  EXPECT_EQ(c.eviction.thresholds[0].signal, Signal::MemoryAvailable);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_HAS(w[0], "evictionHard.nodefs.available");
  EXPECT_HAS(w[0], "'0%' is ignored");
  EXPECT_HAS(w[1], "'100%' is ignored");
}

TEST(ConfigEviction, IgnoredSoftThresholdTakesItsGracePeriodAlong) {
  std::vector<std::string> w;
  Config c = ok("evictionHard: {}\nevictionSoft: {memory.available: 0%}\nevictionSoftGracePeriod: {memory.available: 1m}\n",
                {}, &w);
  EXPECT_TRUE(c.eviction.thresholds.empty());
  EXPECT_EQ(w.size(), 1u);
}

TEST(ConfigErrors, NameTheFieldAndTheValue) {
  auto e = fails("evictionHard: {memory.avail: 100Mi}\n");
  EXPECT_HAS(e, "evictionHard");
  EXPECT_HAS(e, "unknown signal 'memory.avail'");

  e = fails("evictionHard: {memory.available: 100Mb}\n");
  EXPECT_HAS(e, "evictionHard.memory.available");
  EXPECT_HAS(e, "'100Mb'");

  e = fails("evictionHard: {nodefs.available: 120%}\n");
  EXPECT_HAS(e, "evictionHard.nodefs.available");
  EXPECT_HAS(e, "'120%' is over 100%");

  e = fails("evictionHard: {nodefs.available: -5%}\n");
  EXPECT_HAS(e, "'-5%'");

  e = fails("evictionHard: {memory.available: 0}\n");
  EXPECT_HAS(e, "must be positive");

  e = fails("evictionSoft: {memory.available: 1Gi}\n");
  EXPECT_HAS(e, "evictionSoft.memory.available");
  EXPECT_HAS(e, "'1Gi' has no grace period");

  e = fails("evictionSoftGracePeriod: {memory.available: 1m}\n");
  EXPECT_HAS(e, "evictionSoftGracePeriod.memory.available");
  EXPECT_HAS(e, "no soft threshold");

  e = fails("evictionSoft: {memory.available: 1Gi}\nevictionSoftGracePeriod: {memory.available: -1s}\n");
  EXPECT_HAS(e, "evictionSoftGracePeriod.memory.available");
  EXPECT_HAS(e, "'-1s' is negative");

  e = fails("evictionSoft: {memory.available: 1Gi}\nevictionSoftGracePeriod: {memory.available: 90}\n");
  EXPECT_HAS(e, "missing unit");

  e = fails("evictionPressureTransitionPeriod: -5m\n");
  EXPECT_HAS(e, "evictionPressureTransitionPeriod");
  EXPECT_HAS(e, "'-5m' is negative");

  e = fails("evictionMaxPodGracePeriod: 2147483648\n");
  EXPECT_HAS(e, "evictionMaxPodGracePeriod");
  EXPECT_HAS(e, "outside the 32-bit range");

  e = fails("softEvictionGraceCeilingSeconds: -1\n");
  EXPECT_HAS(e, "softEvictionGraceCeilingSeconds");
  EXPECT_HAS(e, "'-1' is negative");

  e = fails("evictionMaxPodGracePeriod: 1m\n");
  EXPECT_HAS(e, "not a whole number of seconds");

  e = fails("evictionMinimumReclaim: {memory.available: -1Mi}\n");
  EXPECT_HAS(e, "evictionMinimumReclaim.memory.available");

  e = fails("daemonSetPods: sometimes\n");
  EXPECT_HAS(e, "'sometimes' is not one of evictLast, normal, never");

  e = fails("mergeDefaultEvictionSettings: maybe\n");
  EXPECT_HAS(e, "mergeDefaultEvictionSettings");

  e = fails("evictionHard: [memory.available<1Gi]\n");
  EXPECT_HAS(e, "not a mapping");
}

// The kubelet's LocalStorageCapacityIsolation gate: on by default, off only
// when said so, anything else an error naming the gate.
TEST(ConfigEviction, LocalStorageCapacityIsolationGate) {
  EXPECT_TRUE(ok("").eviction.local_storage_capacity_isolation);
  EXPECT_TRUE(ok("featureGates: {}\n").eviction.local_storage_capacity_isolation);
  EXPECT_TRUE(ok("featureGates: {LocalStorageCapacityIsolation: true}\n").eviction.local_storage_capacity_isolation);
  Config off = ok("featureGates: {LocalStorageCapacityIsolation: false}\n");
  EXPECT_FALSE(off.eviction.local_storage_capacity_isolation);
  EXPECT_FALSE(ok(dump_config(off)).eviction.local_storage_capacity_isolation) << "survives check-config";
  EXPECT_HAS(dump_config(ok("")), "LocalStorageCapacityIsolation: true");
  auto e = fails("featureGates: {LocalStorageCapacityIsolation: maybe}\n");
  EXPECT_HAS(e, "featureGates.LocalStorageCapacityIsolation");
  EXPECT_HAS(e, "'maybe' is not a boolean");
  e = fails("featureGates: {LocalStorageCapacityIsolaton: false}\n");
  EXPECT_HAS(e, "featureGates.LocalStorageCapacityIsolaton: unrecognized feature gate");
  EXPECT_HAS(fails("featureGates: [LocalStorageCapacityIsolation]\n"), "featureGates: a list is not a mapping");
}

TEST(ConfigErrors, UnknownKeysAreNamed) {
  EXPECT_HAS(fails("evictionHardd: {}\n"), "evictionHardd: unknown key");
  EXPECT_HAS(fails("cgroup:\n  cgroupRooot: /x\n"), "cgroup.cgroupRooot: unknown key");
  EXPECT_HAS(fails("events:\n  bpf: maybe\n"), "events.bpf: 'maybe' is not one of auto, on, off");
  EXPECT_HAS(fails("cgroup: 5\n"), "cgroup: '5' is not a mapping");
  EXPECT_HAS(fails("- a\n- b\n"), "top level must be a mapping");
  EXPECT_HAS(fails("evictionHard: {memory.available: 1Gi\n"), "line");
  // Odd shapes are errors, never crashes.
  fails("? [a, b]\n: c\n");
  fails("cgroup:\n  ? [a]\n  : b\n");
  fails("evictionHard:\n  ? [memory.available]\n  : 1Gi\n");
  ConfigOptions f;
  f.kubeconfig = "/kc";
  EXPECT_HAS(fails("kubernetes: [1]\n", f), "kubernetes");
}

TEST(ConfigSections, EveryFieldIsReachable) {
  Config c = ok(R"(
cgroup:
  cgroupMount: /mnt/cg
  cgroupRoot: /kube
  kubepodsName: kubepods.slice
  driver: systemd
  procRoot: /host/proc
  nodefsPath: /n
  imagefsPath: /i
  podLogsPath: /l
  memoryAvailableMode: excludeReserved
  allocatableMemoryBytes: 8Gi
  diskWalkInterval: 2m
  mountinfoPath: /host/proc/1/mountinfo
  reclaimableActiveFilePercent: 25.5
  diskWalkBudget: 2s
  diskWalkMaxEntries: 10k
pods:
  kind: kubelet
  kubeletUrl: https://node:10250/pods
  tokenFile: /t
  caFile: /ca
  insecureSkipVerify: true
  refreshInterval: 10s
  timeout: 1s
events:
  bpf: off
  psiTriggers: false
  memcgNotifications: false
  safetyNetInterval: 250ms
  forcedPollInterval: 100ms
  ringBufferBytes: 1Mi
  chargeSampleEvery: 8
  psiWindow: 1s
  psiStall: 100ms
  reactorNice: -10
  reactorRtPriority: 5
kubernetes:
  enabled: true
  kubeconfig: /k
  nodeName: n1
  requestTimeout: 3s
  conditionPrefix: Px
metrics:
  listen: 127.0.0.1:9000
  topPods: 5
log:
  level: debug
  format: json
daemon:
  dryRun: true
  stateFile: /s.json
  diskReclaimCommand: [crictl, rmi, --prune]
  diskReclaimTimeout: 30s
  releaseWaitTimeout: 5s
  softKillMargin: 0s
  releaseVictimMemory: false
  evictAheadOfRelease: true
  releaseHorizon: 250ms
)");
  EXPECT_EQ(c.observe.cgroup_mount, "/mnt/cg");
  EXPECT_EQ(c.observe.cgroup_root, "/kube");
  EXPECT_EQ(c.observe.kubepods_name, "kubepods.slice");
  EXPECT_EQ(c.observe.driver, CgroupDriver::Systemd);
  EXPECT_EQ(c.observe.proc_root, "/host/proc");
  EXPECT_EQ(c.observe.memory_available_mode, MemoryAvailableMode::ExcludeReserved);
  EXPECT_EQ(c.observe.allocatable_memory_bytes, uint64_t(8) << 30);
  EXPECT_EQ(c.observe.disk_walk_interval, std::chrono::minutes(2));
  EXPECT_EQ(c.observe.mountinfo_path, "/host/proc/1/mountinfo");
  EXPECT_DOUBLE_EQ(c.observe.reclaimable_active_file_percent, 25.5);
  EXPECT_EQ(c.observe.disk_walk_budget, std::chrono::seconds(2));
  EXPECT_EQ(c.observe.disk_walk_max_entries, 10000u);
  EXPECT_EQ(c.events.reactor_nice, -10);
  EXPECT_EQ(c.events.reactor_rt_priority, 5);
  EXPECT_EQ(c.observe.pods.kind, PodSourceKind::Kubelet);
  EXPECT_TRUE(c.observe.pods.insecure_skip_verify);
  EXPECT_EQ(c.events.bpf, BpfMode::Off);
  EXPECT_FALSE(c.events.psi_triggers);
  EXPECT_EQ(c.events.forced_poll_interval, std::chrono::milliseconds(100));
  EXPECT_EQ(c.events.ring_buffer_bytes, 1u << 20);
  EXPECT_EQ(c.events.charge_sample_every, 8u);
  EXPECT_TRUE(c.kubernetes.enabled);
  EXPECT_EQ(c.kubernetes.node_name, "n1");
  EXPECT_EQ(c.metrics.listen, "127.0.0.1:9000");
  EXPECT_EQ(c.metrics.top_pods, 5u);
  EXPECT_EQ(c.log.level, "debug");
  EXPECT_EQ(c.log.format, "json");
  EXPECT_TRUE(c.daemon.dry_run);
  EXPECT_EQ(c.daemon.disk_reclaim_command, (std::vector<std::string>{"crictl", "rmi", "--prune"}));
  EXPECT_EQ(c.daemon.soft_kill_margin, Duration(0));
  EXPECT_FALSE(c.daemon.release_victim_memory);
  EXPECT_TRUE(c.daemon.evict_ahead_of_release);
  EXPECT_EQ(c.daemon.release_horizon, std::chrono::milliseconds(250));
}

TEST(ConfigValidation, CrossFieldRules) {
  EXPECT_HAS(fails("pods: {kind: file}\n"), "pods.path");
  EXPECT_HAS(fails("log: {level: loud}\n"), "log.level: 'loud'");
  EXPECT_HAS(fails("log: {format: xml}\n"), "log.format: 'xml'");
  EXPECT_HAS(fails("metrics: {listen: 'localhost'}\n"), "metrics.listen: 'localhost'");
  EXPECT_HAS(fails("metrics: {listen: ':99999'}\n"), "metrics.listen");
  EXPECT_HAS(fails("events: {ringBufferBytes: 1000}\n"), "events.ringBufferBytes: '1k'");
  EXPECT_HAS(fails("events: {psiWindow: 100ms}\n"), "events.psiWindow");
  EXPECT_HAS(fails("events: {safetyNetInterval: 0s}\n"), "events.safetyNetInterval: '0s' must be positive");
  EXPECT_HAS(fails("events: {safetyNetInterval: -1s}\n"), "events.safetyNetInterval: '-1s' is negative");
  EXPECT_HAS(fails("cgroup: {cgroupRoot: relative}\n"), "cgroup.cgroupRoot");
  EXPECT_HAS(fails("metrics: {topPods: -3}\n"), "metrics.topPods: '-3' is negative");
  EXPECT_HAS(fails("daemon: {releaseHorizon: -1s}\n"), "daemon.releaseHorizon: '-1s' is negative");
  EXPECT_HAS(fails("events: {chargeSampleEvery: 1.5}\n"), "not a whole number");
  EXPECT_HAS(fails("cgroup: {reclaimableActiveFilePercent: 150}\n"), "cgroup.reclaimableActiveFilePercent: '150'");
  EXPECT_HAS(fails("cgroup: {reclaimableActiveFilePercent: lots}\n"), "'lots' is not a number");
  EXPECT_HAS(fails("events: {reactorNice: -30}\n"), "events.reactorNice: '-30'");
  EXPECT_HAS(fails("events: {reactorRtPriority: 1.5}\n"), "events.reactorRtPriority: '1.5' is not a whole number");
  EXPECT_HAS(fails("events: {reactorRtPriority: 100}\n"), "events.reactorRtPriority: '100'");
  ok("metrics: {listen: ''}\n");  // empty disables the endpoint
}

TEST(ConfigFlags, OverrideTheFile) {
  ConfigOptions f;
  f.eviction_hard = "memory.available<1Gi, nodefs.available<20%";
  f.eviction_soft = "memory.available<2Gi";
  f.eviction_soft_grace_period = "memory.available=1m30s";
  f.eviction_minimum_reclaim = "memory.available=256Mi";
  f.eviction_max_pod_grace_period = "45";
  f.eviction_pressure_transition_period = "10s";
  f.cgroup_root = "/flag";
  f.pod_file = "/pods.json";
  f.kubeconfig = "/kc";
  f.dry_run = true;
  f.poll_interval = "200ms";
  f.log_level = "warn";
  Config c = ok("evictionHard: {memory.available: 100Mi, imagefs.available: 1%}\ncgroup: {cgroupRoot: /file}\n", f);
  ASSERT_EQ(c.eviction.thresholds.size(), 3u);  // the flag replaced the whole evictionHard map
  EXPECT_DOUBLE_EQ(find(c, Signal::MemoryAvailable, ThresholdKind::Hard)->value.quantity, kGi);
  EXPECT_DOUBLE_EQ(find(c, Signal::NodefsAvailable, ThresholdKind::Hard)->value.percent, 20);
  EXPECT_EQ(find(c, Signal::ImagefsAvailable, ThresholdKind::Hard), nullptr);
  auto* soft = find(c, Signal::MemoryAvailable, ThresholdKind::Soft);
  ASSERT_NE(soft, nullptr);
  EXPECT_EQ(soft->grace_period, std::chrono::seconds(90));
  EXPECT_DOUBLE_EQ(soft->min_reclaim.quantity, 256 * kMi);
  EXPECT_EQ(c.eviction.max_pod_grace_period_seconds, 45);
  EXPECT_EQ(c.eviction.pressure_transition_period, std::chrono::seconds(10));
  EXPECT_EQ(c.observe.cgroup_root, "/flag");
  EXPECT_EQ(c.observe.pods.kind, PodSourceKind::File);  // --pod-file implies it
  EXPECT_EQ(c.observe.pods.path, "/pods.json");
  EXPECT_TRUE(c.kubernetes.enabled);
  EXPECT_EQ(c.kubernetes.kubeconfig, "/kc");
  EXPECT_TRUE(c.daemon.dry_run);
  EXPECT_EQ(c.events.forced_poll_interval, std::chrono::milliseconds(200));
  EXPECT_EQ(c.log.level, "warn");
}

TEST(ConfigFlags, ErrorsNameTheFlag) {
  ConfigOptions f;
  f.eviction_hard = "memory.available<10Q";
  auto e = fails("", f);
  EXPECT_HAS(e, "evictionHard.memory.available (--eviction-hard)");
  EXPECT_HAS(e, "'10Q'");

  f = {};
  f.eviction_hard = "memory.available>1Gi";
  EXPECT_HAS(fails("", f), "takes '<'");
  f.eviction_hard = "memory.pressure.some.avg10<10";
  EXPECT_HAS(fails("", f), "takes '>'");
  f.eviction_hard = "memory.available=1Gi";
  EXPECT_HAS(fails("", f), "--eviction-hard: 'memory.available=1Gi' is not <signal><operator><quantity>");
  f.eviction_hard = "memory.available<1Gi,memory.available<2Gi";
  EXPECT_HAS(fails("", f), "repeats signal");
  f.eviction_hard = "disk.available<1Gi";
  EXPECT_HAS(fails("", f), "unknown signal 'disk.available'");

  f = {};
  f.cgroup_driver = "runc";
  EXPECT_HAS(fails("", f), "cgroup.driver (--cgroup-driver): 'runc'");
  f = {};
  f.eviction_pressure_transition_period = "-1m";
  EXPECT_HAS(fails("", f), "(--eviction-pressure-transition-period): '-1m' is negative");
  f = {};
  f.soft_eviction_grace_ceiling = "-30";
  EXPECT_HAS(fails("", f), "(--soft-eviction-grace-ceiling): '-30' is negative");
}

// The kubelet's field is an int32 and takes negative values (a soft eviction
// then gets 1 s: docs/engine.md); pressured reads them as the kubelet does.
TEST(ConfigLoad, NegativeMaxPodGracePeriodIsTheKubeletsOneSecond) {
  Config c = ok("evictionMaxPodGracePeriod: -1\nsoftEvictionGraceCeilingSeconds: 0\n");
  EXPECT_EQ(c.eviction.max_pod_grace_period_seconds, -1);
  EXPECT_EQ(c.eviction.soft_grace_ceiling_seconds, 0);
  EXPECT_EQ(ok("").eviction.soft_grace_ceiling_seconds, 3600);
}

TEST(ConfigFlags, EmptyEvictionHardFlagDisablesHardThresholds) {
  ConfigOptions f;
  f.eviction_hard = "";
  Config c = ok("", f);
  EXPECT_TRUE(c.eviction.thresholds.empty());
}

TEST(ConfigFlags, RegisteredOnTheCommandLine) {
  CLI::App app;
  auto* sub = app.add_subcommand("x");
  auto opts = add_config_flags(sub);
  std::vector<std::string> args{"x", "--dry-run", "--eviction-soft-grace-period", "memory.available=1m",
                                "--eviction-hard=memory.available<1Gi", "--config", "/c.yaml", "--node-name", "n7",
                                "--bpf", "off"};
  std::reverse(args.begin(), args.end());  // CLI11 takes them reversed
  app.parse(args);
  EXPECT_EQ(opts->config_path, "/c.yaml");
  EXPECT_EQ(opts->eviction_hard, "memory.available<1Gi");
  EXPECT_EQ(opts->eviction_soft_grace_period, "memory.available=1m");
  EXPECT_EQ(opts->node_name, "n7");
  EXPECT_EQ(opts->bpf, "off");
  EXPECT_EQ(opts->dry_run, true);
  EXPECT_FALSE(opts->eviction_soft.has_value());
  EXPECT_FALSE(opts->cgroup_root.has_value());
}

TEST(ConfigDump, RoundTrips) {
  Config c = ok(R"(
evictionHard: {memory.available: 100Mi, nodefs.available: 7.5%, memory.pressure.full.avg10: 40}
evictionSoft: {memory.available: 1536Mi}
evictionSoftGracePeriod: {memory.available: 1m30s}
evictionMinimumReclaim: {memory.available: 50Mi, nodefs.available: 1%}
evictionMaxPodGracePeriod: 20
evictionPressureTransitionPeriod: 45s
daemonSetPods: normal
events: {forcedPollInterval: 100ms}
cgroup: {allocatableMemoryBytes: 3Gi}
daemon: {diskReclaimCommand: [a, "b c"]}
)");
  const std::string text = dump_config(c);
  Config back = ok(text);
  EXPECT_EQ(back.eviction.thresholds, c.eviction.thresholds);
  EXPECT_EQ(back.eviction.max_pod_grace_period_seconds, 20);
  EXPECT_EQ(back.eviction.daemonset_pods, DaemonSetPolicy::Normal);
  EXPECT_EQ(back.events.forced_poll_interval, c.events.forced_poll_interval);
  EXPECT_EQ(back.observe.allocatable_memory_bytes, c.observe.allocatable_memory_bytes);
  EXPECT_EQ(back.daemon.disk_reclaim_command, c.daemon.disk_reclaim_command);
  EXPECT_EQ(dump_config(back), text);
  EXPECT_HAS(text, "memory.available: 100Mi");
  EXPECT_HAS(text, "evictionPressureTransitionPeriod: 45s");

  // No hard thresholds must survive the round trip (not come back as defaults).
  Config none = ok("evictionHard: {}\n");
  EXPECT_TRUE(ok(dump_config(none)).eviction.thresholds.empty());
}

TEST(ConfigFile, LoadsAFileAndReportsUnreadableOnes) {
  const std::string path = ::testing::TempDir() + "/pressured-load-test.yaml";
  {
    std::ofstream out(path);
    out << "evictionHard:\n  memory.available: 300Mi\nlog:\n  level: bogus\n";
  }
  ConfigOptions o;
  o.config_path = path;
  std::vector<std::string> w;
  auto r = load_config(o, &w);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, path);
  EXPECT_HAS(r.error().message, "log.level: 'bogus'");
  o.log_level = "debug";  // the flag wins over the file's bad value
  r = load_config(o, &w);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(r->eviction.thresholds.at(0).value.quantity, 300 * kMi);
  std::remove(path.c_str());

  o.config_path = "/nonexistent/pressured.yaml";
  r = load_config(o, &w);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "/nonexistent/pressured.yaml");
}

TEST(ConfigFile, ShippedExampleIsValid) {
  ConfigOptions o;
  o.config_path = std::string(PRESSURED_SOURCE_DIR) + "/docs/examples/pressured.yaml";
  std::vector<std::string> w;
  auto r = load_config(o, &w);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(w.empty()) << w.front();
  EXPECT_GE(r->eviction.thresholds.size(), 5u);
}

TEST(ConfigValidation, HandBuiltConfigsAreCheckedToo) {
  Config c;
  c.eviction.max_pod_grace_period_seconds = int64_t{INT32_MAX} + 1;
  EXPECT_FALSE(validate_config(c).ok());
  c = Config{};
  c.eviction.soft_grace_ceiling_seconds = -1;
  EXPECT_FALSE(validate_config(c).ok());
  c = Config{};
  Threshold t;
  t.kind = ThresholdKind::Soft;
  t.value = ThresholdValue{ThresholdValue::Kind::Percent, 0, 150};
  c.eviction.thresholds.push_back(t);
  auto r = validate_config(c);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "evictionSoft.memory.available: '150%'");
  EXPECT_TRUE(validate_config(Config{}).ok());
}

TEST(ConfigK8s, ApiServerPodSourceAndSchedulingTaint) {
  Config d = ok("{}\n");
  EXPECT_TRUE(d.kubernetes.taint_nodes) << "the taint is on by default";
  EXPECT_EQ(d.kubernetes.taint_key_prefix, "pressured.io/");
  EXPECT_EQ(d.observe.pods.watch_timeout, std::chrono::seconds(60));

  Config c = ok(R"(
pods: {kind: apiserver, watchTimeout: 5m}
kubernetes: {enabled: true, kubeconfig: /etc/k.conf, nodeName: n7, taintNodes: false, taintKeyPrefix: example.com/}
)");
  EXPECT_EQ(c.observe.pods.kind, PodSourceKind::ApiServer);
  EXPECT_EQ(c.observe.pods.watch_timeout, std::chrono::minutes(5));
  // The watch uses the reporter's connection and node.
  EXPECT_EQ(c.observe.pods.kubeconfig, "/etc/k.conf");
  EXPECT_EQ(c.observe.pods.node_name, "n7");
  EXPECT_FALSE(c.kubernetes.taint_nodes);
  EXPECT_EQ(c.kubernetes.taint_key_prefix, "example.com/");
  ok("kubernetes: {taintKeyPrefix: pressured-}\n");  // no DNS prefix: plain names

  EXPECT_HAS(fails("pods: {watchTimeout: 0s}\n"), "pods.watchTimeout");
  EXPECT_HAS(fails("pods: {watchTimeout: 2h}\n"), "pods.watchTimeout: '2h0m0s' must be between 1s and 1h");
  EXPECT_HAS(fails("pods: {kind: apiservr}\n"), "apiserver");
  EXPECT_HAS(fails("kubernetes: {taintKeyPrefix: ''}\n"), "kubernetes.taintKeyPrefix");
  EXPECT_HAS(fails("kubernetes: {taintKeyPrefix: 'a/b/'}\n"), "kubernetes.taintKeyPrefix: 'a/b/'");
  EXPECT_HAS(fails("kubernetes: {taintKeyPrefix: 'Pressured.IO/'}\n"), "kubernetes.taintKeyPrefix");
  EXPECT_HAS(fails("kubernetes: {taintKeyPrefix: 'with space/'}\n"), "kubernetes.taintKeyPrefix");
}

}  // namespace
}  // namespace pressured

namespace pressured {
namespace {

// SIGHUP takes a complete document or nothing: the shipped ConfigMap cut
// after any line must be refused, an empty file too.
TEST(ConfigReload, EmptyOrTruncatedFilesAreRefused) {
  const std::string path = ::testing::TempDir() + "/pressured-reload-test.yaml";
  ConfigOptions o;
  o.config_path = path;
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };

  write("");
  auto r = reload_config(o);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "empty");
  write("# only a comment\n\n");
  EXPECT_FALSE(reload_config(o).ok());
  EXPECT_FALSE(load_config(o).ok()) << "an empty file is an error at start too";

  const std::string full =
      "evictionHard:\n  memory.available: 200Mi\n  nodefs.available: 10%\ndaemon:\n  dryRun: true\nlog:\n  level: info\n...\n";
  write(full);
  r = reload_config(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->daemon.dry_run);
  EXPECT_EQ(r->eviction.thresholds.size(), 2u);

  // Every cut at a line boundary before the marker is refused.
  std::size_t cuts = 0;
  for (std::size_t pos = full.find('\n'); pos + 1 < full.size() - 4; pos = full.find('\n', pos + 1)) {
    write(full.substr(0, pos + 1));
    auto cut = reload_config(o);
    EXPECT_FALSE(cut.ok()) << "accepted a file cut after byte " << pos + 1;
    if (!cut.ok()) {
      EXPECT_HAS(cut.error().message, "'...'");
    }
    ++cuts;
  }
  EXPECT_GE(cuts, 6u);
  write(full.substr(0, full.size() - 2));  // "..": cut inside the marker
  EXPECT_FALSE(reload_config(o).ok());

  EXPECT_TRUE(ends_with_document_end("a: 1\n...\n\n"));
  EXPECT_TRUE(ends_with_document_end("...  \n"));
  EXPECT_FALSE(ends_with_document_end("a: ...\n"));
  EXPECT_FALSE(ends_with_document_end(""));
  std::remove(path.c_str());
}

TEST(ConfigReload, ShippedFilesEndWithTheMarker) {
  for (const char* f : {"/docs/examples/pressured.yaml"}) {
    std::ifstream in(std::string(PRESSURED_SOURCE_DIR) + f);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_TRUE(ends_with_document_end(text.str())) << f << " must be reloadable";
  }
}

TEST(ConfigErrors, DuplicateKeysAreAnError) {
  auto r = parse_config_yaml("log:\n  level: info\n  level: debug\n");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "duplicate key 'level'");
  r = parse_config_yaml("evictionHard:\n  memory.available: 1Gi\nevictionHard:\n  memory.available: 2Gi\n");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "line 3");
}

}  // namespace
}  // namespace pressured

namespace pressured {
namespace {

TEST(ConfigErrors, NumbersAndNamesAtTheEdges) {
  // 16Ei = 2^64: one past UINT64_MAX, it printed as 0.
  auto r = parse_config_yaml("cgroup:\n  diskWalkMaxEntries: 16Ei\n");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "too large");
  // Thousands of hours overflow now + timeout.
  r = parse_config_yaml("daemon:\n  diskReclaimTimeout: 2000000h\n");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "too long");
  // A SCHED_FIFO reactor woken every nanosecond spins.
  r = parse_config_yaml("events:\n  safetyNetInterval: 1ns\n");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "at least 10ms");
  r = parse_config_yaml("events:\n  forcedPollInterval: 1ns\n");
  ASSERT_FALSE(r.ok());
  // Full observations cannot come more often than the ticks that take them.
  r = parse_config_yaml("events:\n  safetyNetInterval: 2s\n  fullObservationInterval: 1s\n");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "events.fullObservationInterval: '1s' must be at least events.safetyNetInterval (2s)");
  r = parse_config_yaml("events:\n  fullObservationInterval: 30s\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->events.effective_full_observation_interval(), std::chrono::seconds(30));
  r = parse_config_yaml("events:\n  safetyNetInterval: 20s\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->events.effective_full_observation_interval(), std::chrono::seconds(20)) << "unset: the longer of 10s and the tick";
  r = parse_config_yaml("events: {}\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->events.effective_full_observation_interval(), std::chrono::seconds(10));
  for (const char* name : {".", ".."}) {
    r = parse_config_yaml(std::string("cgroup:\n  kubepodsName: '") + name + "'\n");
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_HAS(r.error().message, "kubepodsName");
  }
}

}  // namespace
}  // namespace pressured

namespace pressured {
namespace {

TEST(ConfigDump, TheLargestCountReadsBackAndIsNotCalledTooLargeForItself) {
  // Through a double, UINT64_MAX was 2^64: refused as "too large (at most
  // 18446744073709551615)", and dumped as 16Ei, which is refused too.
  Config c = ok("cgroup:\n  allocatableMemoryBytes: 18446744073709551615\n  diskWalkMaxEntries: 9007199254740993\n");
  EXPECT_EQ(c.observe.allocatable_memory_bytes, std::optional<uint64_t>(UINT64_MAX));
  EXPECT_EQ(c.observe.disk_walk_max_entries, 9007199254740993ULL);
  Config back = ok(dump_config(c));
  EXPECT_EQ(back.observe.allocatable_memory_bytes, c.observe.allocatable_memory_bytes);
  EXPECT_EQ(back.observe.disk_walk_max_entries, c.observe.disk_walk_max_entries);
  auto r = parse_config_yaml("cgroup:\n  allocatableMemoryBytes: 18446744073709551616\n");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "too large (at most 18446744073709551615)");
}

}  // namespace
}  // namespace pressured
