#include "pressured/trend.hpp"

namespace pressured {

SignalTrend::SignalTrend(Duration window, std::size_t max_points)
    : window_(window), max_points_(max_points < 2 ? 2 : max_points) {}

void SignalTrend::observe(TimePoint at, double value) {
  if (!points_.empty() && at <= points_.back().first) return;
  points_.emplace_back(at, value);
  while (points_.size() > max_points_ || (points_.size() > 2 && at - points_.front().first > window_)) {
    points_.pop_front();
  }
}

std::size_t SignalTrend::fall_start() const {
  std::size_t i = points_.size() - 1;
  // Back while each earlier value is at least the later one (still falling,
  // or flat, seen backwards).
  while (i > 0 && points_[i - 1].second >= points_[i].second) --i;
  return i;
}

std::optional<double> SignalTrend::fall_rate() const {
  if (points_.size() < 2) return std::nullopt;
  const auto& [t0, v0] = points_[fall_start()];
  const auto& [t1, v1] = points_.back();
  const double seconds = std::chrono::duration<double>(t1 - t0).count();
  if (seconds < 1e-3) return std::nullopt;
  return (v0 - v1) / seconds;
}

Duration SignalTrend::fall_span() const {
  if (points_.size() < 2) return Duration::zero();
  return points_.back().first - points_[fall_start()].first;
}

}  // namespace pressured
