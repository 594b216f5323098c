// Prints every sample name pressured exports, one per line: the Metrics
// class's own families and those of every component's declared stats
// (pressured/stats.hpp), exported here as the daemon exports them. The
// dashboard and alert-rule validators (tests/metrics/check_dashboards.py)
// take the list from here, so it can never drift from the code.

#include <iostream>

#include "daemon/daemon_stats.hpp"
#include "k8s/reporter.hpp"
#include "pods/apiserver_source.hpp"
#include "pressured/events.hpp"
#include "pressured/metrics.hpp"
#include "pressured/observer.hpp"
#include "relief/relief_stats.hpp"

int main() {
  pressured::MetricsOptions options;
  options.node = "names";
  pressured::Metrics metrics(options);
  const pressured::EventStats events;
  const pressured::ObserverCounters observer;
  const pressured::DaemonStats daemon;
  const pressured::k8s::ReporterStats reporter;
  const pressured::pods::ApiServerSourceCounters pod_source;
  const pressured::MetricsServerCounters server;
  const pressured::PodStorageCounters storage;
  const pressured::ReliefStats relief;
  const auto events_export = pressured::export_stats(metrics, events);
  const auto observer_export = pressured::export_stats(metrics, observer);
  const auto daemon_export = pressured::export_stats(metrics, daemon);
  const auto reporter_export = pressured::export_stats(metrics, reporter);
  const auto pod_source_export = pressured::export_stats(metrics, pod_source);
  const auto server_export = pressured::export_stats(metrics, server);
  const auto storage_export = pressured::export_stats(metrics, storage);
  const auto relief_export = pressured::export_stats(metrics, relief);
  for (const auto& name : metrics.metric_names()) std::cout << name << '\n';
  return 0;
}
