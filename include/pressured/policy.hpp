#pragma once
// The eviction policy: what happens between "the engine would evict this pod"
// and "the pod is gone and its memory is back". A pure state machine (no I/O,
// no clock, no logging; time is an argument), driven by the daemon and by
// `pressured simulate` alike. It returns actions; the caller executes them
// (evictor, API reporter, metrics, logs, checkpoint). See docs/daemon.md,
// "The eviction policy", and docs/engine.md for the kubelet comparison.
//
// One eviction in flight per lane (memory, disk, pids). An eviction goes
//   Terminating --(no process left)--> Releasing --(usage back / timeout)--> done
// and every phase has a deadline:
//   - Terminating, not killed yet: the grace period (kill at its end);
//   - Terminating, killed: kill_timeout, then the victim is "stuck": counted,
//     no longer blocking, still excluded from ranking while it exists;
//   - Releasing: release_wait_timeout.
// While a soft eviction is in flight and not yet killed, a hard threshold met
// in the same lane kills the soft victim at once (escalation); a hard
// threshold of another lane is never blocked by it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/engine.hpp"

namespace pressured {

/// Resources the policy evicts for independently: one eviction in flight each.
enum class Lane : uint8_t { Memory, Disk, Pids };
inline constexpr std::size_t kLaneCount = 3;

/// The lane of a signal; nullopt for condition-only signals (PSI).
std::optional<Lane> lane_of(Signal signal);
std::string_view name(Lane lane);

struct PolicyConfig {
  /// Releasing phase: how long to wait for a victim's usage to come back.
  Duration release_wait_timeout = std::chrono::seconds(10);
  /// Terminating phase after a kill: how long a victim may keep processes
  /// before it is declared stuck and stops blocking decisions.
  Duration kill_timeout = std::chrono::seconds(30);
  /// Soft evictions delegated to the API: the local kill comes at grace + margin.
  Duration soft_kill_margin = std::chrono::seconds(15);
  /// After a kill, how often stragglers (processes forked meanwhile) are killed again.
  Duration rekill_interval = std::chrono::seconds(1);
  /// A disk reclaim run counts for this long while DiskPressure lasts.
  Duration disk_reclaim_validity = std::chrono::minutes(5);
  bool dry_run = false;
  /// A disk reclaim command is configured: disk evictions wait for one run.
  bool disk_reclaim = false;
  /// A Kubernetes reporter exists: soft evictions of pods with metadata are
  /// delegated to the API (the kubelet terminates them with their grace).
  bool api = false;
  /// Prefix of eviction ids (the daemon passes its start time: ids stay
  /// unique across restarts even without a checkpoint).
  std::string id_prefix = "e";
};

/// The policy's settings from the daemon's configuration. `api`: a
/// Kubernetes reporter is in use.
PolicyConfig policy_config(const DaemonConfig& daemon, bool api);

/// One eviction the policy is driving.
struct InFlightEviction {
  enum class Phase : uint8_t { Terminating, Releasing };
  Eviction eviction;
  Phase phase = Phase::Terminating;
  TimePoint kill_at{};         // Terminating: the next local SIGKILL is due (grace end, or a straggler re-kill)
  TimePoint phase_deadline{};  // Terminating: = kill_at before the kill, stuck after; Releasing: release timeout
  bool killed = false;         // a SIGKILL was ordered (grace 0, grace end or escalation)
  bool api = false;            // soft, delegated to the API: local kill only at grace + margin
  bool escalated = false;      // a hard threshold cut the soft grace short
  bool operator==(const InFlightEviction&) const = default;
};

/// The policy's memory; checkpointed by the daemon.
struct PolicyState {
  std::vector<InFlightEviction> in_flight;  // at most one per lane
  /// Victims done with (released, timed out, stuck, refused) whose pod is
  /// still observed: left out of ranking until it disappears. Not in a dry
  /// run, where the pod is offered again.
  std::vector<std::string> evicted;
  bool disk_reclaim_running = false;
  std::optional<TimePoint> disk_reclaim_done_at;
  uint64_t sequence = 0;  // eviction ids
  bool operator==(const PolicyState&) const = default;
};

/// What the caller must do (or log, or count).
struct PolicyAction {
  enum class Kind : uint8_t {
    Start,           // new eviction: grace 0 -> kill; api -> report only; else SIGTERM (+ report)
    Escalate,        // kill the soft victim now: a hard threshold of its lane is met
    GraceEndKill,    // the victim's grace period is over: kill what is left
    StragglerKill,   // killed, still not empty: kill again
    Exited,          // the victim has no process left (Releasing begins)
    Released,        // its usage is back: the next decision may come
    ReleaseTimeout,  // usage not back in time: decide again anyway
    Stuck,           // killed and still not empty after kill_timeout: stop waiting
    Expired,         // a restored record whose deadlines had all passed: dropped
    Deferred,        // a candidate not acted on (eviction in flight, disk reclaim running)
    DiskReclaim,     // run the disk reclaim command before evicting for disk
  };
  Kind kind = Kind::Start;
  Eviction eviction;     // the victim (Deferred: the candidate; DiskReclaim: the candidate it stands for)
  Signal trigger = Signal::MemoryAvailable;  // Escalate: the hard threshold's signal
  bool report = false;   // Start: tell the API (pod with metadata, not a dry run)
  bool delegate = false;  // Start: the API terminates the pod; no local SIGTERM
  bool killed_before = false;  // Exited: whether our SIGKILL was sent (false: it exited on its own)
  std::string reason;    // Deferred: why
};

std::string_view name(PolicyAction::Kind kind);

class EvictionPolicy {
 public:
  explicit EvictionPolicy(PolicyConfig config);

  /// Uids the engine must leave out of its ranking: victims in flight and
  /// those still observed after their eviction.
  std::vector<std::string> excluded() const;

  /// One evaluation: advances every eviction in flight from `snapshot`
  /// (pods' usage, which pods exist) and `exited` (victims known to have no
  /// process left), escalates on hard thresholds in `decisions`, and decides
  /// on the engine's candidates. `now` must not go backwards.
  std::vector<PolicyAction> step(TimePoint now, const NodeSnapshot& snapshot, const Decisions& decisions,
                                 const std::vector<std::string>& exited);

  /// The evictor refused a Start's target (outside the pods root): the
  /// eviction ends; the pod stays excluded so it is not picked again.
  void refused(const std::string& uid);

  /// A victim done with (in `evicted`) has processes again: the kubelet
  /// restarted a container it killed before the API eviction reached it.
  /// Its eviction is in flight again, killed at `now` (the caller sends the
  /// kill), so its lane waits for the memory to come back before choosing
  /// anyone else. False, and nothing changes, when the pod is not in
  /// `evicted` or its lane has an eviction in flight.
  bool reopen(TimePoint now, const Eviction& eviction);

  /// The disk reclaim command finished (or failed): disk evictions may proceed.
  void disk_reclaim_finished(TimePoint now);

  void reconfigure(PolicyConfig config) { config_ = std::move(config); }
  const PolicyConfig& config() const { return config_; }

  /// The policy's memory (checkpointed). After restore() the next step()
  /// first drops records whose deadlines all passed long ago (a daemon down
  /// for a day must not resume a day-old kill).
  const PolicyState& state() const { return state_; }
  void restore(PolicyState state);

  /// True while anything is in flight (the daemon then wants progress ticks).
  bool busy() const { return !state_.in_flight.empty() || state_.disk_reclaim_running; }
  /// The in-flight eviction of `lane`, if any.
  const InFlightEviction* in_flight(Lane lane) const;
  /// The earliest deadline of any phase (for a timer); nullopt: none.
  std::optional<TimePoint> next_deadline() const;

 private:
  void progress(TimePoint now, const NodeSnapshot& snapshot, const std::vector<std::string>& exited,
                std::vector<PolicyAction>& out);
  void escalate(TimePoint now, const Decisions& decisions, std::vector<PolicyAction>& out);
  void decide(TimePoint now, const Decisions& decisions, std::vector<PolicyAction>& out);
  void finish(std::size_t index, const NodeSnapshot& snapshot);
  void kill(InFlightEviction& f, TimePoint now);

  PolicyConfig config_;
  PolicyState state_;
  bool check_expiry_ = false;
};

}  // namespace pressured
