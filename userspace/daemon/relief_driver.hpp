#pragma once
// The daemon's side of relief (pressured/relief.hpp): runs the pure stage
// between the engine and the eviction policy, hands its runs to the worker
// thread, takes the worker's outcome at the next evaluation, and logs and
// counts every decision. Lives on the event loop's thread.

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
  /// the daemon's one configuration: a reload applies from the next step().
  ReliefDriver(std::shared_ptr<const LiveConfig> config, ReclaimWriter* writer, std::string unavailable_reason,
               Metrics* metrics, EventLoop* loop, std::function<void()> on_done);

  /// Between the engine and the policy: takes in a finished run, decides,
  /// starts a run, and removes the memory candidates that wait for it from `d`.
  void step(TimePoint now, const NodeSnapshot& snapshot, Decisions& d, const std::vector<std::string>& excluded,
            bool memory_lane_busy);
  /// When the current hold ends (the loop evaluates again then).
  std::optional<TimePoint> deadline() const { return deadline_; }
  /// A run is writing (its outcome not yet taken).
  bool running() const { return stage_.running().has_value(); }
  const ReliefStats& stats() const { return stats_; }
  /// Takes back the checkpoint's back-off (ReliefStage::restore); returns how many cgroups back off.
  std::size_t restore(const ReliefState& state);
  const ReliefStage& stage() const { return stage_; }

 private:
  void report(const ReliefStep& st);
  void follow();

  std::shared_ptr<const LiveConfig> live_;
  uint64_t generation_ = 0;  // of live_ when the stage was last configured
  ReliefStage stage_;
  MonotonicClock clock_;
  std::unique_ptr<ReclaimWorker> worker_;  // null: unavailable
  Metrics* metrics_;
  std::optional<TimePoint> deadline_;
  ReliefStats stats_;
  StatsExport export_;  // after stats_: released first
};


}  // namespace pressured
