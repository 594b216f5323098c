#pragma once
// NodeSnapshot: what the engine is given to decide on. Produced by the
// observation layer (userspace/cgroup, node, pods) from fresh kernel reads, or
// by `simulate` from a timeline. Plain values; no I/O.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/signals.hpp"

namespace pressured {

/// One signal's observed value. For "<" signals `value` is what is available
/// (bytes, inodes, pids) and `capacity` the total; for PSI signals `value` is
/// the stall percentage (0-100) and capacity is 100.
struct SignalObservation {
  double value = 0;
  double capacity = 0;
  TimePoint observed_at{};
  bool stale = false;  // the read failed; the value is the last good one
};

/// Per-signal observations; nullopt when the signal is not observed at all on
/// this node (no imagefs, no PSI, ...).
using SignalSet = std::array<std::optional<SignalObservation>, kSignalCount>;

struct PodResources {
  uint64_t memory_bytes = 0;
  uint64_t ephemeral_storage_bytes = 0;
  bool operator==(const PodResources&) const = default;
};

struct PodUsage {
  uint64_t memory_working_set_bytes = 0;  // usage - inactive_file
  uint64_t memory_rss_bytes = 0;
  uint64_t memory_cache_bytes = 0;
  uint64_t memory_active_file_bytes = 0;    // memory.stat active_file (v1 total_active_file)
  uint64_t memory_inactive_file_bytes = 0;  // memory.stat inactive_file (v1 total_inactive_file)
  uint64_t ephemeral_storage_bytes = 0;   // logs + emptyDir + writable layers
  uint64_t inodes = 0;
  uint64_t pids = 0;
  bool operator==(const PodUsage&) const = default;
};

/// One line of a PSI file ("some ..." or "full ..."): percentages and the
/// total stall time in microseconds.
struct PsiLine {
  double avg10 = 0;
  double avg60 = 0;
  double avg300 = 0;
  uint64_t total_us = 0;
  bool operator==(const PsiLine&) const = default;
};

/// A PSI file (/proc/pressure/<r> or <cgroup>/<r>.pressure). `full` is absent
/// for system-wide cpu on kernels before 5.13.
struct PsiStats {
  PsiLine some;
  std::optional<PsiLine> full;
  bool operator==(const PsiStats&) const = default;
};

/// cgroup v2 memory.events of a pod cgroup (hierarchical counts).
struct MemoryEvents {
  uint64_t low = 0;
  uint64_t high = 0;
  uint64_t max = 0;
  uint64_t oom = 0;
  uint64_t oom_kill = 0;
  uint64_t oom_group_kill = 0;
  bool operator==(const MemoryEvents&) const = default;
};

/// One named part of a pod's ephemeral storage: an emptyDir volume (by
/// volume name), a container's logs (by container name) or a container's
/// writable layer (by runtime container id).
struct NamedStorageUsage {
  std::string name;
  uint64_t bytes = 0;
  uint64_t inodes = 0;
  bool operator==(const NamedStorageUsage&) const = default;
};

/// Where a pod's ephemeral storage is, as of the storage walker's last walk
/// (docs/observation.md, "Ephemeral storage"). The three parts add up to
/// PodUsage::ephemeral_storage_bytes / inodes.
struct EphemeralStorageBreakdown {
  uint64_t logs_bytes = 0;  // /var/log/pods/<ns>_<name>_<uid>
  uint64_t logs_inodes = 0;
  uint64_t empty_dir_bytes = 0;  // <nodefs>/pods/<uid>/volumes/kubernetes.io~empty-dir
  uint64_t empty_dir_inodes = 0;
  uint64_t writable_layers_bytes = 0;  // containers' overlay upper dirs below the runtime root
  uint64_t writable_layers_inodes = 0;
  bool writable_layers_measured = false;  // false: runtime root unknown, layers not included
  uint32_t containers = 0;                // container cgroups found below the pod cgroup
  uint32_t writable_layers = 0;           // distinct layers measured for this pod
  uint32_t unresolved_containers = 0;     // containers whose layer could not be found (not counted)
  // The same usage part by part, for the per-volume and per-container limits
  // (docs/engine.md, "Local ephemeral-storage limits"); empty when the walk
  // did not split it.
  std::vector<NamedStorageUsage> empty_dir_volumes;  // <empty-dir>/<volume name>
  std::vector<NamedStorageUsage> container_logs;     // <pod logs>/<container name>
  std::vector<NamedStorageUsage> container_layers;   // writable layer, by runtime container id
  bool operator==(const EphemeralStorageBreakdown&) const = default;
};

/// What a pod's spec says about its local ephemeral storage: the limits the
/// kubelet enforces pod by pod, independently of node thresholds.
struct LocalStorageSpec {
  struct Container {
    std::string name;
    std::string id;  // runtime container id from status.containerStatuses ("containerd://" cut); empty if none
    std::optional<uint64_t> ephemeral_storage_limit_bytes;  // resources.limits.ephemeral-storage
    bool operator==(const Container&) const = default;
  };
  struct EmptyDir {
    std::string name;
    std::optional<uint64_t> size_limit_bytes;  // emptyDir.sizeLimit
    bool operator==(const EmptyDir&) const = default;
  };
  std::vector<Container> containers;  // spec.containers (the kubelet checks these, not init containers)
  std::vector<EmptyDir> empty_dirs;   // spec.volumes with an emptyDir source
  // The pod's ephemeral-storage limit as the kubelet adds it up (PodLimits):
  // the sum over containers that set one (sidecars included), at least the
  // largest init container's; nullopt when no container sets one.
  std::optional<uint64_t> pod_limit_bytes;
  bool operator==(const LocalStorageSpec&) const = default;
};

/// One container of the pod's spec as the kubelet's eviction message reads
/// it (evictionMessage: regular and init containers; ephemeral containers
/// cannot set requests and are never named).
struct ContainerSpec {
  std::string name;
  std::string id;  // runtime id from status.(init)containerStatuses ("containerd://" cut); empty if none
  bool init = false;
  uint64_t memory_request_bytes = 0;             // resources.requests.memory (API default: the limit)
  uint64_t ephemeral_storage_request_bytes = 0;  // resources.requests.ephemeral-storage
  bool operator==(const ContainerSpec&) const = default;
};

/// One container cgroup's memory working set (usage - inactive_file), read
/// from the container's own cgroup below the pod's; `id` is the directory's
/// runtime container id (ContainerCgroup::id).
struct ContainerMemory {
  std::string id;
  uint64_t working_set_bytes = 0;
  uint64_t usage_bytes = 0;                 // memory.usage_in_bytes (v1) / memory.current (v2)
  std::optional<PsiStats> memory_pressure;  // the container's own memory.pressure (v2 only)
  // The same container's working set at the reader's reading before this one
  // (nullopt: none yet) and how long before: what the container grew by.
  std::optional<uint64_t> previous_working_set_bytes;
  std::optional<double> previous_age_seconds;
  bool operator==(const ContainerMemory&) const = default;
};

/// A pod's metadata.labels as its metadata source listed them, bounded
/// (pods/pod_json.hpp: kMaxPodLabels, kMaxPodLabelBytes). Immutable once
/// read and shared: the metadata map and every snapshot's Pod point at one
/// copy, so carrying labels costs a pointer per pod, not a copy per cycle.
/// Read by plugins (a protection by label selector), not by the engine.
struct PodLabels {
  std::vector<std::pair<std::string, std::string>> entries;  // sorted by key, keys unique
  // Some labels were not kept: over the bounds, or not a string. A selector
  // on a label not kept does not match; a plugin can tell from this.
  bool incomplete = false;
  bool operator==(const PodLabels&) const = default;
};

struct Pod {
  std::string uid;
  std::string name;        // empty when metadata is unknown
  std::string namespace_;  // empty when metadata is unknown
  QosClass qos = QosClass::BestEffort;
  int32_t priority = 0;
  bool critical = false;    // priority >= 2000000000 or a critical annotation
  bool static_pod = false;  // static or mirror pod: never evicted
  bool daemonset = false;   // owned by a DaemonSet
  int64_t termination_grace_period_seconds = 30;
  PodResources requests;
  PodResources limits;
  PodUsage usage;
  bool metadata_known = false;  // false: known from cgroups only
  // Known from cgroups only while the configured metadata source has no good
  // answer (none yet, 401, TLS, ...) or listed the pod unparsably: it might be
  // critical or static, so it is never evicted (fail safe).
  bool metadata_unavailable = false;
  // The source listed the pod but could not read its memory (or its
  // ephemeral-storage / emptyDir) quantities: never evicted for that
  // resource, as the kubelet would not know its requests or limits there.
  bool memory_spec_unparsable = false;
  bool storage_spec_unparsable = false;
  bool stale = false;           // a usage read failed
  // No stats at all for the resource (the kubelet's "no stats were found"):
  // the pod's memory and pid usage was never read, or its ephemeral storage
  // never measured. Usage is then 0; `ranking: kubelet` evicts such a pod
  // first, as the kubelet does (docs/engine.md, "Ranking").
  bool no_usage_stats = false;
  bool no_storage_stats = false;
  std::string cgroup_path;      // absolute path of the pod cgroup (memory hierarchy)
  uint64_t cgroup_id = 0;       // kernfs inode id, as BPF sees it
  // Filled by the observation layer (docs/observation.md):
  uint64_t unified_cgroup_id = 0;              // inode in the unified hierarchy (v2/hybrid), 0 if none
  uint64_t memory_usage_bytes = 0;             // memory.usage_in_bytes (v1) / memory.current (v2)
  std::optional<uint64_t> memory_limit_bytes;  // the pod cgroup's limit; nullopt when unlimited
  std::optional<MemoryEvents> memory_events;   // v2 only
  std::optional<PsiStats> memory_pressure;     // v2 (or hybrid with a unified pod cgroup) only
  std::optional<TimePoint> usage_observed_at;  // when `usage` was last read successfully
  std::optional<TimePoint> storage_measured_at;  // when ephemeral storage was last walked
  std::optional<EphemeralStorageBreakdown> ephemeral_storage;  // logs / emptyDir / writable layers, when walked
  LocalStorageSpec local_storage;  // from metadata; empty when metadata is unknown
  std::vector<ContainerSpec> containers;  // from metadata, spec order (init containers after); empty when unknown
  // The pod-level memory request (PodLevelResources: spec.resources.requests.memory,
  // the API's default being the pod-level limit); nullopt without one.
  std::optional<uint64_t> pod_level_memory_request_bytes;
  std::string phase;               // status.phase as the metadata source last saw it; empty when unknown
  std::shared_ptr<const PodLabels> labels;  // from metadata; null when it has none or is unknown
};

/// Where the containers' writable layers are, relative to nodefs and imagefs
/// (KEP-4191, docs/observation.md "Filesystem layout"). It decides which
/// thresholds containerfs.* derive from and how pods rank for them.
enum class ContainerfsLayout : uint8_t {
  Unknown,   // the runtime root could not be found: containerfs.* not observed
  Single,    // nodefs, imagefs and writable layers on one filesystem
  Imagefs,   // writable layers with the images on a dedicated imagefs
  Split,     // writable layers on nodefs, images on a dedicated imagefs (KEP-4191 split)
  Separate,  // writable layers on a filesystem of their own (neither nodefs nor imagefs)
};

constexpr std::string_view name(ContainerfsLayout l) {
  switch (l) {
    case ContainerfsLayout::Unknown: return "unknown";
    case ContainerfsLayout::Single: return "single";
    case ContainerfsLayout::Imagefs: return "imagefs";
    case ContainerfsLayout::Split: return "split";
    case ContainerfsLayout::Separate: return "separate";
  }
  return "?";
}

constexpr std::optional<ContainerfsLayout> parse_containerfs_layout(std::string_view text) {
  for (auto l : {ContainerfsLayout::Unknown, ContainerfsLayout::Single, ContainerfsLayout::Imagefs,
                 ContainerfsLayout::Split, ContainerfsLayout::Separate}) {
    if (name(l) == text) return l;
  }
  return std::nullopt;
}

/// The kubelet's "split image filesystem": writable layers not on the imagefs.
constexpr bool is_split(ContainerfsLayout l) { return l == ContainerfsLayout::Split || l == ContainerfsLayout::Separate; }

/// The kernel's count of OOM kills of one memory cgroup's own tasks (not its
/// descendants'): v1 memory.oom_control `oom_kill`, v2 memory.events.local
/// `oom_kill`. Both are local to the memcg and vanish with it. Beside it, what
/// tells whether this memcg's own limit was reached (docs/observation.md,
/// "Node-level and limit OOM kills"): v2 memory.events.local `oom` (the limit
/// reached and a charge about to fail: the memcg was an OOM's domain), v1
/// memory.failcnt (a charge failed at the limit, reclaim may still have
/// saved it) with the limit itself.
struct MemcgOomKills {
  uint64_t cgroup_id = 0;  // kernfs id (inode of the directory), as BPF sees it
  std::string path;        // absolute, memory hierarchy
  uint64_t oom_kills = 0;
  std::optional<uint64_t> oom_events;  // v2 `oom` (local); nullopt on v1
  std::optional<uint64_t> failcnt;     // v1 memory.failcnt; nullopt on v2 or unreadable
  bool limited = false;                // v1: memory.limit_in_bytes is set (failcnt can move only then)
  bool operator==(const MemcgOomKills&) const = default;
};

/// Where a kernel OOM kill came from (pressured_kernel_oom_kills_total's
/// `scope`): the node ran out (a global OOM, or the kubepods or a QoS tier
/// cgroup, the node allocatable, at its limit: what pressured exists to
/// prevent); a pod's or container's own limit (the workload's, by design);
/// or not told apart (docs/observation.md, "Node-level and limit OOM kills").
enum class OomScope : uint8_t { Node, Cgroup, Unknown };

constexpr std::string_view name(OomScope s) {
  switch (s) {
    case OomScope::Node: return "node";
    case OomScope::Cgroup: return "cgroup";
    case OomScope::Unknown: return "unknown";
  }
  return "unknown";
}

struct NodeSnapshot {
  TimePoint taken_at{};
  SignalSet signals{};
  ContainerfsLayout containerfs_layout = ContainerfsLayout::Unknown;
  std::vector<Pod> pods;
  // Filled by the observation layer: system PSI, full detail.
  std::optional<PsiStats> psi_memory;
  std::optional<PsiStats> psi_io;
  std::optional<PsiStats> psi_cpu;
  // Every memory cgroup of the kubepods tree (kubepods included) with its
  // kernel OOM kill count, read by a full observation; nullopt when not read
  // (a partial refresh, no kubepods, or a v2 kernel without memory.events.local).
  std::optional<std::vector<MemcgOomKills>> oom_kills;

  const std::optional<SignalObservation>& signal(Signal s) const { return signals[static_cast<std::size_t>(s)]; }
  std::optional<SignalObservation>& signal(Signal s) { return signals[static_cast<std::size_t>(s)]; }
};

}  // namespace pressured
