#pragma once
// Small builders for engine tests: thresholds, snapshots, pods, time.
#include <string>

#include "pressured/engine.hpp"

namespace pressured::testing {

constexpr double kMi = 1024.0 * 1024;
constexpr double kGi = kMi * 1024;

inline TimePoint at(double seconds) {
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds)));
}
inline ThresholdValue qty(double v) { return ThresholdValue{ThresholdValue::Kind::Quantity, v, 0}; }
inline ThresholdValue pct(double p) { return ThresholdValue{ThresholdValue::Kind::Percent, 0, p}; }

inline Threshold hard(Signal s, ThresholdValue v, ThresholdValue min_reclaim = {}) {
  Threshold t;
  t.signal = s;
  t.kind = ThresholdKind::Hard;
  t.value = v;
  t.min_reclaim = min_reclaim;
  return t;
}
inline Threshold soft(Signal s, ThresholdValue v, Duration grace, ThresholdValue min_reclaim = {}) {
  Threshold t = hard(s, v, min_reclaim);
  t.kind = ThresholdKind::Soft;
  t.grace_period = grace;
  return t;
}

inline EvictionConfig config(std::vector<Threshold> thresholds, Duration transition = Duration(0)) {
  EvictionConfig c;
  c.thresholds = std::move(thresholds);
  c.pressure_transition_period = transition;
  return c;
}

inline Pod pod(std::string uid, QosClass qos, double mem_usage, double mem_request = 0, int32_t priority = 0) {
  Pod p;
  p.uid = uid;
  p.name = "pod-" + uid;
  p.namespace_ = "default";
  p.qos = qos;
  p.priority = priority;
  p.requests.memory_bytes = static_cast<uint64_t>(mem_request);
  p.usage.memory_working_set_bytes = static_cast<uint64_t>(mem_usage);
  p.metadata_known = true;
  return p;
}

/// A builder for snapshots: signals set one by one, pods appended.
struct Snap {
  NodeSnapshot s;
  Snap& sig(Signal sig, double value, double capacity = 0, bool stale = false) {
    SignalObservation o;
    o.value = value;
    o.capacity = capacity;
    o.stale = stale;
    s.signal(sig) = o;
    return *this;
  }
  Snap& mem(double available, double capacity = 16 * kGi) { return sig(Signal::MemoryAvailable, available, capacity); }
  Snap& add(Pod p) {
    s.pods.push_back(std::move(p));
    return *this;
  }
  operator const NodeSnapshot&() const { return s; }  // NOLINT
};

}  // namespace pressured::testing
