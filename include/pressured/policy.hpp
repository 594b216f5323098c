#pragma once
// The eviction policy: what happens between "the engine would evict this pod"
// and "the pod is gone, its memory is back and the API knows". A pure state
// machine (no I/O, no clock, no logging; time is an argument), driven by the
// daemon and by `pressured simulate` alike. It returns actions; the caller
// executes them (evictor, API reporter, metrics, logs) without ever calling
// back: what came of them (a victim empty or running again, the API's answer,
// the disk reclaim's end) is an input of the next step(). Its state is the
// daemon's checkpoint, whole, so a restart resumes every eviction where it
// was. See docs/daemon.md, "The eviction policy", docs/architecture.md for
// the state diagram, and docs/engine.md for the kubelet comparison.
//
// One lane per resource (memory, disk, pids): idle, relieving (memory: a
// relief run first), reclaiming disk (the disk reclaim command first) or
// evicting, one victim in flight each. One record per eviction (its Eviction
// once, its phases side by side); the local phase goes
//   Terminating --(no process left)--> Releasing --(usage back / timeout)--> Done
// and every phase has a deadline:
//   - Terminating, not killed yet: the grace period (kill at its end);
//   - Terminating, killed: kill_timeout, then Stuck: counted, no longer
//     blocking, still excluded from ranking while it exists;
//   - Releasing: release_wait_timeout.
// A hard threshold met in the lane of a soft victim not yet killed kills it
// at once (escalation); another lane is never blocked by it. The API phase
// (reported victims): None, Pending (not handed to the reporter by this
// process) -> Sent -> Confirmed. It outlives the local part: a victim killed
// here stays on the node, its containers restarted by the kubelet, until the
// API eviction reaches the kubelet; while the pod is observed (restart watch:
// at most restart_watch after the kill) a victim running again is killed
// again as the same eviction.
//
// An API eviction recorded in the pod's status (phase Failed, reason Evicted:
// the kubelet's own record) leaves the pod object to the kubelet, which owns
// its status and may write its own back: the phase Running again, the
// container restarted. While the record is tracked, either sign that the
// kubelet undid it (the pod's phase, once seen Failed, no longer Failed; or
// the victim's processes back) ends the pod through the Eviction API, once
// (docs/kubernetes.md, "What the kubelet does with the record").

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/engine.hpp"
#include "pressured/relief.hpp"

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
  /// A victim killed here and evicted through the API is killed again if it
  /// runs again within this long after its kill (checked every restart_check_interval).
  Duration restart_watch = std::chrono::minutes(5);
  Duration restart_check_interval = std::chrono::seconds(1);
  /// Under a hard memory threshold, start the next eviction while every
  /// victim in flight in the memory lane is killed and still giving its memory
  /// back, when the projected `available` stays under the threshold: the
  /// decision's `available`, plus the victims' usage still held, minus what
  /// the node lost since the earliest of their decisions (net of what they
  /// gave back) per second, over `release_horizon`. The Start's `reason` says
  /// so. Off: one eviction at a time per lane.
  bool evict_ahead_of_release = false;
  Duration release_horizon = std::chrono::milliseconds(100);
  /// The kernel can reclaim a pod's page cache (memory.reclaim): relief runs
  /// as configured (the relief section; off for a policy of its own).
  bool relief = false;
  /// Prefix of eviction ids (the daemon passes its start time: ids stay
  /// unique across restarts even without a checkpoint).
  std::string id_prefix = "e";
};

/// The policy's settings from the daemon's configuration. `api`: a
/// Kubernetes reporter is in use.
PolicyConfig policy_config(const DaemonConfig& daemon, bool api);
/// `base` with the fields the daemon's configuration sets (timeouts, the
/// soft kill margin, dry run, the disk reclaim command) taken from `daemon`.
PolicyConfig with_daemon_config(PolicyConfig base, const DaemonConfig& daemon);

/// Where a lane stands. Idle; Relieving (memory: a relief run is writing
/// memory.reclaim, its candidates wait); ReclaimingDisk (disk: the disk
/// reclaim command runs, disk evictions wait for it); Evicting (a victim of
/// the lane is in flight: terminating or releasing). ReclaimingDisk outlasts
/// an eviction of a pod over its own storage limit started meanwhile.
enum class LanePhase : uint8_t { Idle, Relieving, ReclaimingDisk, Evicting };
std::string_view name(LanePhase phase);

/// Why a recorded eviction was ended through the API after all.
enum class RecordUndone : uint8_t {
  None,
  PhaseReverted,  // the pod's phase, seen Failed after the record, is no longer Failed
  ProcessesBack,  // the victim's processes run again after its kill (the kubelet restarted a container)
};
std::string_view name(RecordUndone cause);

/// One eviction, from the decision until nothing of it is left to watch: the
/// Eviction once, and its phases side by side (see the top of this file).
struct EvictionRecord {
  /// The local part: Terminating -> Releasing -> Done, or Stuck (killed and
  /// still not empty after kill_timeout). Done and Stuck leave the victim out
  /// of ranking while its pod is observed (`excluded`).
  enum class Local : uint8_t { Terminating, Releasing, Done, Stuck };
  /// The API eviction (and Event): None (not reported, or no longer tracked),
  /// Pending (to hand to the reporter), Sent, Confirmed.
  enum class Api : uint8_t { None, Pending, Sent, Confirmed };
  /// The pod's status record (phase Failed, reason Evicted), the kubelet's
  /// to keep or undo: None, Written (the API took it), Seen (the pod source
  /// showed the phase Failed since), Undone (`undone` says how; the pod is
  /// ended through the Eviction API).
  enum class Status : uint8_t { None, Written, Seen, Undone };

  /// As decided: its id names the Event (a resend is not a second Event),
  /// its grace period is what the API eviction carries.
  Eviction eviction;
  Local local = Local::Terminating;
  TimePoint kill_at{};         // Terminating: the next local SIGKILL is due (grace end, or a straggler re-kill)
  TimePoint phase_deadline{};  // Terminating: = kill_at before the kill, stuck after; Releasing: release timeout
  bool killed = false;         // a SIGKILL was ordered (grace 0, grace end or escalation)
  bool delegated = false;      // soft, the API terminates it: local kill only at grace + margin
  bool escalated = false;      // a hard threshold cut the soft grace short (the local kill has grace 0)
  bool excluded = false;       // Done or Stuck and its pod still observed (not in a dry run)
  Api api = Api::None;
  Status status = Status::None;
  RecordUndone undone = RecordUndone::None;  // Status::Undone: what showed it
  /// The restart watch: killed here (first kill), while the API eviction is
  /// tracked; the next look for processes back.
  std::optional<TimePoint> killed_at;
  TimePoint next_check{};

  bool in_flight() const { return local == Local::Terminating || local == Local::Releasing; }
  /// The Eviction the local phases act on: an escalated one with grace 0.
  Eviction local_eviction() const;
  bool operator==(const EvictionRecord&) const = default;
};
std::string_view name(EvictionRecord::Local phase);
std::string_view name(EvictionRecord::Api phase);
std::string_view name(EvictionRecord::Status phase);

/// What the reporter answered for an API eviction (an input of step()).
struct ApiAnswer {
  enum class Result : uint8_t {
    Landed,     // the API accepted the Eviction (or its DELETE fallback)
    NotNeeded,  // the pod was gone, recreated under the name, already terminating, or static
    GaveUp,     // the retry budget spent, or an answer that cannot be acted on
    Dropped,    // never sent (the reporter's queue was full): send again
  };
  std::string id;  // Eviction::id
  Result result = Result::Landed;
  bool recorded = false;  // Landed as the pod's status record (not an Eviction or DELETE)
};

/// What the caller found out since the last step().
struct PolicyInputs {
  /// Victims (in flight, or watched for a restart: probes()) with no process left.
  std::vector<std::string> exited;
  /// Victims watched for a restart (probes()) that have processes again.
  std::vector<std::string> running;
  /// Candidates the evictor refuses (outside the pods root), filtered out of
  /// the decisions before step(): left out of ranking from now on.
  std::vector<std::string> refused;
  std::vector<ApiAnswer> api_answers;
  /// The disk reclaim command finished (or failed): disk evictions may proceed.
  bool disk_reclaim_finished = false;
};

/// The policy's memory; checkpointed by the daemon (a relief run is not:
/// it does not survive the process, nor does a disk reclaim command).
struct PolicyState {
  std::array<LanePhase, kLaneCount> lanes{};
  /// One per eviction: in flight (at most one per lane, unless evicting ahead
  /// of a release), done with but still observed, or with an API eviction or
  /// a restart watch still open.
  std::vector<EvictionRecord> records;
  /// Candidates the evictor refused, left out of ranking while observed
  /// (a checkpoint from before records also lists done victims here).
  std::vector<std::string> refused;
  std::optional<TimePoint> disk_reclaim_done_at;
  uint64_t sequence = 0;  // eviction ids
  LanePhase lane(Lane l) const { return lanes[static_cast<std::size_t>(l)]; }
  bool operator==(const PolicyState&) const = default;
};

/// What the caller must do (or log, or count).
struct PolicyAction {
  enum class Kind : uint8_t {
    Start,           // new eviction: grace 0 -> kill; delegated to the API -> nothing local; else SIGTERM
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
    Terminate,       // a restored eviction whose SIGTERM may not have gone out: send it (again)
    ReportApi,       // hand the API eviction (and its Event) to the reporter
    ApiConfirmed,    // the API answered for good (ApiAnswer::Result in api_result)
    ApiUnsent,       // a restored API eviction not sent: the API or reporting is off now (dry run, no reporter)
    RestartKill,     // a victim done with runs again (the kubelet restarted it): kill it, back in flight
    EndApi,          // the kubelet undid the status record (cause in `undone`): end the pod through the Eviction API
  };
  Kind kind = Kind::Start;
  Eviction eviction;     // the victim (Deferred: the candidate; DiskReclaim: the candidate it stands for)
  Signal trigger = Signal::MemoryAvailable;  // Escalate: the hard threshold's signal
  bool report = false;   // Start: a ReportApi follows (pod with metadata, not a dry run)
  bool delegate = false;  // Start: the API terminates the pod; no local SIGTERM
  bool killed_before = false;  // Exited: whether our SIGKILL was sent (false: it exited on its own)
  std::string reason;    // Deferred: why; Start ahead of a release: the projection
  ApiAnswer::Result api_result = ApiAnswer::Result::Landed;  // ApiConfirmed
  Duration since_kill{};  // RestartKill: how long after its kill it ran again
  RecordUndone undone = RecordUndone::None;  // EndApi: what showed the record undone
};

std::string_view name(PolicyAction::Kind kind);

class EvictionPolicy {
 public:
  /// A policy with settings of its own (simulate, tests).
  explicit EvictionPolicy(PolicyConfig config);
  /// The daemon's: `base` holds what is not configuration (the API in use,
  /// the id prefix, the watch intervals); the rest is read from the daemon
  /// section of the configuration in force. A reload (LiveConfig::replace)
  /// applies from the next step(), to the evictions in flight too: the grace
  /// ends still to come are re-derived from it, as after a restart.
  EvictionPolicy(std::shared_ptr<const LiveConfig> config, PolicyConfig base);

  /// Uids the engine must leave out of its ranking: victims in flight and
  /// those still observed after their eviction.
  std::vector<std::string> excluded() const;

  /// The victims whose emptiness the next step() needs (in `exited` or
  /// `running` of its inputs): those terminating, and those watched for a
  /// restart whose check is due at `now`.
  std::vector<Eviction> probes(TimePoint now) const;

  /// One evaluation: takes in what the caller found out (`inputs`), advances
  /// every eviction in flight from `snapshot` (pods' usage, which pods
  /// exist), escalates on hard thresholds in `decisions`, decides on the
  /// engine's candidates (minus `inputs.refused`), and hands pending API
  /// evictions over. `now` must not go backwards.
  std::vector<PolicyAction> step(TimePoint now, const NodeSnapshot& snapshot, const Decisions& decisions,
                                 const PolicyInputs& inputs);
  /// step() with only `exited` known (simulate, tests).
  std::vector<PolicyAction> step(TimePoint now, const NodeSnapshot& snapshot, const Decisions& decisions,
                                 const std::vector<std::string>& exited);

  /// Relief, the memory lane's first phase, run after the engine and before
  /// the executor filters and step() decides: takes in a finished run
  /// (`outcome`, the worker's), decides whether to start one and takes the
  /// memory candidates that wait for it out of `decisions` (ReliefStage::step;
  /// `eviction`: the ranking's settings). The caller starts the run and logs.
  ReliefStep relieve(TimePoint now, const NodeSnapshot& snapshot, Decisions& decisions,
                     const EvictionConfig& eviction, const std::optional<ReliefOutcome>& outcome);
  /// The relief stage (its run, its back-off; checkpointed apart: ReliefState).
  const ReliefStage& relief() const { return relief_; }
  /// Takes back a checkpoint's relief back-off; returns how many cgroups back off.
  std::size_t restore_relief(const ReliefState& state) { return relief_.restore(state); }

  /// The settings in force (as of the last step() for a daemon's policy).
  const PolicyConfig& config() const { return config_; }

  /// The policy's memory (checkpointed). After restore() the next step()
  /// first re-derives each record's deadlines from the configuration now in
  /// force, drops records whose deadlines all passed long ago (a daemon down
  /// for a day must not resume a day-old kill), and sends once more every API
  /// eviction the previous process had not seen confirmed.
  const PolicyState& state() const { return state_; }
  void restore(PolicyState state);

  /// True while anything is in flight or the disk reclaim command runs (the
  /// daemon then wants progress ticks).
  bool busy() const;
  /// The first in-flight eviction of `lane`, if any.
  const EvictionRecord* in_flight(Lane lane) const;
  /// Where `lane` stands (as of the last relieve() or step()).
  LanePhase lane(Lane l) const { return state_.lane(l); }
  /// The earliest deadline of any phase, restart check or relief hold (for
  /// the loop's timer); nullopt: none.
  std::optional<TimePoint> next_deadline() const;
  /// True when `lane`'s eviction stays in flight through a step() at `now`
  /// whatever that step observes: it is terminating and not due to be
  /// declared stuck (an exit only moves it to Releasing), and no restored
  /// state waits to be resumed. Every candidate of such a lane is deferred,
  /// so a decision needs none of its ranking (docs/observation.md,
  /// "Decisions while an eviction is in flight").
  bool holds_lane(Lane lane, TimePoint now) const;

 private:
  /// Takes a replaced configuration (LiveConfig::generation moved).
  void follow();
  /// The local kill of every eviction in flight not killed yet, from its
  /// decision, its grace period and the margin now configured.
  void rederive_grace_ends();
  void resume(TimePoint now, const NodeSnapshot& snapshot, std::vector<PolicyAction>& out);
  void take_answers(const std::vector<ApiAnswer>& answers, std::vector<PolicyAction>& out);
  void progress(TimePoint now, const NodeSnapshot& snapshot, const std::vector<std::string>& exited,
                std::vector<PolicyAction>& out);
  void watch_restarts(TimePoint now, const NodeSnapshot& snapshot, const std::vector<std::string>& running,
                      std::vector<PolicyAction>& out);
  void check_records(const NodeSnapshot& snapshot);
  void dispatch(std::vector<PolicyAction>& out);
  /// The record of `uid` whose API eviction is tracked, if any.
  EvictionRecord* api_record(const std::string& uid);
  bool watched(const EvictionRecord& r, TimePoint at) const;
  bool in_flight_uid(const std::string& uid) const;
  /// Done with and still observed, or refused: left out of ranking.
  bool evicted(const std::string& uid) const;
  void escalate(TimePoint now, const Decisions& decisions, std::vector<PolicyAction>& out);
  void decide(TimePoint now, const NodeSnapshot& snapshot, const Decisions& decisions,
              const std::vector<std::string>& refused, std::vector<PolicyAction>& out);
  /// evict_ahead_of_release: whether candidate `c` starts although its lane
  /// is busy; `why` gets the projection either way.
  bool ahead_of_release(const Eviction& c, const NodeSnapshot& snapshot, TimePoint now, std::string& why) const;
  /// Ends the local part of `r` (Done, or Stuck).
  void finish(EvictionRecord& r, EvictionRecord::Local end, const NodeSnapshot& snapshot);
  void kill(EvictionRecord& r, TimePoint now);
  /// Drops the records nothing is left of; sets each lane's phase.
  void settle();

  PolicyConfig config_;
  std::shared_ptr<const LiveConfig> live_;  // null: config_ is the policy's own
  uint64_t generation_ = 0;                 // of live_ when config_ was derived
  uint64_t relief_generation_ = 0;          // of live_ when relief_ was configured
  PolicyState state_;
  ReliefStage relief_;
  bool restored_ = false;  // the next step() resumes a restored state
};

}  // namespace pressured
