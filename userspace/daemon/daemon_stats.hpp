#pragma once
// What the daemon's cycle counts itself (pressured/stats.hpp): each fact
// once, each exported under the series named here. Facts that a Metrics
// method already counts are not repeated here; tests read them from the
// exported series:
//   evaluations          sum of pressured_evaluations_total (below)
//   evictions started    pressured_evictions_total
//   evictions completed  pressured_eviction_policy_actions_total{action="exited"}
//                        (= pressured_local_kills_total{result="success"})
//   eviction failures    pressured_local_kills_total{result="failure"} + {action="stuck"}
//   release timeouts, deferred decisions, escalations, stuck and expired
//                        evictions, disk reclaims: pressured_eviction_policy_actions_total{action}
//   reloads              pressured_config_reloads_total{result}
//   kernel OOM kills     pressured_kernel_oom_kills_total (those found by the
//                        counters only: pressured_kernel_oom_kills_unreported_total)

#include <string_view>

#include "pressured/stats.hpp"

namespace pressured {

inline constexpr std::string_view kEvaluationsHelp =
    "Evaluations of the daemon's cycle, by how the node was observed: full (every pod read), partial (only "
    "what the decision needs re-read, between full observations), failed (nothing observed, no decision).";
inline constexpr std::string_view kCheckpointLoadsHelp =
    "Checkpoint loads at start that found a file: restored (evictions in flight resumed), or corrupt (ignored).";

#define PRESSURED_DAEMON_STATS(COUNTER, GAUGE)                                                               \
  COUNTER(full_observations, "pressured_evaluations_total", "observation=full", ::pressured::kEvaluationsHelp) \
  COUNTER(incremental_evaluations, "pressured_evaluations_total", "observation=partial",                     \
          ::pressured::kEvaluationsHelp)                                                                     \
  COUNTER(observe_failures, "pressured_evaluations_total", "observation=failed", ::pressured::kEvaluationsHelp) \
  COUNTER(refused_targets, "pressured_eviction_refused_targets_total", "",                                    \
          "Victims the evictor refused to touch (a cgroup outside the pods root); each is also a failed "    \
          "local kill.")                                                                                     \
  COUNTER(sigkills, "pressured_eviction_sigkills_total", "",                                                  \
          "Rounds of SIGKILL sent to a victim's processes: hard evictions, grace period ends, escalations, "  \
          "stragglers.")                                                                                     \
  COUNTER(victim_memory_released, "pressured_eviction_memory_released_total", "",                             \
          "Killed victim processes whose memory pressured reaped with process_mrelease(2) right after the "  \
          "SIGKILL (daemon.releaseVictimMemory), without waiting for their exit.")                            \
  COUNTER(victim_exited_early, "pressured_eviction_exited_before_kill_total", "",                             \
          "Victims whose processes were all gone within their grace period, before pressured's SIGKILL.")    \
  COUNTER(cgroup_vanished, "pressured_eviction_cgroup_vanished_total", "",                                    \
          "Times a victim's cgroup was already removed when pressured killed it or saw it exit.")            \
  COUNTER(checkpoint_restored, "pressured_checkpoint_loads_total", "result=restored",                         \
          ::pressured::kCheckpointLoadsHelp)                                                                 \
  COUNTER(checkpoint_corrupt, "pressured_checkpoint_loads_total", "result=corrupt",                           \
          ::pressured::kCheckpointLoadsHelp)                                                                 \
  COUNTER(checkpoint_dropped_thresholds, "pressured_checkpoint_dropped_thresholds_total", "",                 \
          "Restored state (grace-period timing, hysteresis) of thresholds no longer configured, dropped.")   \
  COUNTER(restarted_victim_kills, "pressured_eviction_restarted_victim_kills_total", "",                      \
          "Containers of a pod pressured killed and evicted through the API that the kubelet started again "  \
          "before the API eviction reached it, killed again (the same eviction). Rising: the API server is "  \
          "slow to take evictions.")                                                                         \
  COUNTER(safety_net_detections, "pressured_safety_net_detections_total", "",                                 \
          "Safety-net polls that found a threshold crossing no event had reported (detected one poll "      \
          "interval late).")                                                                                 \
  COUNTER(unreported_oom_kills, "pressured_kernel_oom_kills_unreported_total", "",                            \
          "Kernel OOM kills no event reported (lost in a ring-buffer overflow while the daemon was stalled, " \
          "or no BPF), found in the kernel's own counters by a full observation; each is also in "           \
          "pressured_kernel_oom_kills_total.")
PRESSURED_DECLARE_STATS(DaemonStats, PRESSURED_DAEMON_STATS);

}  // namespace pressured
