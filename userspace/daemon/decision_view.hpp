#pragma once
// The fresh view a decision needs, without a full observation: re-reads the
// signals the thresholds watch and, when a memory threshold may be met, just
// enough pods to know the memory ranking's head (docs/observation.md,
// "Freshness of a decision"). The daemon uses it for event-driven decisions
// between full observations; anything it cannot vouch for sends the caller to
// a full observation.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "daemon/daemon_stats.hpp"
#include "pressured/config.hpp"
#include "pressured/observer.hpp"
#include "pressured/policy.hpp"
#include "pressured/result.hpp"
#include "pressured/snapshot.hpp"

namespace pressured {

/// What one incremental refresh read (tests, debug logs, the benchmark).
struct DecisionRefresh {
  std::size_t signals_read = 0;    // refresh_signal calls
  bool ranking_needed = false;     // a memory-lane threshold may be met
  std::size_t pods_bounded = 0;    // pods whose page-counter usage was read
  std::size_t pods_refreshed = 0;  // pods read in full (usage + memory.stat ...) to settle the head
  std::size_t victims_refreshed = 0;  // victims the policy watches, read in full
  std::size_t victims_gone = 0;       // of them, cgroups gone: left out of the snapshot
};

/// What the policy has in flight, for a decision while an eviction is.
struct InFlightView {
  /// Pods the policy's next step looks at (victims in flight, whatever
  /// their phase, and victims whose restart check is due): read in full.
  std::vector<std::string> victims;
  /// Lanes whose eviction stays in flight through the step
  /// (EvictionPolicy::holds_lane): their candidates are all deferred, so
  /// their rankings are not needed, only their signals.
  std::array<bool, kLaneCount> held{};
};

/// Most pods read in full to settle the memory ranking's head before giving
/// up (the head is "uncertain": the caller observes fully).
inline constexpr std::size_t kMaxHeadRefreshes = 32;

/// Brings `snapshot` (the last full observation, possibly refreshed since)
/// up to date for a decision at `now`:
///  - every signal a threshold of `config` watches is read fresh;
///  - when a threshold whose starved resource is memory may be met (its
///    min-reclaim band included), the head by the values in hand is read in
///    full (the seed); every pod that could rank before it at some usage
///    (same QoS class and priority band, ...) gets its page-counter usage read
///    (an upper bound of its working set); then pods are read in full, best
///    bound first, until the best fully read pod ranks before every other
///    pod's bound: that pod is the ranking's head on fresh reads. Pods not
///    read in full keep min(last working set, fresh bound).
///  - while evictions are in flight (`in_flight`): each victim the policy
///    looks at is read in full, and one whose cgroup is gone is removed
///    from the snapshot, as a full observation would not list it; a lane
///    the policy holds needs no ranking, so its thresholds send nowhere.
///  - with a predictive lead (daemon.predictiveLead above 0), a hard memory
///    threshold may be met by the signal's trend before its value crosses
///    (the engine's prediction, which this view does not know): it is ranked
///    on fresh reads as one met, so that a predicted eviction never ranks the
///    pods on the last full observation's usage (a pod that grew since would
///    rank as it was).
/// Errors mean "observe fully instead": a signal or pod read failed, the pod
/// set changed, a threshold of another lane (disk, pids) not held may be
/// met, or the head stayed uncertain after kMaxHeadRefreshes pods. The
/// snapshot may then be partly updated; the caller replaces it.
Result<DecisionRefresh> refresh_for_decision(NodeObserver& observer, NodeSnapshot& snapshot,
                                             const EvictionConfig& config, const std::vector<std::string>& excluded,
                                             TimePoint now, const InFlightView& in_flight = {},
                                             Duration predictive_lead = Duration::zero());

/// What of the policy a partial refresh (and the plugins) must know at
/// `now`: the victims it looks at (in flight, or due for a restart check)
/// and the lanes it holds.
InFlightView in_flight_view(const EvictionPolicy& policy, TimePoint now);

/// The memory candidates' per-container usage (Eviction::containers): only
/// a memory candidate the policy may start now (its lane not held), each of
/// its containers' cgroups read once, for the kubelet's sentences.
void attribute_containers(Decisions& d, const NodeSnapshot& snapshot, const EvictionPolicy& policy,
                          NodeObserver& observer, TimePoint now);

/// Brings `last` up to date for a decision at `now`: a partial refresh
/// (refresh_for_decision) when `partial_ok` and the last full observation
/// (`last_full`) is younger than events.fullObservationInterval, else a full
/// observation (which sets `last_full`). Counts into `stats`. Returns whether
/// the observation was full; an error when nothing could be observed.
Result<bool> observe_for_decision(NodeObserver& observer, NodeSnapshot& last, std::optional<TimePoint>& last_full,
                                  const Config& config, const EvictionPolicy& policy, TimePoint now, bool partial_ok,
                                  DaemonStats& stats);

}  // namespace pressured
