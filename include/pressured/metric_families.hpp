#pragma once
// Every family Metrics serves itself, declared once (pressured/stats.hpp,
// PRESSURED_DECLARE_FAMILIES): kind, name, help, label names and how their
// values stay bounded, and a histogram's buckets. Metrics registers them in
// this order (/metrics lists the counters, then the gauges, then the
// histograms, each kind in this order); a component counts into one
// with `metrics.add(stats::kLocalKills, {"success"})`, and the label values
// are checked against the declaration when it compiles. Each series also
// carries the constant `node` label.
//
// Families whose series come and go with the node's state (signals,
// thresholds, conditions, recent victims, top pods, BPF programs) are set by
// the Metrics methods that keep that state; the others are plain counts.
// docs/metrics.md lists them for operators.

#include <cstdint>

#include "pressured/stats.hpp"

namespace pressured::stats {

/// Kernel event to decision: 10 us .. 10 s, 1-2.5-5 steps.
inline constexpr double kDetectionBuckets[] = {1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
                                               2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1,    2.5,  5,      10};
/// Decision to pod gone: 1 ms .. 600 s (soft evictions wait for grace periods).
inline constexpr double kEvictionBuckets[] = {1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5,
                                              1,    2.5,    5,    10,   30,     60,   120, 300,  600};

// The labels several families share.
inline constexpr LabelDef kNamespaceLabel = text_label("namespace", 128);
inline constexpr LabelDef kPodLabel = text_label("pod", 253);
inline constexpr LabelDef kUidLabel = text_label("uid", 64);
// A signal's name, or an eviction's rule ("emptydirfs.limit").
inline constexpr LabelDef kReasonLabel = text_label("signal", 128);
inline constexpr LabelDef kPluginLabel = text_label("plugin", 63);
inline constexpr LabelDef kCgroupLabel = text_label("cgroup", 48);

// clang-format off
#define PRESSURED_METRICS_FAMILIES(COUNTER, GAUGE, HISTOGRAM)                                                          \
  GAUGE(kBuildInfo, "pressured_build_info",                                                                            \
        "Always 1; labels carry the version and build type of the running pressured.",                                 \
        label("version"), label("build_type"))                                                                         \
  GAUGE(kStartTime, "pressured_start_time_seconds", "Unix time the daemon's metrics were created (start).")            \
  GAUGE(kReady, "pressured_ready",                                                                                     \
        "1 when events are attached (BPF or fallback), the first observation is done and the pod "                     \
        "source delivered its first pod list, else 0.")                                                                \
  GAUGE(kPodSourceSynced, "pressured_pod_source_synced",                                                               \
        "1 once the pod metadata source delivered a pod list (or none is configured); 0: no "                          \
        "pod has metadata yet, so the ranking evicts none (docs/operations.md).")                                      \
  GAUGE(kSignalValue, "pressured_signal_value",                                                                        \
        "Observed value of an eviction signal, in its unit (available bytes/inodes/pids, or "                          \
        "PSI stall percent).",                                                                                         \
        label("signal"), label("unit"))                                                                                \
  GAUGE(kSignalCapacity, "pressured_signal_capacity", "Capacity of an eviction signal, in its unit.",                  \
        label("signal"), label("unit"))                                                                                \
  GAUGE(kSignalThreshold, "pressured_signal_threshold", "Configured eviction threshold, resolved to the signal's unit.", \
        label("signal"), label("unit"), label("threshold_type"))                                                       \
  GAUGE(kNodeCondition, "pressured_node_condition", "Node condition as decided by pressured (1 true, 0 false).",       \
        label("condition"))                                                                                            \
  COUNTER(kNodeConditionTransitions, "pressured_node_condition_transitions_total", "Times a node condition flipped.",  \
          label("condition"))                                                                                          \
  COUNTER(kObservations, "pressured_observations_total", "Fresh observations evaluated by the engine.")                \
  COUNTER(kEvictions, "pressured_evictions_total", "Pods chosen for eviction, by signal, QoS class and threshold type.", \
          kReasonLabel, label("qos_class"), label("threshold_type"))                                                   \
  COUNTER(kEvictionContainers, "pressured_eviction_containers_total",                                                  \
          "Memory evictions by the name of the victim's container that grew (or was furthest over its request); the "  \
          "first 64 names have a series of their own, later ones count as \"other\".",                                 \
          text_label("container", 63).capped(64, "other"))                                                             \
  GAUGE(kEvictionLastTimestamp, "pressured_eviction_last_timestamp_seconds",                                           \
        "Unix time of the most recent evictions (bounded list of recent victims).",                                    \
        kNamespaceLabel, kPodLabel, kUidLabel, kReasonLabel, label("qos_class"), label("threshold_type"))              \
  COUNTER(kEvictionNoCandidates, "pressured_eviction_no_candidates_total",                                             \
          "Evaluations where a threshold wanted a victim and no pod could be evicted.", label("signal"))               \
  HISTOGRAM(kEvictionLatency, "pressured_eviction_latency_seconds",                                                    \
            "Time from the eviction decision until the pod's processes are gone.", kEvictionBuckets,                   \
            label("threshold_type"))                                                                                   \
  COUNTER(kLocalKills, "pressured_local_kills_total", "Local kills of a pod's processes, by result.", label("result")) \
  COUNTER(kEvictionPolicyActions, "pressured_eviction_policy_actions_total",                                           \
          "Actions of the eviction policy (evict, escalate, kill, stuck, releasetimeout, ...).", token_label("action")) \
  COUNTER(kPluginCalls, "pressured_plugin_calls_total", "Calls pressured made to an eviction plugin, by plugin.",       \
          kPluginLabel)                                                                                                \
  COUNTER(kPluginTimeouts, "pressured_plugin_timeouts_total",                                                          \
          "Calls to an eviction plugin that missed plugins.callTimeout (the plugin was skipped and backed off).",      \
          kPluginLabel)                                                                                                \
  COUNTER(kPluginErrors, "pressured_plugin_errors_total",                                                              \
          "Calls to an eviction plugin that failed otherwise: unreachable, an invalid or too large answer.",           \
          kPluginLabel)                                                                                                \
  COUNTER(kPluginVetoes, "pressured_plugin_vetoes_total",                                                              \
          "Protections by an eviction plugin that kept the pod pressured's ranking chose from eviction.", kPluginLabel) \
  COUNTER(kPluginProposals, "pressured_plugin_proposals_total",                                                        \
          "Proposals of an eviction plugin that decided an eviction.", kPluginLabel)                                   \
  COUNTER(kKubernetesApiRequests, "pressured_kubernetes_api_requests_total",                                           \
          "Kubernetes API calls made by pressured, by action and result.", label("action"), label("result"))           \
  COUNTER(kKernelOomKills, "pressured_kernel_oom_kills_total",                                                         \
          "Processes killed by the kernel OOM killer, by the victim pod's QoS class (none: not a pod) "                \
          "and scope (node: the node ran out; cgroup: a pod's or container's own limit; unknown).",                    \
          label("qos_class"), label("scope"))                                                                          \
  HISTOGRAM(kDetectionLatency, "pressured_detection_latency_seconds",                                                  \
            "Time from the kernel event's timestamp to the engine's decision.", kDetectionBuckets,                     \
            token_label("source"))                                                                                     \
  HISTOGRAM(kReactorDispatchLatency, "pressured_reactor_dispatch_latency_seconds",                                     \
            "Time from a kernel event's timestamp to the reactor handing it to the daemon, "                           \
            "for every event.", {})                                                                                    \
  HISTOGRAM(kReclaimDuration, "pressured_reclaim_duration_seconds",                                                    \
            "How long each relief run (memory.reclaim writes before a memory eviction) took.", kDetectionBuckets)      \
  GAUGE(kBpfProgramInfo, "pressured_bpf_program_info", "Always 1; how each BPF program is attached and why.",           \
        token_label("program"), token_label("mode"), text_label("reason", 128))                                        \
  COUNTER(kStaleReads, "pressured_stale_reads_total", "Reads that failed and fell back to the last good value.",       \
          label("target"))                                                                                             \
  COUNTER(kBpfLoadRefusals, "pressured_bpf_load_refusals_total",                                                       \
          "BPF program flavours the kernel refused to load (the program fell back), by "                               \
          "program and flavour.",                                                                                      \
          token_label("program"), token_label("flavour"))                                                              \
  COUNTER(kConfigReloads, "pressured_config_reloads_total", "Configuration reloads (SIGHUP), by result.",               \
          label("result"))                                                                                             \
  COUNTER(kCheckpointWrites, "pressured_checkpoint_writes_total",                                                      \
          "Checkpoint (daemon.stateFile) writes, by result; a failure means a restart "                                \
          "may not resume the evictions in flight.",                                                                   \
          label("result"))                                                                                             \
  GAUGE(kConfigLastReloadSuccessful, "pressured_config_last_reload_successful",                                        \
        "1 when the last configuration reload succeeded (or none happened yet), else 0.")                              \
  GAUGE(kPsiAvailable, "pressured_psi_available",                                                                      \
        "1 when the kernel has PSI (the system's pressure files exist), 0 when not (booted "                           \
        "with psi=0 or built without CONFIG_PSI): PSI signals and triggers are off.")                                  \
  GAUGE(kPodMemoryWorkingSet, "pressured_pod_memory_working_set_bytes",                                                \
        "Memory working set of a pod (usage - inactive_file); top pods by working set only.",                          \
        kNamespaceLabel, kPodLabel, kUidLabel, label("qos_class"))                                                     \
  GAUGE(kPodMemoryRequest, "pressured_pod_memory_request_bytes", "Memory request of a pod; top pods only.",            \
        kNamespaceLabel, kPodLabel, kUidLabel, label("qos_class"))                                                     \
  GAUGE(kPodMemoryUsageOverRequest, "pressured_pod_memory_usage_over_request_ratio",                                   \
        "Working set divided by memory request; top pods with a request only.",                                        \
        kNamespaceLabel, kPodLabel, kUidLabel, label("qos_class"))                                                     \
  COUNTER(kPodReclaimScannedPages, "pressured_pod_reclaim_scanned_pages_total",                                        \
          "Pages scanned by memory reclaim in a pod's cgroup and its containers (BPF); top pods only.",                \
          kNamespaceLabel, kPodLabel, kUidLabel, label("qos_class"))                                                   \
  COUNTER(kPodReclaimStolenPages, "pressured_pod_reclaim_stolen_pages_total",                                          \
          "Pages reclaimed from a pod's cgroup and its containers (BPF); top pods only.",                              \
          kNamespaceLabel, kPodLabel, kUidLabel, label("qos_class"))                                                   \
  COUNTER(kPodWorkingsetRefaults, "pressured_pod_workingset_refaults_total",                                           \
          "Workingset refaults (recently evicted pages needed again: thrashing) of a pod (BPF); top pods only.",       \
          kNamespaceLabel, kPodLabel, kUidLabel, label("qos_class"))                                                   \
  COUNTER(kPodMemstallSeconds, "pressured_pod_memstall_seconds_total",                                                 \
          "Time a pod's tasks were stalled on memory (PSI memstalls, BPF); top pods only.",                            \
          kNamespaceLabel, kPodLabel, kUidLabel, label("qos_class"))                                                   \
  COUNTER(kKubepodsReclaimScannedPages, "pressured_kubepods_reclaim_scanned_pages_total",                              \
          "Pages scanned by memory reclaim in kubepods or a QoS tier (BPF), by cgroup.", kCgroupLabel)                 \
  COUNTER(kKubepodsReclaimStolenPages, "pressured_kubepods_reclaim_stolen_pages_total",                                \
          "Pages reclaimed from kubepods or a QoS tier (BPF), by cgroup.", kCgroupLabel)                               \
  COUNTER(kKubepodsWorkingsetRefaults, "pressured_kubepods_workingset_refaults_total",                                 \
          "Workingset refaults in kubepods or a QoS tier (BPF), by cgroup.", kCgroupLabel)                             \
  COUNTER(kKubepodsMemstallSeconds, "pressured_kubepods_memstall_seconds_total",                                       \
          "Time tasks in kubepods or a QoS tier were stalled on memory (BPF), by cgroup.", kCgroupLabel)
// clang-format on

PRESSURED_DECLARE_FAMILIES(PRESSURED_METRICS_FAMILIES);

}  // namespace pressured::stats
