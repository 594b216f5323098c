// The node's KubeletConfiguration as the source of the eviction settings
// (kubelet.configPath, --kubelet-config), its eviction fields as written
// today, offsets, where every value came from, and reloading.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "config/load.hpp"

namespace pressured {
namespace {

constexpr double kMi = 1024.0 * 1024;

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << "message: " << (text)

const Threshold* find(const Config& c, Signal s, ThresholdKind k) {
  for (const auto& t : c.eviction.thresholds) {
    if (t.signal == s && t.kind == k) return &t;
  }
  return nullptr;
}

struct KubeletFile {
  std::string path = ::testing::TempDir() + "/pressured-kubelet-config-" + std::to_string(::getpid()) + ".yaml";
  void write(const std::string& body) const {
    std::ofstream(path, std::ios::trunc) << "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                                         << body;
  }
  ~KubeletFile() { std::remove(path.c_str()); }
};

// A current kubelet's file: many fields pressured does not read, and every
// eviction field of v1beta1, localStorageCapacityIsolation as a field.
const char* kKubelet = R"(address: 0.0.0.0
cgroupDriver: systemd
clusterDNS: [10.96.0.10]
featureGates:
  PodLevelResources: true
  InPlacePodVerticalScaling: true
evictionHard:
  memory.available: 500Mi
  nodefs.available: 10%
evictionSoft:
  memory.available: 1Gi
evictionSoftGracePeriod:
  memory.available: 1m30s
evictionMinimumReclaim:
  memory.available: 100Mi
evictionMaxPodGracePeriod: 60
evictionPressureTransitionPeriod: 30s
mergeDefaultEvictionSettings: false
localStorageCapacityIsolation: false
)";

Config load(const std::string& yaml, const ConfigOptions& flags = {}) {
  std::vector<std::string> w;
  auto r = parse_config_yaml(yaml, flags, &w);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Config{};
}

std::string error(const std::string& yaml, const ConfigOptions& flags = {}) {
  std::vector<std::string> w;
  auto r = parse_config_yaml(yaml, flags, &w);
  EXPECT_FALSE(r.ok()) << "accepted:\n" << yaml;
  return r.ok() ? "" : r.error().message;
}

TEST(KubeletConfig, TakesTheNodesEvictionSettingsWithOffsets) {
  KubeletFile k;
  k.write(kKubelet);
  Config c = load("kubelet:\n  configPath: " + k.path +
                  "\n  thresholdOffset: {memory.available: 50Mi, nodefs.available: 1%}\nranking: kubelet\n");
  const Threshold* hard = find(c, Signal::MemoryAvailable, ThresholdKind::Hard);
  ASSERT_NE(hard, nullptr);
  EXPECT_DOUBLE_EQ(hard->value.quantity, 550 * kMi) << "500Mi + 50Mi: pressured acts just before the kubelet";
  const Threshold* soft = find(c, Signal::MemoryAvailable, ThresholdKind::Soft);
  ASSERT_NE(soft, nullptr);
  EXPECT_DOUBLE_EQ(soft->value.quantity, 1024 * kMi + 50 * kMi);
  EXPECT_EQ(soft->grace_period, std::chrono::seconds(90));
  EXPECT_DOUBLE_EQ(soft->min_reclaim.quantity, 100 * kMi);
  const Threshold* nodefs = find(c, Signal::NodefsAvailable, ThresholdKind::Hard);
  ASSERT_NE(nodefs, nullptr);
  EXPECT_DOUBLE_EQ(nodefs->value.percent, 11);
  EXPECT_EQ(find(c, Signal::ImagefsAvailable, ThresholdKind::Hard), nullptr)
      << "evictionHard set without mergeDefaultEvictionSettings drops the other defaults, as in the kubelet";
  EXPECT_EQ(c.eviction.max_pod_grace_period_seconds, 60);
  EXPECT_EQ(c.eviction.pressure_transition_period, std::chrono::seconds(30));
  EXPECT_FALSE(c.eviction.local_storage_capacity_isolation);
  EXPECT_EQ(c.eviction.ranking, Ranking::Kubelet) << "pressured's own keys stay";

  const std::string s = describe_sources(c);
  EXPECT_HAS(s, "evictionHard.memory.available: 550Mi  <- kubelet configuration " + k.path +
                    " (500Mi) + kubelet.thresholdOffset 50Mi");
  EXPECT_HAS(s, "evictionMaxPodGracePeriod: 60  <- kubelet configuration " + k.path);
  EXPECT_HAS(s, "ranking: kubelet  <- configuration text");
  EXPECT_HAS(s, "log.level: info  <- default");

  // The dump names the kubelet's file, not its values, so it reads back.
  auto back = parse_config_yaml(dump_config(c));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->eviction.thresholds, c.eviction.thresholds);
}

TEST(KubeletConfig, FlagAndDefaultsOfTheKubelet) {
  KubeletFile k;
  k.write("evictionSoft: {memory.available: 2Gi}\nevictionSoftGracePeriod: {memory.available: 1m}\n");
  ConfigOptions f;
  f.kubelet_config = k.path;
  Config c = load("", f);
  const Threshold* hard = find(c, Signal::MemoryAvailable, ThresholdKind::Hard);
  ASSERT_NE(hard, nullptr) << "no evictionHard in the kubelet's file: the kubelet's defaults";
  EXPECT_DOUBLE_EQ(hard->value.quantity, 100 * kMi);
  EXPECT_HAS(describe_sources(c), "the kubelet's default, as " + k.path + " leaves it");
  EXPECT_HAS(describe_sources(c), "kubelet.configPath: " + k.path + "  <- flag --kubelet-config");
}

TEST(KubeletConfig, OffsetFlagRaisesTheKubeletsThresholds) {
  KubeletFile k;
  k.write(kKubelet);
  ConfigOptions f;
  f.kubelet_config = k.path;
  f.kubelet_threshold_offset = "memory.available=50Mi, nodefs.available=2%";
  Config c = load("", f);
  EXPECT_DOUBLE_EQ(find(c, Signal::MemoryAvailable, ThresholdKind::Hard)->value.quantity, 550 * kMi);
  EXPECT_DOUBLE_EQ(find(c, Signal::MemoryAvailable, ThresholdKind::Soft)->value.quantity, 1024 * kMi + 50 * kMi)
      << "an offset raises the soft threshold of its signal too";
  EXPECT_DOUBLE_EQ(find(c, Signal::NodefsAvailable, ThresholdKind::Hard)->value.percent, 12);
  const std::string s = describe_sources(c);
  EXPECT_HAS(s, "evictionHard.memory.available: 550Mi  <- kubelet configuration " + k.path +
                    " (500Mi) + --kubelet-threshold-offset 50Mi");
  EXPECT_HAS(s, "kubelet.thresholdOffset: {memory.available: 50Mi, nodefs.available: 2%}  <- flag "
                "--kubelet-threshold-offset");
  // The flag replaces the file's offsets.
  Config both = load("kubelet: {thresholdOffset: {memory.available: 10Mi, nodefs.inodesFree: 1%}}\n", f);
  EXPECT_DOUBLE_EQ(find(both, Signal::MemoryAvailable, ThresholdKind::Hard)->value.quantity, 550 * kMi);
  EXPECT_EQ(both.kubelet.offsets.count(Signal::NodefsInodesFree), 0u);

  // Clear errors, each naming the flag.
  auto flag_error = [&](const std::string& list) {
    ConfigOptions g = f;
    g.kubelet_threshold_offset = list;
    return error("", g);
  };
  EXPECT_HAS(flag_error("memory.available:50Mi"),
             "--kubelet-threshold-offset: 'memory.available:50Mi' is not <signal>=<value>");
  EXPECT_HAS(flag_error("memory.avail=50Mi"), "unknown signal 'memory.avail'");
  EXPECT_HAS(flag_error("memory.available=fifty"),
             "kubelet.thresholdOffset.memory.available (--kubelet-threshold-offset)");
  EXPECT_HAS(flag_error("memory.available=-5Mi"), "is negative");
  EXPECT_HAS(flag_error("memory.pressure.some.avg10=5"), "is not a signal of the kubelet's configuration");
  EXPECT_HAS(flag_error("memory.available=1%"), "are not of one kind");
  {
    // An offset for a signal the kubelet has no threshold of raises nothing: a warning.
    ConfigOptions g = f;
    g.kubelet_threshold_offset = "memory.available=50Mi,pid.available=100";
    std::vector<std::string> w;
    auto r = parse_config_yaml("", g, &w);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(w.size(), 1u);
    EXPECT_HAS(w[0], "kubelet.thresholdOffset.pid.available (--kubelet-threshold-offset): raises nothing: the "
                     "kubelet's configuration " + k.path + " has no pid.available threshold");
  }
  ConfigOptions no_file;
  no_file.kubelet_threshold_offset = "memory.available=50Mi";
  EXPECT_HAS(error("", no_file), "kubelet.thresholdOffset (--kubelet-threshold-offset): needs kubelet.configPath");
}

// A DaemonSet spans nodes with and without the kubelet's file: with
// ifMissing: kubeletDefaults a node without it runs on the kubelet's
// defaults (plus offsets), says so, and does not fail; by default a
// missing file stays an error.
TEST(KubeletConfig, MissingFileTakesTheKubeletsDefaultsWhenAskedTo) {
  const std::string gone = ::testing::TempDir() + "/pressured-no-kubelet-" + std::to_string(::getpid()) + ".yaml";
  std::remove(gone.c_str());
  const std::string yaml = "kubelet: {configPath: " + gone +
                           ", ifMissing: kubeletDefaults, thresholdOffset: {memory.available: 50Mi, "
                           "nodefs.available: 1%}}\n";
  std::vector<std::string> w;
  auto r = parse_config_yaml(yaml, {}, &w);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(find(*r, Signal::MemoryAvailable, ThresholdKind::Hard)->value.quantity, 150 * kMi)
      << "the kubelet's default 100Mi + 50Mi";
  EXPECT_DOUBLE_EQ(find(*r, Signal::NodefsAvailable, ThresholdKind::Hard)->value.percent, 11);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_HAS(w[0], gone + " does not exist on this node: taking the kubelet's default eviction settings");
  EXPECT_HAS(describe_sources(*r), "evictionHard.memory.available: 150Mi  <- the kubelet's default (" + gone +
                                       " does not exist) (100Mi) + kubelet.thresholdOffset 50Mi");
  EXPECT_HAS(describe_sources(*r), "kubelet.ifMissing: kubeletDefaults  <- configuration text");
  EXPECT_HAS(error("kubelet: {configPath: " + gone + "}\n"), gone);
  EXPECT_HAS(error("kubelet: {configPath: " + gone + ", ifMissing: maybe}\n"), "kubelet.ifMissing");
  // Present, the file is read as always.
  KubeletFile k;
  k.write(kKubelet);
  Config c = load("kubelet: {configPath: " + k.path + ", ifMissing: kubeletDefaults}\n");
  EXPECT_DOUBLE_EQ(find(c, Signal::MemoryAvailable, ThresholdKind::Hard)->value.quantity, 500 * kMi);
}

TEST(KubeletConfig, ErrorsNameTheFileAndTheField) {
  KubeletFile k;
  k.write("evictionHard: {memory.available: 500Mi}\n");
  const std::string use = "kubelet: {configPath: " + k.path + "}\n";
  EXPECT_HAS(error(use + "evictionHard: {memory.available: 1Gi}\n"),
             "evictionHard: is taken from the kubelet's configuration");
  EXPECT_HAS(error(use + "evictionHard: {memory.pressure.full.avg10: 40, pid.available: 5%}\n"),
             "only PSI thresholds stay in pressured's file");
  // PSI thresholds are pressured's own: they stay beside the kubelet's.
  Config psi = load(use + "evictionHard: {memory.pressure.full.avg10: 40}\n");
  ASSERT_NE(find(psi, Signal::MemoryPressureFullAvg10, ThresholdKind::Hard), nullptr);
  EXPECT_DOUBLE_EQ(find(psi, Signal::MemoryAvailable, ThresholdKind::Hard)->value.quantity, 500 * kMi);
  EXPECT_HAS(describe_sources(psi), "evictionHard.memory.pressure.full.avg10: 40  <- configuration text");
  EXPECT_HAS(error("kubelet: {thresholdOffset: {memory.available: 50Mi}}\n"), "needs kubelet.configPath");
  EXPECT_HAS(error("kubelet: {configPath: " + k.path + ", thresholdOffset: {memory.available: 1%}}\n"),
             "are not of one kind");
  EXPECT_HAS(error("kubelet: {configPath: /nonexistent/kubelet.yaml}\n"), "/nonexistent/kubelet.yaml");

  // Unknown eviction fields are errors; other kubelet fields are not read.
  std::ofstream(k.path, std::ios::trunc) << "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                                            "evictionHardd: {memory.available: 500Mi}\nunrelatedField: 1\n";
  EXPECT_HAS(error(use), "evictionHardd: unknown eviction field");
  std::ofstream(k.path, std::ios::trunc) << "kind: Pod\n";
  EXPECT_HAS(error(use), "is not a KubeletConfiguration");
  k.write("evictionHard: {memory.available: 100Qi}\n");
  EXPECT_HAS(error(use), k.path + ": evictionHard.memory.available");
}

TEST(KubeletConfig, CurrentFieldsInPressuredsOwnFile) {
  Config c = load("localStorageCapacityIsolation: false\nmergeDefaultEvictionSettings: true\n"
                  "evictionHard: {memory.available: 1Gi}\n");
  EXPECT_FALSE(c.eviction.local_storage_capacity_isolation);
  EXPECT_NE(find(c, Signal::ImagefsAvailable, ThresholdKind::Hard), nullptr);
  EXPECT_HAS(error("localStorageCapacityIsolation: false\nfeatureGates: {LocalStorageCapacityIsolation: true}\n"),
             "disagrees with featureGates.LocalStorageCapacityIsolation");
  EXPECT_HAS(error("evictionHardd: {memory.available: 1Gi}\n"), "unknown key");
}

// SIGHUP: reload_config reads the kubelet's file again.
TEST(KubeletConfig, ReloadReadsTheKubeletsFileAgain) {
  KubeletFile k;
  k.write("evictionHard: {memory.available: 500Mi}\n");
  const std::string own = ::testing::TempDir() + "/pressured-kubelet-own-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(own, std::ios::trunc) << "kubelet: {configPath: " << k.path
                                      << ", thresholdOffset: {memory.available: 50Mi}}\n...\n";
  ConfigOptions o;
  o.config_path = own;
  auto first = reload_config(o);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_DOUBLE_EQ(find(*first, Signal::MemoryAvailable, ThresholdKind::Hard)->value.quantity, 550 * kMi);
  k.write("evictionHard: {memory.available: 700Mi}\n");
  auto second = reload_config(o);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_DOUBLE_EQ(find(*second, Signal::MemoryAvailable, ThresholdKind::Hard)->value.quantity, 750 * kMi);
  std::remove(own.c_str());
}

// The kubelet's ParseThresholdConfig appends, when enforceNodeAllocatable
// contains "pods" (its default), a copy of every hard memory.available
// threshold on allocatableMemory.available, with its minimum reclaim
// (pkg/kubelet/eviction/helpers.go, addAllocatableThresholds; the kubelet's
// TestAddAllocatableThresholds: a soft one or another signal is not copied).
TEST(KubeletConfig, AddAllocatableThresholdsCopiesTheHardMemoryThreshold) {
  KubeletFile k;
  k.write("evictionHard: {memory.available: 150Mi, nodefs.available: 10%}\n"
          "evictionSoft: {memory.available: 300Mi}\nevictionSoftGracePeriod: {memory.available: 30s}\n"
          "evictionMinimumReclaim: {memory.available: 0, nodefs.available: 500Mi}\n");
  const std::string use = "kubelet: {configPath: " + k.path + "}\n";
  Config c = load(use);
  const Threshold* a = find(c, Signal::AllocatableMemoryAvailable, ThresholdKind::Hard);
  ASSERT_NE(a, nullptr) << "enforceNodeAllocatable unset is [pods]: the kubelet derives the threshold";
  EXPECT_DOUBLE_EQ(a->value.quantity, 150 * kMi);
  EXPECT_EQ(a->min_reclaim, find(c, Signal::MemoryAvailable, ThresholdKind::Hard)->min_reclaim);
  EXPECT_EQ(find(c, Signal::AllocatableMemoryAvailable, ThresholdKind::Soft), nullptr) << "hard thresholds only";
  EXPECT_EQ(c.eviction.thresholds.size(), 4u) << "memory and allocatable hard, nodefs hard, memory soft";
  EXPECT_HAS(describe_sources(c), "evictionHard.allocatableMemory.available: 150Mi  <- kubelet configuration " +
                                      k.path + ": evictionHard.memory.available copied, as enforceNodeAllocatable "
                                               "contains pods (its default)");

  // The kubelet's defaults are copied the same way.
  k.write("evictionSoft: {memory.available: 300Mi}\nevictionSoftGracePeriod: {memory.available: 30s}\n");
  Config d = load(use);
  ASSERT_NE(find(d, Signal::AllocatableMemoryAvailable, ThresholdKind::Hard), nullptr);
  EXPECT_DOUBLE_EQ(find(d, Signal::AllocatableMemoryAvailable, ThresholdKind::Hard)->value.quantity, 100 * kMi);

  // Only a list containing pods enforces it; an empty list is none.
  for (const char* list : {"[]", "[system-reserved, kube-reserved]", "[none]"}) {
    k.write("evictionHard: {memory.available: 150Mi}\nenforceNodeAllocatable: " + std::string(list) + "\n");
    EXPECT_EQ(find(load(use), Signal::AllocatableMemoryAvailable, ThresholdKind::Hard), nullptr) << list;
  }
  k.write("evictionHard: {memory.available: 150Mi}\nenforceNodeAllocatable: [kube-reserved, pods]\n");
  EXPECT_NE(find(load(use), Signal::AllocatableMemoryAvailable, ThresholdKind::Hard), nullptr);
  k.write("evictionHard: {memory.available: 150Mi}\nenforceNodeAllocatable: [pod]\n");
  EXPECT_HAS(error(use), "enforceNodeAllocatable: 'pod' is not one of pods");
  k.write("evictionHard: {memory.available: 150Mi}\nenforceNodeAllocatable: pods\n");
  EXPECT_HAS(error(use), "enforceNodeAllocatable: 'pods' is not a list");

  // The offset of memory.available raises its copy too (one threshold to
  // the kubelet); an offset of its own wins.
  k.write("evictionHard: {memory.available: 150Mi}\n");
  Config o = load("kubelet: {configPath: " + k.path + ", thresholdOffset: {memory.available: 50Mi}}\n");
  EXPECT_DOUBLE_EQ(find(o, Signal::AllocatableMemoryAvailable, ThresholdKind::Hard)->value.quantity, 200 * kMi);
  Config own = load("kubelet: {configPath: " + k.path +
                    ", thresholdOffset: {memory.available: 50Mi, allocatableMemory.available: 10Mi}}\n");
  EXPECT_DOUBLE_EQ(find(own, Signal::AllocatableMemoryAvailable, ThresholdKind::Hard)->value.quantity, 160 * kMi);

  // Named in the file as well: the kubelet then watches both, the higher is met first.
  k.write("evictionHard: {memory.available: 150Mi, allocatableMemory.available: 50Mi}\n");
  EXPECT_DOUBLE_EQ(find(load(use), Signal::AllocatableMemoryAvailable, ThresholdKind::Hard)->value.quantity,
                   150 * kMi);
}

// SetDefaults_KubeletConfiguration (pkg/kubelet/apis/config/v1beta1/defaults.go):
// a zero evictionPressureTransitionPeriod is unset and becomes 5m.
TEST(KubeletConfig, ZeroPressureTransitionPeriodIsDefaultedToFiveMinutes) {
  KubeletFile k;
  const std::string use = "kubelet: {configPath: " + k.path + "}\n";
  for (const char* zero : {"0s", "0", "0m"}) {
    k.write(std::string("evictionPressureTransitionPeriod: ") + zero + "\n");
    Config c = load(use);
    EXPECT_EQ(c.eviction.pressure_transition_period, std::chrono::minutes(5)) << zero;
    EXPECT_HAS(describe_sources(c), "evictionPressureTransitionPeriod: 5m0s  <- the kubelet's default: " + k.path +
                                        " sets 0s, which the kubelet's defaulting takes as unset");
  }
  k.write("evictionPressureTransitionPeriod: 1s\n");
  EXPECT_EQ(load(use).eviction.pressure_transition_period, std::chrono::seconds(1));
  k.write("evictionMaxPodGracePeriod: 30\n");
  Config d = load(use);
  EXPECT_EQ(d.eviction.pressure_transition_period, std::chrono::minutes(5));
  EXPECT_HAS(describe_sources(d), "evictionPressureTransitionPeriod: 5m0s  <- the kubelet's default, as " + k.path +
                                      " leaves it");
}

// loadConfigFile (cmd/kubelet/app/server.go): a nil evictionHard takes
// DefaultEvictionHard, a non-nil one (even empty) is kept, merged with the
// defaults only under mergeDefaultEvictionSettings. In YAML, a key with no
// value is null: unset, like a key left out.
TEST(KubeletConfig, NullEvictionHardIsUnsetAndTakesTheDefaults) {
  KubeletFile k;
  const std::string use = "kubelet: {configPath: " + k.path + "}\n";
  const std::vector<Signal> defaults = {Signal::MemoryAvailable, Signal::AllocatableMemoryAvailable,
                                        Signal::NodefsAvailable, Signal::NodefsInodesFree, Signal::ImagefsAvailable,
                                        Signal::ImagefsInodesFree};
  auto hard_signals = [](const Config& c) {
    std::vector<Signal> out;
    for (const auto& t : c.eviction.thresholds) {
      if (t.kind == ThresholdKind::Hard) out.push_back(t.signal);
    }
    return out;
  };
  for (const char* null_form : {"evictionHard:\n", "evictionHard: null\n", "evictionHard: ~\n", ""}) {
    k.write(null_form);
    EXPECT_EQ(hard_signals(load(use)), defaults) << "'" << null_form << "'";
  }
  k.write("evictionHard: {}\n");
  EXPECT_TRUE(hard_signals(load(use)).empty()) << "an empty map is set: no hard thresholds";
  k.write("evictionHard: {}\nmergeDefaultEvictionSettings: true\n");
  EXPECT_EQ(hard_signals(load(use)), defaults);
  k.write("evictionHard:\nmergeDefaultEvictionSettings:\nlocalStorageCapacityIsolation:\n"
          "evictionMaxPodGracePeriod:\nevictionPressureTransitionPeriod:\nevictionSoft:\nfeatureGates:\n");
  Config n = load(use);
  EXPECT_EQ(hard_signals(n), defaults);
  EXPECT_TRUE(n.eviction.local_storage_capacity_isolation) << "null: the default, true";
  EXPECT_EQ(n.eviction.max_pod_grace_period_seconds, 0);
  EXPECT_EQ(n.eviction.pressure_transition_period, std::chrono::minutes(5));
  // pressured's own file reads the kubelet's fields the same way.
  std::vector<Signal> own_defaults = defaults;
  own_defaults.erase(own_defaults.begin() + 1);  // no enforceNodeAllocatable there
  EXPECT_EQ(hard_signals(load("evictionHard:\n")), own_defaults);
  EXPECT_TRUE(hard_signals(load("evictionHard: {}\n")).empty());
}

// The SIGHUP reload takes the kubelet's file only whole: a file caught
// mid-rewrite is refused with a message, and the settings in force stay.
TEST(KubeletConfig, HalfWrittenFileIsRefused) {
  KubeletFile k;
  const std::string use = "kubelet: {configPath: " + k.path + "}\n";
  // Cut mid-line: "500Mi" became "5" (5 bytes, never met).
  std::ofstream(k.path, std::ios::trunc) << "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                                            "evictionHard:\n  memory.available: 5";
  EXPECT_HAS(error(use), "does not end with a line break: it may be cut mid-write");
  std::ofstream(k.path, std::ios::trunc) << "apiVersion: kubelet.config.k8s.io/v1beta1\nevictionHard:\n";
  EXPECT_HAS(error(use), "kind and apiVersion must both be there");
  std::ofstream(k.path, std::ios::trunc) << "";
  EXPECT_HAS(error(use), "is empty");
  // A file that changes between the two reads is a write in progress.
  k.write("evictionHard: {memory.available: 500Mi}\n");
  auto r = read_kubelet_config_file(k.path, [&] { k.write("evictionHard: {memory.available: 5"); });
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "changed while being read");
  auto same = read_kubelet_config_file(k.path, [] {});
  ASSERT_TRUE(same.ok()) << same.error().message;
}

// What is at the path is not trusted: a FIFO would block the event loop at
// SIGHUP (the reload runs there), a huge file would cost the daemon its
// memory.
TEST(KubeletConfig, OnlyABoundedRegularFileIsRead) {
  const std::string fifo = ::testing::TempDir() + "/pressured-kubelet-fifo-" + std::to_string(::getpid());
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_HAS(error("kubelet: {configPath: " + fifo + "}\n"), "not a regular file");
  ConfigOptions own;
  own.config_path = fifo;
  auto r = reload_config(own);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error().message, "not a regular file");
  std::remove(fifo.c_str());
  KubeletFile k;
  k.write("evictionHard: {memory.available: 500Mi}\n# " + std::string(2u << 20, 'x') + "\n");
  EXPECT_HAS(error("kubelet: {configPath: " + k.path + "}\n"), "more than the 1048576 a configuration file may have");
}

}  // namespace
}  // namespace pressured
