#pragma once
// The effective configuration, after the YAML file and the flags are merged.
// Eviction settings carry the KubeletConfiguration names and meaning
// (shared/seeds/002). Each concern owns its section; the loader in
// userspace/config fills all of them and validates them.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/enum_names.hpp"
#include "pressured/signals.hpp"

namespace pressured {

/// A threshold or minimum-reclaim amount: an absolute quantity in the signal's
/// base unit (bytes, inodes, pids; for PSI signals a percentage 0-100), or a
/// percentage of the signal's capacity.
struct ThresholdValue {
  enum class Kind : uint8_t { Quantity, Percent };
  Kind kind = Kind::Quantity;
  double quantity = 0;  // base units, when kind == Quantity
  double percent = 0;   // 0..100, when kind == Percent

  /// The value in base units for a signal with the given capacity.
  double resolve(double capacity) const { return kind == Kind::Percent ? capacity * percent / 100.0 : quantity; }
  bool operator==(const ThresholdValue&) const = default;
};

enum class ThresholdKind : uint8_t { Hard, Soft };

/// One eviction threshold: `<signal><op><value>`, with its grace period (soft
/// only) and minimum reclaim.
struct Threshold {
  Signal signal = Signal::MemoryAvailable;
  ThresholdKind kind = ThresholdKind::Hard;
  ThresholdValue value;
  Duration grace_period{0};  // soft thresholds only
  ThresholdValue min_reclaim;  // evictionMinimumReclaim for the signal; 0 when unset
  bool operator==(const Threshold&) const = default;
};

/// What to do with pods owned by a DaemonSet (they come straight back).
enum class DaemonSetPolicy : uint8_t { EvictLast, Normal, Never };

/// The order pods are evicted in (docs/engine.md, "Ranking"): QoS class first
/// (pressured's documented policy, the default), or exactly the current
/// kubelet's orders (`ranking: kubelet`).
enum class Ranking : uint8_t { QosFirst, Kubelet };

struct EvictionConfig {
  std::vector<Threshold> thresholds;  // hard and soft
  Duration pressure_transition_period = std::chrono::minutes(5);
  // The kubelet's evictionMaxPodGracePeriod (an int32 there): see
  // eviction_grace_period for what 0 and negative values mean.
  int64_t max_pod_grace_period_seconds = 0;
  // pressured's own ceiling on a soft eviction's grace period, after the
  // kubelet's computation (softEvictionGraceCeilingSeconds); 0: none, the
  // kubelet's behaviour. A pod author writes terminationGracePeriodSeconds:
  // without a ceiling a pod asking for years would hold its resource lane
  // (one eviction in flight) as long.
  int64_t soft_grace_ceiling_seconds = 3600;
  bool merge_default_eviction_settings = false;
  DaemonSetPolicy daemonset_pods = DaemonSetPolicy::EvictLast;
  Ranking ranking = Ranking::QosFirst;
  // The kubelet's LocalStorageCapacityIsolation feature gate (on by default
  // since 1.10): evict pods over their own emptyDir sizeLimit or
  // ephemeral-storage limits, before any node threshold.
  bool local_storage_capacity_isolation = true;
};

/// How memory.available is computed (docs/observation.md). Kubelet is the
/// default: thresholds then mean what they mean to the kubelet.
enum class MemoryAvailableMode : uint8_t {
  Kubelet,            // capacity - (usage - inactive_file)
  ExcludeReserved,    // also subtract reserved hugepages and the min watermark
  ReclaimableActive,  // also count a share of active_file as reclaimable
};

enum class CgroupDriver : uint8_t { Auto, Cgroupfs, Systemd };
/// As written in configuration (cgroup.driver, --cgroup-driver) and logs.
inline constexpr EnumName<CgroupDriver> kCgroupDriverNames[] = {
    {CgroupDriver::Auto, "auto"}, {CgroupDriver::Cgroupfs, "cgroupfs"}, {CgroupDriver::Systemd, "systemd"}};
enum class PodSourceKind : uint8_t { None, Kubelet, File, ApiServer };

struct PodSourceConfig {
  PodSourceKind kind = PodSourceKind::None;
  std::string path;  // File: a Pod/PodList JSON or YAML file, or a directory of them
  std::string kubelet_url = "https://127.0.0.1:10250/pods";
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file;
  bool insecure_skip_verify = false;
  Duration refresh_interval = std::chrono::seconds(30);
  Duration timeout = std::chrono::seconds(2);
  // ApiServer: list + watch pods with spec.nodeName=<node>. The connection is
  // the kubernetes section's (kubeconfig or in-cluster) and node name, copied
  // here when the config is loaded.
  Duration watch_timeout = std::chrono::seconds(60);  // server-side timeoutSeconds of one watch
  std::string kubeconfig;
  std::string node_name;
  // Whether pods' labels are kept: only plugins read them (a plugin's
  // selector), so they are kept only when plugins.directory is set; copied
  // here when the config is loaded.
  bool keep_labels = false;
  bool operator==(const PodSourceConfig&) const = default;
};

struct ObserveConfig {
  std::string cgroup_mount = "/sys/fs/cgroup";  // where cgroupfs is mounted
  std::string cgroup_root = "/";                // kubelet --cgroup-root
  std::string kubepods_name = "kubepods";       // kubepods (cgroupfs) / kubepods.slice (systemd)
  CgroupDriver driver = CgroupDriver::Auto;
  std::string proc_root = "/proc";
  // The system PSI files (memory, io, cpu); empty: <proc_root>/pressure. PSI
  // is system-wide, so a container may read it from its own /proc, which
  // needs no host mount of a directory a PSI-less kernel lacks.
  std::string psi_path;
  std::string nodefs_path = "/var/lib/kubelet";
  std::string imagefs_path = "/var/lib/containerd";
  std::string pod_logs_path = "/var/log/pods";
  MemoryAvailableMode memory_available_mode = MemoryAvailableMode::Kubelet;
  std::optional<uint64_t> allocatable_memory_bytes;  // default: kubepods memory limit
  PodSourceConfig pods;
  Duration disk_walk_interval = std::chrono::seconds(60);
  // Read by the observation layer (docs/observation.md):
  std::string mountinfo_path;  // mount table to read; empty: <proc_root>/self/mountinfo
  double reclaimable_active_file_percent = 50;  // ReclaimableActive mode: share of active_file counted as free
  Duration disk_walk_budget = std::chrono::seconds(5);  // per walk, all pods
  uint64_t disk_walk_max_entries = 1000000;             // per walk, all pods
  // Container runtime root: overlay upper dirs (writable layers) below it are
  // counted in pod ephemeral storage; empty: imagefs_path.
  std::string runtime_root;
  std::string psi_dir() const { return psi_path.empty() ? proc_root + "/pressure" : psi_path; }
  bool operator==(const ObserveConfig&) const = default;
};

enum class BpfMode : uint8_t { Auto, On, Off };

struct EventsConfig {
  BpfMode bpf = BpfMode::Auto;
  bool psi_triggers = true;
  bool memcg_notifications = true;   // v1 threshold eventfd, v2 memory.events
  Duration safety_net_interval = std::chrono::seconds(1);
  // A safety-net tick re-reads only what the thresholds and the ranking head
  // need (as an event does); every pod is re-read at least this often, and
  // whenever the pod set moves, a read fails or a pod is being evicted.
  // Unset: 10 s (the kubelet's housekeeping period), or the safety-net
  // interval when that is longer.
  std::optional<Duration> full_observation_interval;
  Duration effective_full_observation_interval() const {
    return full_observation_interval.value_or(std::max<Duration>(std::chrono::seconds(10), safety_net_interval));
  }
  std::optional<Duration> forced_poll_interval;  // baseline mode: poll only, no events
  uint32_t ring_buffer_bytes = 256 * 1024;
  uint32_t charge_sample_every = 64;  // BPF charge hook: look at 1 charge in N
  Duration psi_window = std::chrono::milliseconds(500);
  Duration psi_stall = std::chrono::milliseconds(50);
  int reactor_nice = 0;  // nice value for the reactor thread (0: inherit); e.g. -10 on busy nodes (docs/events.md)
  // 1-99: run the reactor thread SCHED_FIFO at this priority (needs CAP_SYS_NICE; without it the
  // daemon warns and runs SCHED_OTHER); 0: off. On by default: detection p99 < 1 ms on a busy node.
  int reactor_rt_priority = 10;
  bool operator==(const EventsConfig&) const = default;
};

struct K8sConfig {
  bool enabled = false;
  std::string kubeconfig;  // empty: in-cluster config when KUBERNETES_SERVICE_HOST is set
  std::string node_name;   // default: hostname
  Duration request_timeout = std::chrono::seconds(5);
  std::string condition_prefix = "Pressured";
  // A NoSchedule taint <taintKeyPrefix>memory-pressure (disk-, pid-) while
  // pressured's matching condition is true (needs `patch nodes`).
  bool taint_nodes = true;
  std::string taint_key_prefix = "pressured.io/";
  bool operator==(const K8sConfig&) const = default;
};

struct MetricsConfig {
  std::string listen = "0.0.0.0:9847";
  uint32_t top_pods = 20;  // per-pod series are exported for this many pods only
  // node_exporter-style web configuration (TLS, basic auth, bearer token) for
  // the metrics port; empty: plain HTTP without authentication.
  std::string web_config_file;
  bool operator==(const MetricsConfig&) const = default;
};

struct LogConfig {
  std::string level = "info";
  std::string format = "text";  // text | json
};

struct DaemonConfig {
  bool dry_run = false;
  std::string state_file = "/var/lib/pressured/state.json";
  std::vector<std::string> disk_reclaim_command;  // run before evicting for disk signals
  Duration disk_reclaim_timeout = std::chrono::seconds(60);
  Duration release_wait_timeout = std::chrono::seconds(10);  // wait for a victim's memory to come back
  Duration soft_kill_margin = std::chrono::seconds(15);      // soft: API eviction, local kill after grace + margin
  Duration kill_timeout = std::chrono::seconds(30);          // killed victim still not empty: stuck, stop waiting
  // mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) at start: the daemon's
  // pages are never reclaimed under the pressure it fights (needs
  // CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK; a failure is logged).
  bool lock_memory = true;
  // After a victim's SIGKILL, reap its memory with process_mrelease(2) from
  // the daemon (Linux 5.15+): it comes back without waiting for the victim's
  // exit path, while other pods may still be growing. Needs a restart.
  bool release_victim_memory = true;
  // Under a hard memory threshold, evict the next pod while the killed
  // victims are still giving their memory back, when the projected
  // `available` (what they give back, minus what the others add over
  // release_horizon) stays under the threshold (docs/engine.md, "Evicting
  // ahead of the release"). Off: the kubelet's one eviction at a time.
  bool evict_ahead_of_release = false;
  // How long a killed victim's memory takes to come back, for that projection.
  Duration release_horizon = std::chrono::milliseconds(100);
  // Predictive hard threshold: a hard memory.available or
  // allocatableMemory.available threshold is also met when, at the rate the
  // signal falls, it will be reached within this long (docs/engine.md,
  // "Predictive hard threshold"). Set it to pressured's measured reaction
  // time (kernel event -> memory back, p99) with a margin. 0: off, the
  // kubelet's threshold.
  Duration predictive_lead = Duration::zero();
};

/// Relief: before a memory eviction, ask the kernel to reclaim the page cache
/// the pods' cgroups hold (cgroup v2 memory.reclaim), re-read, and evict only
/// if the node is still short (docs/engine.md, "Relief before eviction").
struct ReliefConfig {
  // On where the kernel has memory.reclaim (v2, 5.19+); elsewhere the stage
  // is off whatever this says, and says so once.
  bool enabled = true;
  // The longest a hard memory threshold's eviction waits for reclaim,
  // counted from when the threshold was first met; 0: no reclaim for hard
  // thresholds. Small: a hard threshold is the last line before the
  // kernel's OOM killer.
  Duration hard_threshold_budget = std::chrono::milliseconds(250);
  // A cgroup that gave back little (under low_yield_percent of what it was
  // asked) is not asked again for this long.
  Duration backoff = std::chrono::minutes(5);
  // The longest one reclaim run may write for (soft thresholds: also at most
  // the rest of the grace period).
  Duration timeout = std::chrono::seconds(5);
  double low_yield_percent = 25;
  // The least one run asks for (up to the candidates' page cache). The
  // kubelet's minimum reclaim is 0 by default, so shortfall + minimum reclaim
  // can be a few pages: the node then sits at the threshold's edge and a run
  // starts at every re-read. Asking for a margin lifts it clear in one run.
  uint64_t minimum_ask_bytes = 64ull << 20;
};

/// Out-of-process eviction plugins (docs/plugins.md). Off while `directory`
/// is empty: nothing of gRPC is loaded then.
struct PluginsConfig {
  // The root-only directory plugins create their Unix sockets in (watched
  // with inotify); created 0700 when missing.
  std::string directory;
  // The deadline of every call to a plugin. Tens of milliseconds: the calls
  // run off the event loop and a decision never waits for them, but a slow
  // plugin's answers arrive that much later.
  Duration call_timeout = std::chrono::milliseconds(50);
  // Answers older than this are not used (a plugin that stopped answering
  // stops advising).
  Duration answer_max_age = std::chrono::seconds(30);
  // At most one proposal a plugin is taken per interval.
  Duration proposal_interval = std::chrono::seconds(60);
  // A failing plugin is asked again after backoffInitial, doubling up to backoffMax.
  Duration backoff_initial = std::chrono::seconds(1);
  Duration backoff_max = std::chrono::seconds(60);
  // How many of the ranking's first pods a plugin is shown per resource.
  uint64_t max_candidates = 32;
  // At most this many plugins are registered; further sockets are ignored.
  uint64_t max_plugins = 16;
  // The gRPC transport module; empty: next to the executable or under
  // ../lib/pressured/.
  std::string module;
  bool operator==(const PluginsConfig&) const = default;
};

/// The node's own KubeletConfiguration as the source of the eviction settings
/// (`kubelet:` section, --kubelet-config), so pressured and the kubelet cannot
/// drift apart; per-signal offsets put pressured's thresholds above them.
/// What a missing KubeletConfiguration file means (kubelet.ifMissing): an
/// error (a path given by hand is expected to exist), or the kubelet's
/// defaults (a DaemonSet spans nodes with and without the file; a kubelet
/// without one runs with its defaults unless flags say otherwise).
enum class KubeletConfigMissing : uint8_t { Error, KubeletDefaults };

struct KubeletConfigSource {
  std::string config_path;                    // empty: not used
  std::map<Signal, ThresholdValue> offsets;   // added to the kubelet's thresholds
  KubeletConfigMissing if_missing = KubeletConfigMissing::Error;
};

struct Config {
  EvictionConfig eviction;
  KubeletConfigSource kubelet;
  // Where each effective value came from, by YAML path ("evictionHard.memory.available",
  // "cgroup.driver"): a file, a flag, the kubelet's configuration. Absent: the default.
  std::map<std::string, std::string> sources;
  ObserveConfig observe;
  EventsConfig events;
  K8sConfig kubernetes;
  MetricsConfig metrics;
  LogConfig log;
  DaemonConfig daemon;
  ReliefConfig relief;
  PluginsConfig plugins;
};

/// The configuration in force, held once and read by everything that acts on
/// it (the daemon, the engine, the eviction policy, the executor): a reload
/// replaces the whole snapshot, so no part keeps an older copy of a value
/// and nothing has to be told. Readers that derive something from it (the
/// engine's threshold order, the policy's deadlines) re-derive it when
/// generation() moves. A snapshot is immutable: whoever needs one
/// configuration throughout a piece of work keeps the pointer it took.
/// Owned by the event loop's thread (replaced on SIGHUP, read by evaluations).
class LiveConfig {
 public:
  explicit LiveConfig(Config config) : current_(std::make_shared<const Config>(std::move(config))) {}

  const Config& get() const { return *current_; }
  std::shared_ptr<const Config> snapshot() const { return current_; }
  /// Moves with every replace().
  uint64_t generation() const { return generation_; }
  void replace(Config config) {
    current_ = std::make_shared<const Config>(std::move(config));
    ++generation_;
  }

 private:
  std::shared_ptr<const Config> current_;
  uint64_t generation_ = 0;
};

}  // namespace pressured
