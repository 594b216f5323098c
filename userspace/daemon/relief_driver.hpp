#pragma once
// The daemon's side of relief (pressured/relief.hpp): the pure stage is the
// eviction policy's (EvictionPolicy::relieve, the memory lane's first
// phase); this hands the worker's outcome to it at the next evaluation,
// starts the runs it decides on the worker thread, and logs and counts every
// decision. Lives on the event loop's thread.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pressured/config.hpp"
#include "pressured/events.hpp"
#include "pressured/metrics.hpp"
#include "pressured/relief.hpp"
#include "pressured/stats.hpp"
#include "relief/reclaim_worker.hpp"
#include "relief/relief_stats.hpp"

namespace pressured {

class ReliefDriver {
 public:
  /// `writer` null: the kernel cannot reclaim (cgroup v1, no memory.reclaim):
  /// the stage is off, which the log says once and the gauge shows.
  /// `on_done` runs on the loop when a run ends (an evaluation). `config` is
  /// the daemon's one configuration; `stage` the policy's.
  ReliefDriver(std::shared_ptr<const LiveConfig> config, const ReliefStage& stage, ReclaimWriter* writer,
               std::string unavailable_reason, Metrics* metrics, EventLoop* loop, std::function<void()> on_done);

  /// The worker's outcome of the run that ended since the last call, if any
  /// (the input of the policy's relieve()).
  std::optional<ReliefOutcome> take_outcome();
  /// Carries out what the policy's relief phase decided: starts the run on
  /// the worker, logs and counts.
  void carry_out(const ReliefStep& step);
  /// When the current hold ends (the loop evaluates again then).
  std::optional<TimePoint> deadline() const { return deadline_; }
  /// A run is writing (its outcome not yet taken).
  bool running() const { return stage_.running().has_value(); }
  const ReliefStats& stats() const { return stats_; }
  /// After the policy took back a checkpoint's back-off: the gauge of cgroups backing off.
  void restored() { stats_.backoff_cgroups = stage_.backoff().size(); }
  const ReliefStage& stage() const { return stage_; }

 private:
  void report(const ReliefStep& st);

  std::shared_ptr<const LiveConfig> live_;
  const ReliefStage& stage_;
  MonotonicClock clock_;
  std::unique_ptr<ReclaimWorker> worker_;  // null: unavailable
  Metrics* metrics_;
  std::optional<TimePoint> deadline_;
  ReliefStats stats_;
  StatsExport export_;  // after stats_: released first
};


}  // namespace pressured
