#pragma once
// Publishes the node conditions each evaluation decided: a log line per
// change, the condition gauges, and the Kubernetes API through `report`. The
// API gets every condition at the first publication (only the changes when a
// checkpoint was restored: the conditions were published before the restart),
// then on every change, and at least every heartbeat so that a condition
// lost on the API side comes back.

#include <array>
#include <chrono>
#include <functional>

#include "pressured/clock.hpp"
#include "pressured/engine.hpp"

namespace pressured {

class Metrics;

class ConditionPublisher {
 public:
  using Conditions = std::array<bool, kConditionCount>;
  /// status: every condition; changed: which of them to announce as changed.
  using Report = std::function<void(const Conditions& status, const Conditions& changed)>;

  /// `report` and `metrics` may be empty/null (no API, no metrics).
  ConditionPublisher(Report report, Metrics* metrics, Duration heartbeat = std::chrono::seconds(60));

  /// A checkpoint was restored: the first publication announces only changes.
  void restored() { restored_ = true; }
  void publish(const Decisions& d, TimePoint now);

 private:
  Report report_;
  Metrics* metrics_;
  Duration heartbeat_;
  bool restored_ = false;
  bool published_ = false;
  TimePoint last_report_{};
};

}  // namespace pressured
