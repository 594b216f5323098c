#include "daemon/reactor_metrics.hpp"

#include <vector>

namespace pressured {

void export_reactor_latency(const EventStats& stats, Metrics& metrics) {
  std::vector<double> bounds;
  for (uint32_t us : kLatencyBucketsUs) bounds.push_back(us / 1e6);
  metrics.on_render([&stats, &metrics, bounds] {
    std::vector<uint64_t> totals;
    for (const auto& b : stats.latency_buckets) totals.push_back(b.load(std::memory_order_relaxed));
    metrics.reactor_dispatch_latency(bounds, totals, static_cast<double>(stats.latency_sum_ns.load()) / 1e9);
  });
}

}  // namespace pressured
