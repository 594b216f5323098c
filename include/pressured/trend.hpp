#pragma once
// How fast a memory signal falls, from the engine's own observations: the
// input of the predictive hard threshold (daemon.predictiveLead,
// docs/engine.md "Predictive hard threshold"). Pure: observations in, a rate
// out; no clock of its own.

#include <cstddef>
#include <deque>
#include <optional>
#include <utility>

#include "pressured/clock.hpp"

namespace pressured {

class SignalTrend {
 public:
  /// Observations older than `window` before the newest are forgotten, and at
  /// most `max_points` are kept.
  explicit SignalTrend(Duration window = std::chrono::seconds(2), std::size_t max_points = 64);

  /// One observation of the signal's value (bytes available) taken at `at`.
  /// An observation not after the newest one is ignored (a partial refresh
  /// may hand the same reading twice).
  void observe(TimePoint at, double value);

  /// Bytes per second the signal falls, over its current fall: from the
  /// newest observation back to the last one where it rose (a victim's
  /// memory coming back ends a fall; what came before says nothing about the
  /// growth after it). nullopt while that run spans less than a millisecond
  /// or one observation; 0 or less: not falling.
  std::optional<double> fall_rate() const;

  /// The span of the fall fall_rate() measured over (zero without one).
  Duration fall_span() const;

  void clear() { points_.clear(); }

 private:
  std::size_t fall_start() const;

  Duration window_;
  std::size_t max_points_;
  std::deque<std::pair<TimePoint, double>> points_;  // oldest first
};

}  // namespace pressured
