#pragma once
// What relief counts (pressured_reclaim_*), declared once (pressured/stats.hpp).
// Kept by the daemon's ReliefDriver; listed in docs/operations.md.

#include <string_view>

#include "pressured/stats.hpp"

namespace pressured {

inline constexpr std::string_view kReliefRunsHelp =
    "Relief runs by outcome: avoided (the threshold was no longer met on the re-read), still_short (evicted as "
    "usual), failed (every memory.reclaim write failed), dry_run (logged, nothing written).";
inline constexpr std::string_view kReliefSkipHelp =
    "Memory threshold crossings that evicted without reclaim, by reason: not_covered (the candidates' active page "
    "cache cannot cover the shortfall: anonymous pressure), no_candidate, hard_budget_zero, window_closed.";

#define PRESSURED_RELIEF_STATS(COUNTER, GAUGE)                                                                    \
  GAUGE(available, "pressured_reclaim_available", "",                                                             \
        "1 when relief can run (cgroup v2 with memory.reclaim and relief.enabled), 0 when the stage is off.")     \
  COUNTER(avoided, "pressured_reclaim_runs_total", "outcome=avoided", ::pressured::kReliefRunsHelp) \
  COUNTER(still_short, "pressured_reclaim_runs_total", "outcome=still_short", ::pressured::kReliefRunsHelp)                                 \
  COUNTER(failed, "pressured_reclaim_runs_total", "outcome=failed", ::pressured::kReliefRunsHelp)                                           \
  COUNTER(dry_run, "pressured_reclaim_runs_total", "outcome=dry_run", ::pressured::kReliefRunsHelp)                                         \
  COUNTER(asked_bytes, "pressured_reclaim_asked_bytes_total", "",                                                 \
          "Bytes asked of memory.reclaim by relief runs (written; a dry run's would-be amounts are not counted).") \
  COUNTER(reclaimed_bytes, "pressured_reclaim_reclaimed_bytes_total", "",                                         \
          "Bytes the kernel gave back to relief runs.")                                                           \
  COUNTER(write_errors, "pressured_reclaim_write_errors_total", "",                                               \
          "Pod cgroups whose memory.reclaim write failed (cgroup gone, refused).")                                \
  COUNTER(timed_out, "pressured_reclaim_timeouts_total", "", "Relief runs stopped at their time budget.")          \
  COUNTER(skip_not_covered, "pressured_reclaim_skipped_total", "reason=not_covered", ::pressured::kReliefSkipHelp) \
  COUNTER(skip_no_candidate, "pressured_reclaim_skipped_total", "reason=no_candidate", ::pressured::kReliefSkipHelp)                        \
  COUNTER(skip_budget_zero, "pressured_reclaim_skipped_total", "reason=hard_budget_zero", ::pressured::kReliefSkipHelp)                     \
  COUNTER(skip_window_closed, "pressured_reclaim_skipped_total", "reason=window_closed", ::pressured::kReliefSkipHelp)                      \
  COUNTER(held, "pressured_reclaim_held_evictions_total", "",                                                     \
          "Evaluations in which memory evictions waited for a relief run (within its budget or grace).")         \
  GAUGE(backoff_cgroups, "pressured_reclaim_backoff_cgroups", "",                                                 \
        "Pod cgroups not asked again for now because they gave back little (relief.backoff).")
PRESSURED_DECLARE_STATS(ReliefStats, PRESSURED_RELIEF_STATS);

}  // namespace pressured
