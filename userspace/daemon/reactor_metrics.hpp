#pragma once
// Copies the reactor's own statistics (EventStats: plain atomics, so the
// event path never touches the metrics library) into Metrics at scrape time.

#include "pressured/events.hpp"
#include "pressured/metrics.hpp"

namespace pressured {

/// Registers an on_render hook on `metrics` that exports `stats`' dispatch
/// latency histogram as pressured_reactor_dispatch_latency_seconds. `stats`
/// must outlive every render of `metrics`.
void export_reactor_latency(const EventStats& stats, Metrics& metrics);

}  // namespace pressured
