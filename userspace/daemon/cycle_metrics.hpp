#pragma once
// The metrics one evaluation publishes, from what it observed and decided
// (the daemon's cycle calls these; no decision depends on them).

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <string>

#include "pressured/engine.hpp"
#include "pressured/events.hpp"
#include "pressured/metrics.hpp"
#include "pressured/observer.hpp"

namespace pressured {

/// Signal values and capacities, stale signal reads, and (after a full
/// observation) stale pod reads.
void publish_observation(Metrics& m, const NodeSnapshot& snap, bool full);

/// Thresholds that found no pod to evict; one more completed observation.
void publish_decisions(Metrics& m, const Decisions& d);

/// Per-pod series (after full observations: events.fullObservationInterval),
/// each with the reclaim activity `alarms` accumulates for it when it is
/// tracked, and the activity of kubepods and the QoS tiers (`scopes`: id ->
/// label). `alarms` may be null (no BPF).
void publish_pods(Metrics& m, const NodeSnapshot& snap, const std::map<uint64_t, std::string>& tracked,
                  const std::map<uint64_t, std::string>& scopes, const KernelAlarms* alarms);

MemcgActivitySample activity_sample(const MemcgActivity& a);

/// What woke a decision (`source`) and, for a kernel event, how long after
/// its `kernel_time` it came (detection latency, published when `m` is
/// set): stamped on every candidate, for the eviction's messages.
void stamp_wake(Decisions& d, std::string_view source, std::optional<TimePoint> kernel_time, Metrics* m);

}  // namespace pressured
