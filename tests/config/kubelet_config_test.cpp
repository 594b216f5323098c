// The node's KubeletConfiguration as the source of the eviction settings
// (kubelet.configPath, --kubelet-config), its eviction fields as written
// today, offsets, where every value came from, and reloading.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace pressured
