#pragma once
// Relief: before a memory eviction, ask the kernel to reclaim the page cache
// the candidate pods' cgroups hold (cgroup v2 memory.reclaim), re-read, and
// evict only if the node is still short. Two halves:
//   - ReliefStage (pure, userspace/engine/relief.cpp): whether to reclaim,
//     how much from which cgroup, which memory candidates wait for it and
//     until when, what a finished run achieved. Time is an argument.
//   - ReclaimWriter (I/O, userspace/relief/): the blocking memory.reclaim
//     writes, run by a worker thread off the event loop; the outcome comes
//     back to the loop as an event and is the input of the next step().
// See docs/engine.md, "Relief before eviction".

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/config.hpp"
#include "pressured/engine.hpp"
#include "pressured/result.hpp"
#include "pressured/snapshot.hpp"

namespace pressured {

/// One cgroup to reclaim from, and how much.
struct ReliefTarget {
  std::string uid;
  std::string cgroup_path;  // absolute pod cgroup path (v2)
  uint64_t bytes = 0;       // what to ask memory.reclaim for
  uint64_t file_bytes = 0;  // its active_file + inactive_file when decided
  bool operator==(const ReliefTarget&) const = default;
};

/// One reclaim run the stage decided: handed to the worker.
struct ReliefRequest {
  uint64_t id = 0;
  Signal signal = Signal::MemoryAvailable;  // the threshold that asked for it
  ThresholdKind kind = ThresholdKind::Hard;
  uint64_t shortfall_bytes = 0;  // threshold - observed
  uint64_t asked_bytes = 0;      // shortfall + minimum reclaim, split over targets
  std::vector<ReliefTarget> targets;
  TimePoint decided_at{};
  /// Memory evictions wait for the run until then, no longer: hard: first
  /// met + hardThresholdBudget; soft: first met + its grace period. A
  /// candidate of another threshold waits at most until its own threshold's
  /// window ends, if that is sooner (a hard threshold met during a soft run).
  TimePoint hold_until{};
  /// How long the worker may write for (at most until hold_until, at most relief.timeout).
  Duration budget{};
  bool dry_run = false;  // nothing is written: logged as what would have been reclaimed
};

/// What one cgroup gave back.
struct ReliefTargetResult {
  std::string uid;
  std::string cgroup_path;
  uint64_t asked_bytes = 0;
  uint64_t reclaimed_bytes = 0;
  std::string error;  // empty: the writes went through (in full or in part)
};

/// What the worker reports for a run (an input of the next step()).
struct ReliefOutcome {
  uint64_t id = 0;
  std::vector<ReliefTargetResult> targets;
  Duration took{};
  bool timed_out = false;  // stopped at its budget with bytes still to ask
  uint64_t asked_bytes() const;
  uint64_t reclaimed_bytes() const;
  bool failed() const;  // every target failed
};

/// The per-decision record: logged, counted, on the "why" record of an eviction it did not avoid.
struct ReliefRecord {
  uint64_t id = 0;
  Signal signal = Signal::MemoryAvailable;
  ThresholdKind kind = ThresholdKind::Hard;
  uint64_t shortfall_bytes = 0;
  uint64_t asked_bytes = 0;
  uint64_t reclaimed_bytes = 0;
  Duration took{};
  std::size_t cgroups = 0;
  std::size_t errors = 0;  // cgroups whose write failed
  std::string first_error;
  bool dry_run = false;
  bool failed = false;     // every write failed
  bool timed_out = false;  // stopped at its budget
  /// The threshold that asked for it was no longer met on the re-read.
  bool eviction_avoided = false;
  /// "avoided", "still_short", "failed", "dry_run": pressured_reclaim_runs_total{outcome}.
  std::string_view outcome() const;
};

/// Why the stage did not reclaim although a memory threshold was met
/// (counted once per threshold crossing: pressured_reclaim_skipped_total{reason}).
enum class ReliefSkip : uint8_t {
  NotCovered,   // the candidates' active page cache cannot cover the shortfall: the pressure is not cache
  NoCandidate,  // no candidate pod holds page cache (or all are backing off)
  HardBudgetZero,  // relief.hardThresholdBudget is 0
  WindowClosed,    // the threshold's budget or grace is spent
};
std::string_view name(ReliefSkip skip);

/// What of the stage survives a daemon restart (the checkpoint): the cgroups
/// that gave back little and until when they are not asked again, so a
/// restart (or a crash loop) does not ask them once more per start.
struct ReliefState {
  std::map<std::string, TimePoint> backoff;  // cgroup path -> not asked before
  bool operator==(const ReliefState&) const = default;
};

/// What one step() decided.
struct ReliefStep {
  std::optional<ReliefRequest> start;   // hand to the worker (or log, in a dry run)
  std::vector<Eviction> held;           // memory candidates taken out of the decisions: they wait for reclaim
  std::optional<ReliefRecord> finished;  // a run judged on this step's re-read
  std::optional<ReliefSkip> skipped;     // once per crossing
  std::optional<TimePoint> deadline;     // evaluate again then (the hold ends)
};

/// The relief decisions (pure). One per daemon; lives on the loop thread.
class ReliefStage {
 public:
  ReliefStage(ReliefConfig config, bool dry_run) : config_(config), dry_run_(dry_run) {}

  /// Whether the kernel can do it (v2 with memory.reclaim): probed once at start.
  void set_available(bool available) { available_ = available; }
  bool active() const { return available_ && config_.enabled; }
  void reconfigure(ReliefConfig config, bool dry_run) {
    config_ = config;
    dry_run_ = dry_run;
  }
  const ReliefConfig& config() const { return config_; }

  /// One evaluation, after the engine and before the eviction policy:
  /// takes in a finished run (`outcome`, judged on `decisions`, which come
  /// from observations made after it), then decides whether to start a run
  /// and which memory candidates of `decisions` wait for one (removed from
  /// `decisions.candidates`, returned in `held`). `excluded`: pods the
  /// policy evicts already; `memory_lane_busy`: a memory eviction is in
  /// flight (no run starts then: its release is on the way).
  ReliefStep step(TimePoint now, const NodeSnapshot& snapshot, Decisions& decisions, const EvictionConfig& eviction,
                  const std::vector<std::string>& excluded, bool memory_lane_busy,
                  const std::optional<ReliefOutcome>& outcome);

  /// The run in flight, if any.
  const std::optional<ReliefRequest>& running() const { return running_; }
  /// Cgroups not asked again before the time given (low yield).
  const std::map<std::string, TimePoint>& backoff() const { return backoff_; }
  /// For the checkpoint.
  ReliefState state() const { return ReliefState{backoff_}; }
  /// Takes back a checkpoint's back-off (at start, before the first step());
  /// the next step() drops what is over by then and caps the rest at
  /// relief.backoff from its `now`. Returns how many cgroups it holds.
  std::size_t restore(const ReliefState& state);

 private:
  /// Until when candidate `c` may wait at most: its threshold's window (hard:
  /// first met + hardThresholdBudget; soft: first met + its grace period).
  TimePoint candidate_window_end(const Eviction& c, const std::vector<ThresholdStatus>& thresholds) const;

  ReliefConfig config_;
  bool dry_run_ = false;
  bool available_ = false;
  uint64_t sequence_ = 0;
  std::optional<ReliefRequest> running_;
  std::optional<ReliefOutcome> finished_;      // taken in, judged on the next re-read
  std::optional<ReliefRequest> finished_run_;  // the request it answers
  std::map<std::string, TimePoint> backoff_;
  std::optional<TimePoint> skipped_crossing_;  // first_observed of the crossing a skip was reported for
  std::optional<ReliefSummary> last_;          // the last run judged, for the evictions that follow it
  TimePoint last_decided_at_{};
};

/// Splits `amount` over `cgroups` in proportion to their file pages
/// (ReliefTarget::file_bytes), each at most its own file pages, in whole
/// pages, nothing below one page. Pure; exposed for tests.
std::vector<ReliefTarget> split_reclaim(uint64_t amount, std::vector<ReliefTarget> cgroups);

/// Writes memory.reclaim: the I/O seam of the worker (a fake blocks or fails in tests).
class ReclaimWriter {
 public:
  virtual ~ReclaimWriter() = default;
  /// Asks the kernel to reclaim `bytes` from the cgroup at `cgroup_path`;
  /// blocks while it does. Returns how much the cgroup gave back (measured),
  /// or an error (EAGAIN: less than asked came back, counted as a result).
  virtual Result<uint64_t> reclaim(const std::string& cgroup_path, uint64_t bytes) = 0;
};

}  // namespace pressured
