#pragma once
// The observation layer's contract (docs/observation.md): where the
// cgroups are (CgroupLayout), which pods exist (PodCgroup), and how the rest of
// pressured reads signals and pod usage fresh from the kernel (NodeObserver),
// plus where pod metadata comes from (PodMetadataSource) and the off-hot-path
// ephemeral storage walker (PodStorageSource). Kernel and network I/O stay
// behind these interfaces; every path is rooted at the injected
// ObserveConfig::cgroup_mount / proc_root so tests can use fake trees.

#include <array>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/config.hpp"
#include "pressured/enum_names.hpp"
#include "pressured/page_counters.hpp"
#include "pressured/result.hpp"
#include "pressured/signals.hpp"
#include "pressured/snapshot.hpp"
#include "pressured/stats.hpp"

namespace pressured {

// ---------------------------------------------------------------------------
// Cgroup layout
// ---------------------------------------------------------------------------

/// v1: only legacy hierarchies; v2: pure unified hierarchy; Hybrid: legacy
/// controller hierarchies plus a cgroup2 mount (usually <mount>/unified).
enum class CgroupVersion : uint8_t { V1, V2, Hybrid };
inline constexpr EnumName<CgroupVersion> kCgroupVersionNames[] = {
    {CgroupVersion::V1, "v1"}, {CgroupVersion::V2, "v2"}, {CgroupVersion::Hybrid, "hybrid"}};

/// Where everything is. All paths are absolute; empty when absent. Detected
/// from the mount table by detect_layout() (userspace/cgroup/layout.hpp).
struct CgroupLayout {
  CgroupVersion version = CgroupVersion::V1;
  std::string mount;          // cgroupfs mount point, e.g. /sys/fs/cgroup
  std::string memory_mount;   // hierarchy holding the memory controller (v1: <mount>/memory, v2: <mount>)
  bool memory_on_v2 = false;  // memory controller lives in the unified hierarchy
  std::string unified_mount;  // cgroup2 mount (v2: <mount>; hybrid: <mount>/unified; v1: empty)
  std::string pids_mount;     // pids controller hierarchy (v1 mount or the unified mount); empty if none
  std::string freezer_mount;  // v1 freezer hierarchy; empty on v2 (cgroup.freeze is used there)
  CgroupDriver driver = CgroupDriver::Cgroupfs;  // resolved, never Auto
  std::string kubepods_memory_path;   // <memory_mount>/<cgroup_root>/<kubepods>
  std::string kubepods_unified_path;  // same in the unified hierarchy, if it exists there
  std::string kubepods_pids_path;     // same in the pids hierarchy, if it exists there
  std::string kubepods_freezer_path;  // same in the v1 freezer hierarchy, if it exists there
};

std::string_view name(CgroupVersion v);
std::string_view name(CgroupDriver d);

// ---------------------------------------------------------------------------
// Pod cgroups
// ---------------------------------------------------------------------------

/// A container cgroup below a pod cgroup.
struct ContainerCgroup {
  std::string id;           // directory name, runtime prefix stripped (cri-containerd-<id>.scope -> <id>)
  std::string memory_path;  // absolute, memory hierarchy
  uint64_t cgroup_id = 0;   // inode of the directory in the memory hierarchy
};

/// A pod as found in the cgroup tree: QoS from the parent, uid from the name.
struct PodCgroup {
  std::string uid;  // dashes restored for the systemd driver
  QosClass qos = QosClass::BestEffort;
  std::string memory_path;   // absolute path of the pod cgroup, memory hierarchy
  std::string unified_path;  // the pod cgroup in the unified hierarchy (v2: == memory_path; hybrid: if present)
  std::string pids_path;     // the pod cgroup in the pids hierarchy, if present
  std::string freezer_path;  // the pod cgroup in the v1 freezer hierarchy, if present
  std::vector<ContainerCgroup> containers;
  uint64_t cgroup_id = 0;          // inode of memory_path: the memcg's id as BPF sees it
  uint64_t unified_cgroup_id = 0;  // inode of unified_path: bpf_get_current_cgroup_id() on v2/hybrid
};

/// Parses a pod cgroup directory name for a driver: "pod<uid>" (cgroupfs) or
/// "kubepods-<qos>-pod<uid_with_underscores>.slice" / "kubepods-pod<...>.slice"
/// (systemd). Returns the uid with dashes, or nullopt when the name is not a pod.
std::optional<std::string> pod_uid_from_cgroup_name(std::string_view dir_name, CgroupDriver driver);

// ---------------------------------------------------------------------------
// Pod metadata (names, requests, priority, ...)
// ---------------------------------------------------------------------------

/// What the kubelet's /pods or a local Pod/PodList file says about one pod.
struct PodMetadata {
  std::string uid;
  std::string name;
  std::string namespace_;
  QosClass qos = QosClass::BestEffort;  // status.qosClass, else derived from requests/limits
  int32_t priority = 0;
  bool critical = false;    // priority >= 2000000000 (system-*-critical)
  bool static_pod = false;  // a mirror pod, or config.source != "api" where the source is trusted (PodTrust)
  // A mirror pod's kubernetes.io/config.mirror: the static pod's config hash,
  // which names its cgroup (the mirror's own uid does not). Empty otherwise.
  std::string mirror_of;
  bool daemonset = false;   // an ownerReference of kind DaemonSet
  int64_t termination_grace_period_seconds = 30;
  PodResources requests;  // sum over containers (init containers: max), as the scheduler sees them
  PodResources limits;    // 0 when any container has no limit
  LocalStorageSpec local_storage;  // per-container ephemeral-storage limits, emptyDir sizeLimits
  std::vector<ContainerSpec> containers;  // per-container requests and runtime ids (eviction messages)
  std::optional<uint64_t> pod_level_memory_request_bytes;  // spec.resources.requests.memory (pod-level)
  std::string phase;      // status.phase, may be empty
  std::shared_ptr<const PodLabels> labels;  // metadata.labels; null when it has none
  bool unparsable = false;  // the source listed this uid but its fields could not be parsed
  // One of its memory (or ephemeral-storage / emptyDir) quantities could not
  // be read: never evicted for that resource, still for the others.
  bool memory_spec_unparsable = false;
  bool storage_spec_unparsable = false;
};

using PodMetadataMap = std::unordered_map<std::string, PodMetadata>;  // by uid

struct PodMetadataStats {
  uint64_t refreshes = 0;         // successful fetches
  uint64_t unchanged_refreshes = 0;  // of those, the same input as the current map's (not parsed again)
  uint64_t refresh_failures = 0;  // fetches or parses that failed (previous map kept)
  uint64_t pods = 0;              // pods in the current map
  uint64_t skipped_objects = 0;   // documents that were not a Pod/PodList or lacked a uid
  std::optional<TimePoint> last_success;
  std::string last_error;
};

/// A pluggable source of pod metadata (kubelet /pods, local file/dir, none).
/// Fetching happens off the pressure path: either on the source's own thread
/// (start) or by an explicit refresh() from a slow thread. current() never
/// blocks on I/O.
class PodMetadataSource {
 public:
  virtual ~PodMetadataSource() = default;

  /// Fetches and parses now, replacing the map on success and keeping the
  /// previous one on failure. Blocking (bounded by the configured timeout):
  /// never call it on the pressure path.
  virtual Result<void> refresh() = 0;

  /// The most recent successfully fetched map (empty before the first
  /// success). Cheap: returns a shared pointer to an immutable map.
  virtual std::shared_ptr<const PodMetadataMap> current() const = 0;

  /// Starts a background thread that refreshes every `interval` and soon after
  /// request_refresh(). Idempotent.
  virtual void start(Duration interval) = 0;

  /// Stops the background thread (joins it). Idempotent; the destructor calls it.
  virtual void stop() = 0;

  /// Asks the background thread to refresh soon (e.g. the pod cgroup set
  /// changed). Never blocks.
  virtual void request_refresh() = 0;

  virtual PodMetadataStats stats() const = 0;

  /// "none", "file:<path>", "kubelet:<url>": for logs and `top`.
  virtual std::string describe() const = 0;

  /// The stats this kind of source keeps of its own work (declared with
  /// PRESSURED_DECLARE_STATS; stat_list), for the daemon to export into its
  /// Metrics; they point into the source, which must outlive the export.
  /// Empty: the source counts nothing beyond stats().
  virtual std::vector<ExternalStat> exported_stats() const { return {}; }
};

/// Builds the source named by the config. Fails on a bad config (File with no
/// path, unreadable token file, ...), not on an unreachable kubelet.
Result<std::unique_ptr<PodMetadataSource>> make_pod_metadata_source(const PodSourceConfig& config);

// ---------------------------------------------------------------------------
// Per-pod ephemeral storage (off the hot path)
// ---------------------------------------------------------------------------

/// One pod's ephemeral storage as of the last walk.
struct PodDiskUsage {
  uint64_t bytes = 0;   // allocated bytes (st_blocks * 512)
  uint64_t inodes = 0;  // files, directories and symlinks counted once
  TimePoint measured_at{};
  bool complete = true;  // false: the walk hit this pod's fair share of the time or entry budget (a lower bound)
  EphemeralStorageBreakdown breakdown;  // logs / emptyDir / writable layers (sums to bytes, inodes)
};

/// Why a container's writable layer could not be measured (docs/observation.md).
enum class LayerFailure : uint8_t {
  NoPid,               // the container cgroup (and its children) has no process
  PidVanished,         // every pid tried exited while being read
  NoOverlayRoot,       // the process's "/" is not an overlay mount with an upperdir
  OutsideRuntimeRoot,  // the upper dir is not below the runtime root: not counted
  PermissionDenied,    // EACCES/EPERM on cgroup.procs, mountinfo or the upper dir
  LayerNotFound,       // the upper dir does not exist at that path here (runtime root not mounted?)
  ReadError,           // any other error
  Count
};
/// The reason's snake_case name ("no_pid", ...) for logs and `top --json`.
std::string_view name(LayerFailure f);

/// Writable-layer accounting of the last walk.
struct WritableLayerStats {
  bool measured = false;       // false: runtime root or cgroup layout unknown, layers not measured
  std::string runtime_root;    // resolved (realpath) runtime root, when measured
  std::string not_measured_reason;  // why not, when !measured
  uint64_t containers = 0;     // container cgroups seen
  uint64_t layers = 0;         // distinct upper dirs measured
  uint64_t shared = 0;         // containers whose upper dir was already counted (deduplicated)
  uint64_t skipped = 0;        // cgroups that are not containers (crio-conmon-*)
  std::array<uint64_t, static_cast<std::size_t>(LayerFailure::Count)> unresolved{};  // by LayerFailure
  /// Containers whose layer was not measured, over all reasons.
  uint64_t unresolved_total() const {
    uint64_t n = 0;
    for (auto v : unresolved) n += v;
    return n;
  }
};

/// What the ephemeral storage walker did (pressured/stats.hpp), exported by
/// the daemon (PodStorageSource::exported_stats); `pressured top` shows them
/// with the layer details (PodStorageStats).
#define PRESSURED_POD_STORAGE_STATS(COUNTER, GAUGE)                                                              \
  COUNTER(walks, "pressured_storage_walks_total", "",                                                            \
          "Walks of the pods' logs, emptyDir volumes and writable layers (one every cgroup.diskWalkInterval).") \
  COUNTER(incomplete_walks, "pressured_storage_incomplete_walks_total", "",                                      \
          "Walks that cut at least one pod at its fair share of the time and entry budget: that pod's usage "     \
          "is a lower bound. Rising steadily: a pod holds more files than the budget walks.")                    \
  COUNTER(errors, "pressured_storage_walk_errors_total", "",                                                     \
          "Directories and entries the walk could not read and skipped (permissions, removed while walked).")    \
  GAUGE(entries, "pressured_storage_walk_entries", "", "Entries visited by the last walk.")                       \
  GAUGE(truncated_pods, "pressured_storage_walk_truncated_pods", "",                                             \
        "Pods cut at their fair share of the budget in the last walk (their usage is a lower bound).")           \
  GAUGE(last_walk_us, "pressured_storage_walk_duration_microseconds", "",                                        \
        "How long the last walk took (it runs on its own thread, never on the pressure path).")                  \
  GAUGE(layer_containers, "pressured_storage_writable_layer_containers", "",                                     \
        "Container cgroups seen by the last walk's writable-layer accounting.")                                  \
  GAUGE(layers_measured, "pressured_storage_writable_layers_measured", "",                                       \
        "Distinct writable layers (overlay upper dirs) measured by the last walk.")                              \
  GAUGE(layers_unmeasured, "pressured_storage_writable_layers_unmeasured_containers", "",                        \
        "Containers whose writable layer the last walk could not measure (no process, not an overlay below "    \
        "the runtime root, ...; reasons in `pressured top`): their ephemeral storage misses the layer.")
PRESSURED_DECLARE_STATS(PodStorageCounters, PRESSURED_POD_STORAGE_STATS);

/// The walker's counters as plain numbers, with the last walk's layer details.
struct PodStorageStats {
  uint64_t walks = 0;
  uint64_t incomplete_walks = 0;   // walks that cut at least one pod at its share of the budget
  uint64_t truncated_pods = 0;     // pods cut at their fair share of the budget in the last walk
  uint64_t entries = 0;            // entries visited in the last walk
  uint64_t errors = 0;             // unreadable directories/entries (skipped)
  Duration last_walk_duration{0};
  WritableLayerStats writable_layers;  // last walk
};

/// Measures pod logs (<pod_logs_path>/<ns>_<name>_<uid>), emptyDir
/// volumes (<nodefs_path>/pods/<uid>/volumes/kubernetes.io~empty-dir) and
/// the containers' writable layers (the overlay upper dir mounted as "/" of a
/// process in each container cgroup, when below the runtime root) by an
/// iterative walk that never follows symlinks nor crosses filesystems and is
/// bounded in time and entries. Results are cached; lookup() never does I/O.
class PodStorageSource {
 public:
  virtual ~PodStorageSource() = default;

  /// Walks every pod directory now (blocking, bounded). Call off the hot path.
  virtual void walk_now(TimePoint now) = 0;

  /// The cached usage of a pod, nullopt when never measured.
  virtual std::optional<PodDiskUsage> lookup(const std::string& uid) const = 0;

  /// Starts a background thread walking every `interval`; `clock` must
  /// outlive the thread (stop() or destruction). Idempotent.
  virtual void start(Duration interval, const Clock& clock) = 0;

  /// Stops the background thread. Idempotent; the destructor calls it.
  virtual void stop() = 0;

  virtual PodStorageStats stats() const = 0;

  /// The walker's declared stats (PodStorageCounters), for the daemon to
  /// export into its Metrics; they point into the source, which must outlive
  /// the export. Empty: a source that counts nothing.
  virtual std::vector<ExternalStat> exported_stats() const { return {}; }
};

std::unique_ptr<PodStorageSource> make_pod_storage_source(const ObserveConfig& config);

// ---------------------------------------------------------------------------
// The memory cgroups the kernel alarms watch
// ---------------------------------------------------------------------------

/// The page counters the memory watches are planned from, read fresh (one
/// small usage file each: memory.current on v2, memory.usage_in_bytes on v1).
struct MemcgCounters {
  std::string kubepods_path;  // the kubepods memory cgroup; empty: none
  std::optional<uint64_t> kubepods_usage;
  /// The node scope: the cgroup holding kubepods (the hierarchy root on a real
  /// node; the sandbox in tests and the demo, never above the configured root).
  /// Empty when there is no kubepods.
  std::string scope_path;
  /// Its usage file; nullopt where there is none (the v2 root). At a v1
  /// hierarchy root the kernel computes it from statistics, not the counter.
  std::optional<uint64_t> scope_file_usage;
  /// The scope is the hierarchy root: its page counter is not in a file, and
  /// children_usage holds the sum of its children's (what dying cgroups
  /// still hold is not in it).
  bool scope_is_root = false;
  std::optional<uint64_t> children_usage;  // nullopt: not at a root, or no child has a counter
};

/// A memory cgroup whose reclaim activity is tracked: kubepods or a QoS tier.
struct MemcgScope {
  uint64_t id = 0;   // cgroup id (the kernfs inode the BPF hooks see)
  std::string path;
  std::string name;  // kubepods, burstable, besteffort (the metrics label)
};

// ---------------------------------------------------------------------------
// The node observer
// ---------------------------------------------------------------------------

/// What the observer counts of its reads (pressured/stats.hpp): degraded
/// reads, and how the pods in cgroups and in the metadata source matched at
/// the last observation. Exported by the daemon under these series;
/// `pressured top` shows a snapshot (ObserverCounters::Values).
#define PRESSURED_OBSERVER_STATS(COUNTER, GAUGE)                                                                  \
  COUNTER(observations, "pressured_observer_observations_total", "",                                             \
          "Full observations of the node (every signal and every pod read from the kernel's files).")           \
  COUNTER(page_counter_batches, "pressured_observer_page_counter_batches_total", "",                             \
          "Decisions under memory pressure that read the page counters of every contending pod in one batch "   \
          "(the BPF cgroup iterator) instead of one usage file per pod.")                                        \
  GAUGE(page_counter_batch, "pressured_observer_page_counter_batch_enabled", "",                                 \
        "1 when decisions under memory pressure read contending pods' page counters in one batch (BPF cgroup " \
        "iterator); 0 when they read one usage file per pod (no iterator on this kernel, BPF off, or the "     \
        "batch failed once: logged at warn).")                                                                 \
  COUNTER(stale_signal_reads, "pressured_observer_stale_signal_reads_total", "",                                 \
          "Reads of a group of signals (memory, a filesystem, pids) that failed: the last good values were "     \
          "used, marked stale. Rising steadily: a file pressured cannot read (permissions, a gone mount).")     \
  COUNTER(stale_pod_reads, "pressured_observer_stale_pod_reads_total", "",                                       \
          "Reads of a pod's cgroup files that failed (truncated, EACCES, ...) while the cgroup still existed: "  \
          "the pod was kept with its last numbers, marked stale.")                                              \
  COUNTER(vanished_pods, "pressured_observer_vanished_pods_total", "",                                           \
          "Pod cgroups removed between listing and reading: pods ending; normal at the pace pods end.")        \
  COUNTER(reopened_cgroups, "pressured_observer_reopened_cgroups_total", "",                                     \
          "Pod cgroups removed and created again under the same path (a new inode): their files were reopened.") \
  COUNTER(failed_pod_listings, "pressured_observer_failed_pod_listings_total", "",                               \
          "Listings of the pod cgroups that failed partway (EMFILE, EACCES, ...): the pods of the last listing " \
          "whose cgroups still exist were kept, pods created since could be missing from the ranking.")         \
  GAUGE(pods_without_metadata, "pressured_observer_pods_without_metadata", "",                                   \
        "Pods in cgroups that the metadata source does not list, at the last observation (the source lags "      \
        "a new pod, a static pod has no mirror pod, or the source misses pods): never evicted until listed.")  \
  GAUGE(metadata_without_cgroup, "pressured_observer_metadata_without_cgroup", "",                               \
        "Running pods the metadata source lists that have no cgroup on this node, at the last observation "      \
        "(stale metadata, or pods root / cgroup driver not matching the kubelet's).")                           \
  GAUGE(pods_unevictable_without_metadata, "pressured_pods_unevictable_without_metadata", "",                    \
        "Pods never evicted because the configured metadata source does not describe them: no good answer "      \
        "(none yet, HTTP/TLS error), not listed (yet), or listed unparsably; they might be critical or static. "   \
        "Last observation.")
PRESSURED_DECLARE_STATS(ObserverCounters, PRESSURED_OBSERVER_STATS);

/// Reads the node's signals and every pod's usage straight from the kernel's
/// files, fresh on every call, through fds kept open per file (pread).
/// Not thread-safe: one owner thread (the reactor) calls it.
class NodeObserver {
 public:
  virtual ~NodeObserver() = default;

  /// The layout the observer was built for.
  virtual const CgroupLayout& layout() const = 0;

  /// A full observation: every signal and every pod (rescanning the pod cgroup
  /// set, merging metadata and the cached disk usage). Signals that cannot be
  /// read are stale (last good value) or absent; pods that cannot be read are
  /// stale; only a failure to read anything at all is an error.
  virtual Result<NodeSnapshot> observe(TimePoint now) = 0;

  /// One signal, freshly read (for the decision right after a kernel event).
  /// Error when the signal is not observed on this node or the read failed.
  virtual Result<SignalObservation> refresh_signal(Signal signal, TimePoint now) = 0;

  /// Re-reads one pod's usage (and v2 events/pressure) in place, by
  /// pod.cgroup_path/uid. Error, with pod.stale set, when the pod's cgroup is
  /// gone (ENOENT, and only then) or unreadable (another code).
  virtual Result<void> refresh_pod(Pod& pod, TimePoint now) = 0;

  /// For a decision between full observations: re-reads the page-counter
  /// usage (memory.usage_in_bytes / memory.current: one small file per pod,
  /// or all of them in one batch, see set_page_counter_reader) of each pod in
  /// `pods` (pods of the last observe()) into
  /// pod.memory_usage_bytes. That usage is an upper bound of the pod's
  /// working set, enough to tell which pods may head the memory ranking.
  /// Fails (ESTALE) when the pod cgroup set may have changed since the last
  /// observe() (a QoS directory's entries changed; checked even for an empty
  /// `pods`), when a pod's cgroup is gone or was recreated, and when a read
  /// fails: the caller then observes fully. The default (observers without
  /// kept-open usage files) always fails with ENOTSUP.
  /// Each container's memory working set, read now from the container's own
  /// cgroup below `pod`'s (cgroupfs and systemd drivers, v1 and v2), for the
  /// kubelet's per-container eviction message. Containers that cannot be
  /// read are left out. The default (observers without cgroups): none.
  virtual std::vector<ContainerMemory> container_memory(const Pod& pod) {
    (void)pod;
    return {};
  }
  /// Each full observation then also reads the containers of the `pods` pods
  /// furthest over their memory request (the likely next memory victims), so
  /// that container_memory() of one of them at an eviction tells what each
  /// container grew since (docs/observation.md, "Per container"). 0 (the
  /// default): only container_memory() reads containers. Observers without
  /// cgroups ignore it.
  virtual void track_container_growth(std::size_t pods) { (void)pods; }

  virtual Result<void> refresh_memory_usage(const std::vector<Pod*>& pods, TimePoint now) {
    (void)pods;
    (void)now;
    return Error{ENOTSUP, "no incremental usage reads"};
  }

  /// Gives refresh_memory_usage one batched read of every pod's page counter
  /// (the BPF cgroup iterator) instead of one file per pod. Null, or a reader
  /// that fails once (logged, stat page_counter_batch back to 0), leaves the
  /// per-file reads. The default ignores it.
  virtual void set_page_counter_reader(std::shared_ptr<PageCounterReader> reader) { (void)reader; }

  /// The page counters of kubepods and of the node scope, read now (for
  /// the memory watches, right before they are planned).
  virtual MemcgCounters read_memcg_counters() = 0;

  /// kubepods and those of its QoS tiers that exist (cgroupfs or systemd
  /// names), with their cgroup ids; empty when there is no kubepods.
  virtual std::vector<MemcgScope> memcg_scopes() = 0;

  /// The pod cgroups currently present (a directory scan; no usage reads).
  virtual std::vector<PodCgroup> list_pods() = 0;

  /// The observer's counters, live: atomics, so any thread may read them
  /// (the metrics server exports them with export_stats; `values()` gives a
  /// plain snapshot). They live as long as the observer.
  virtual const ObserverCounters& counters() const = 0;
};

/// Builds the observer for `config`: detects the layout, and takes the
/// metadata and storage sources to merge (either may be null: pods are then
/// known from cgroups only / without ephemeral storage). The sources are
/// shared with whoever refreshes them off the hot path.
Result<std::unique_ptr<NodeObserver>> make_node_observer(const ObserveConfig& config,
                                                         std::shared_ptr<PodMetadataSource> metadata = nullptr,
                                                         std::shared_ptr<PodStorageSource> storage = nullptr);

/// Same, for a layout already detected (tests, the demo's sandbox).
Result<std::unique_ptr<NodeObserver>> make_node_observer(const ObserveConfig& config, CgroupLayout layout,
                                                         std::shared_ptr<PodMetadataSource> metadata = nullptr,
                                                         std::shared_ptr<PodStorageSource> storage = nullptr);

}  // namespace pressured
