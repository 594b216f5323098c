// The whole /metrics exposition, byte for byte, against a committed golden
// file: every family of Metrics driven with representative values (every
// label each family can carry, the bounds and their overflow, series that are
// replaced and removed) plus every component's declared stats, exported as
// the daemon exports them. Dashboards, alert rules and docs read these names,
// help texts, types, label sets, bucket boundaries and their order; a change
// to any of them shows here as a diff.
//
// After an intended change to the exposition, rewrite the golden file with
//   PRESSURED_UPDATE_GOLDEN=1 build/asan/tests/test_metrics --gtest_filter='MetricsGolden.*'
// and review the diff.

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/daemon_stats.hpp"
#include "k8s/reporter.hpp"
#include "pods/apiserver_source.hpp"
#include "pressured/build_info.hpp"
#include "pressured/events.hpp"
#include "pressured/metrics.hpp"
#include "pressured/observer.hpp"
#include "relief/relief_stats.hpp"

namespace pressured {
namespace {

const std::string kGolden = std::string(PRESSURED_FIXTURES_DIR) + "/metrics/exposition.prom";

Threshold threshold(Signal s, ThresholdKind kind, std::optional<double> quantity, std::optional<double> percent) {
  Threshold t;
  t.signal = s;
  t.kind = kind;
  if (quantity) {
    t.value.kind = ThresholdValue::Kind::Quantity;
    t.value.quantity = *quantity;
  } else {
    t.value.kind = ThresholdValue::Kind::Percent;
    t.value.percent = *percent;
  }
  return t;
}

PodMemorySample pod(std::string ns, std::string name, std::string uid, QosClass qos, double ws, double request,
                    std::optional<MemcgActivitySample> activity) {
  return {std::move(ns), std::move(name), std::move(uid), qos, ws, request, activity};
}

// Drives every family of `m` the way the daemon does.
void drive(Metrics& m) {
  EvictionConfig cfg;
  cfg.thresholds = {threshold(Signal::MemoryAvailable, ThresholdKind::Hard, 100.0 * 1024 * 1024, std::nullopt),
                    threshold(Signal::MemoryAvailable, ThresholdKind::Soft, std::nullopt, 10),
                    threshold(Signal::NodefsAvailable, ThresholdKind::Hard, std::nullopt, 10),
                    threshold(Signal::PidAvailable, ThresholdKind::Hard, 1000, std::nullopt),
                    threshold(Signal::MemoryPressureSomeAvg10, ThresholdKind::Hard, 40, std::nullopt),
                    threshold(Signal::ImagefsAvailable, ThresholdKind::Hard, std::nullopt, 15)};
  m.set_thresholds(cfg);
  // Every signal, each with a value and a capacity of its own.
  for (std::size_t i = 0; i < kSignalCount; ++i) {
    m.signal_observed(static_cast<Signal>(i), 1000.0 * static_cast<double>(i + 1), 8000.0 * static_cast<double>(i + 1));
  }
  m.signal_observed(Signal::MemoryAvailable, 3e9, 8e9);
  // A reload drops imagefs and adds a soft PID threshold.
  cfg.thresholds.pop_back();
  cfg.thresholds.push_back(threshold(Signal::PidAvailable, ThresholdKind::Soft, std::nullopt, 5));
  m.set_thresholds(cfg);

  for (std::size_t i = 0; i < kConditionCount; ++i) m.condition(static_cast<Condition>(i), true);
  m.condition(Condition::MemoryPressure, false);
  m.observation_completed();
  m.observation_completed();

  m.eviction(Signal::MemoryAvailable, QosClass::Burstable, ThresholdKind::Hard, "ns-a", "pod-a", "uid-a");
  m.eviction("emptydirfs.limit", QosClass::BestEffort, ThresholdKind::Soft, "ns-b", "pod-b", "uid-b");
  m.eviction(Signal::NodefsAvailable, QosClass::Guaranteed, ThresholdKind::Hard, "ns-c", "pod-c", "uid-c");
  m.eviction(Signal::MemoryAvailable, QosClass::BestEffort, ThresholdKind::Soft, "ns-b", "pod-b", "uid-b");

  m.add(stats::kEvictionContainers, {"app"});
  m.add(stats::kEvictionContainers, {"App.Side/car"});
  m.add(stats::kEvictionContainers, {"app"});
  for (int i = 0; i < 70; ++i) m.add(stats::kEvictionContainers, {std::string(1, 'c').append(std::to_string(i))});
  m.add(stats::kEvictionContainers, {std::string(80, 'x')});

  m.add(stats::kEvictionNoCandidates, {Signal::MemoryAvailable});
  m.add(stats::kEvictionNoCandidates, {Signal::PidAvailable});
  m.add(stats::kEvictionNoCandidates, {Signal::MemoryAvailable});
  m.observe(stats::kEvictionLatency, {ThresholdKind::Hard}, 0.004);
  m.observe(stats::kEvictionLatency, {ThresholdKind::Soft}, 42);
  m.observe(stats::kEvictionLatency, {ThresholdKind::Hard}, 1200);

  for (const char* a : {"start", "escalate", "kill", "stuck", "releasetimeout"}) m.add(stats::kEvictionPolicyActions, {a}, 0);
  m.add(stats::kEvictionPolicyActions, {"start"}, 2);
  m.add(stats::kEvictionPolicyActions, {"Stuck-Victim!"}, 1);

  for (const auto* f : {&stats::kPluginCalls, &stats::kPluginTimeouts, &stats::kPluginErrors, &stats::kPluginVetoes,
                        &stats::kPluginProposals}) {
    m.add(*f, {"plugin-a"}, 0);
  }
  m.add(stats::kPluginCalls, {"plugin-a"}, 5);
  m.add(stats::kPluginTimeouts, {"plugin-a"}, 1);
  m.add(stats::kPluginErrors, {"plugin-a"}, 2);
  m.add(stats::kPluginVetoes, {"plugin-a"}, 1);
  m.add(stats::kPluginProposals, {"plugin-a"}, 3);
  m.add(stats::kPluginCalls, {"plugin-b"}, 1);

  m.add(stats::kLocalKills, {result_name(true)});
  m.add(stats::kLocalKills, {result_name(false)});
  m.add(stats::kLocalKills, {result_name(true)});

  for (const auto& a : kApiActionNames) {
    for (const auto& o : kApiOutcomeNames) m.add(stats::kKubernetesApiRequests, {a.value, o.value});
  }
  m.add(stats::kKubernetesApiRequests, {ApiAction::Eviction, api_outcome_from_http_status(201)});

  m.add(stats::kKernelOomKills, {QosClass::Burstable, OomScope::Node});
  m.add(stats::kKernelOomKills, {"none", OomScope::Cgroup});
  m.add(stats::kKernelOomKills, {QosClass::Guaranteed, OomScope::Unknown});
  m.add(stats::kKernelOomKills, {QosClass::Burstable, OomScope::Node});

  m.observe(stats::kDetectionLatency, {"bpf"}, 2.5e-5);
  m.observe(stats::kDetectionLatency, {"psi"}, 0.003);
  m.observe(stats::kDetectionLatency, {"Memcg-Notification"}, 0.2);
  m.observe(stats::kDetectionLatency, {"safety_net"}, 12);
  m.observe(stats::kDetectionLatency, {"bpf"}, 4e-5);

  const std::vector<double> bounds{1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1};
  m.reactor_dispatch_latency(bounds, {1, 2, 3, 0, 0, 0, 1}, 2.5);
  m.reactor_dispatch_latency(bounds, {2, 2, 5, 1, 0, 0, 1}, 2.75);

  m.observe(stats::kReclaimDuration, {}, 0.05);
  m.observe(stats::kReclaimDuration, {}, 0.5);

  m.bpf_attach("memcg_threshold", "tp_btf", "");
  m.bpf_attach("oom_kill", "fentry", "");
  m.bpf_attach("oom_kill", "raw_tp", "fentry: EPERM");
  m.bpf_attach("PSI Trigger", "off", std::string(200, 'r'));
  m.add(stats::kBpfLoadRefusals, {"oom_kill", "fentry"});
  m.add(stats::kBpfLoadRefusals, {"oom_kill", "tp_btf"});

  m.add(stats::kStaleReads, {Signal::MemoryAvailable});
  m.add(stats::kStaleReads, {Signal::PidAvailable});
  m.add(stats::kStaleReads, {"pod_usage"});
  m.add(stats::kStaleReads, {"pod_metadata"});

  m.add(stats::kConfigReloads, {result_name(true)});
  m.set(stats::kConfigLastReloadSuccessful, {}, 1);
  m.add(stats::kConfigReloads, {result_name(false)});
  m.set(stats::kConfigLastReloadSuccessful, {}, 0);
  m.add(stats::kCheckpointWrites, {result_name(true)});
  m.add(stats::kCheckpointWrites, {result_name(true)});
  m.add(stats::kCheckpointWrites, {result_name(false)});

  const MemcgActivitySample act1{100, 40, 7, 0.25};
  const MemcgActivitySample act2{300, 90, 8, 1.5};
  m.update_pods({pod("ns-a", "pod-a", "uid-a", QosClass::Burstable, 5e8, 2e8, act1),
                 pod("ns-b", "pod-b", "uid-b", QosClass::BestEffort, 4e8, 0, std::nullopt),
                 pod("", "", "uid-x", QosClass::BestEffort, 3e8, 0, std::nullopt),
                 pod("ns-d", "pod-d", "uid-d", QosClass::Guaranteed, 2e8, 2e8, act1),
                 pod("ns-e", "pod-e", "", QosClass::Burstable, 1e8, 5e7, std::nullopt)});
  // Metadata arrives for uid-x, pod-a loses its request, pod-d climbs into the top.
  m.update_pods({pod("ns-a", "pod-a", "uid-a", QosClass::Burstable, 5.5e8, 0, act2),
                 pod("ns-b", "pod-b", "uid-b", QosClass::BestEffort, 1e8, 0, std::nullopt),
                 pod("ns-x", "pod-x", "uid-x", QosClass::Burstable, 3e8, 1e8, act1),
                 pod("ns-d", "pod-d", "uid-d", QosClass::Guaranteed, 6e8, 2e8, act2)});

  m.memcg_activity("kubepods", act1);
  m.memcg_activity("burstable", act1);
  m.memcg_activity("besteffort", act1);
  m.memcg_activity("kubepods", act2);
  m.memcg_activity(std::string(60, 'k'), act2);

  m.set(stats::kPsiAvailable, {}, 0);
  m.set_events_attached(true);
  m.require_pod_source([] { return false; });
}

// What changes from run to run (wall-clock times, the build) as fixed text.
std::string normalized(const std::string& text) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("pressured_start_time_seconds", 0) == 0 ||
        line.rfind("pressured_eviction_last_timestamp_seconds{", 0) == 0) {
      line = line.substr(0, line.rfind(' ')).append(" <unix time>");
    }
    for (const std::string_view v : {build_info::kVersion, build_info::kBuildType}) {
      std::string quoted(1, '"');
      quoted.append(v).append("\"");
      if (const auto at = line.find(quoted); line.rfind("pressured_build_info{", 0) == 0 && at != std::string::npos) {
        line.replace(at, quoted.size(), v == build_info::kVersion ? "\"<version>\"" : "\"<build type>\"");
      }
    }
    out << line << '\n';
  }
  return out.str();
}

TEST(MetricsGolden, ExpositionIsByteIdentical) {
  MetricsOptions o;
  o.node = "golden-node";
  o.top_pods = 3;
  o.recent_evictions = 2;
  Metrics m(o);

  EventStats events;
  const ObserverCounters observer;
  const DaemonStats daemon;
  const k8s::ReporterStats reporter;
  const pods::ApiServerSourceCounters pod_source;
  const MetricsServerCounters server;
  const PodStorageCounters storage;
  const ReliefStats relief;
  const auto events_export = export_stats(m, events);
  const auto observer_export = export_stats(m, observer);
  const auto daemon_export = export_stats(m, daemon);
  const auto reporter_export = export_stats(m, reporter);
  const auto pod_source_export = export_stats(m, pod_source);
  const auto server_export = export_stats(m, server);
  const auto storage_export = export_stats(m, storage);
  const auto relief_export = export_stats(m, relief);
  events.count_event(EventSource::Bpf, EventType::ThresholdUp);
  events.count_event(EventSource::Bpf, EventType::ThresholdUp);

  drive(m);
  const std::string got = normalized(m.render());

  if (std::getenv("PRESSURED_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(kGolden) << got;
    GTEST_SKIP() << "rewrote " << kGolden;
  }
  std::ifstream in(kGolden);
  ASSERT_TRUE(in) << "missing " << kGolden << " (PRESSURED_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << in.rdbuf();
  if (got == want.str()) return;
  // The first line that differs, then the whole text for the record.
  std::istringstream g(got), w(want.str());
  std::string gl, wl;
  for (int n = 1;; ++n) {
    const bool more_g = static_cast<bool>(std::getline(g, gl));
    const bool more_w = static_cast<bool>(std::getline(w, wl));
    if (!more_g && !more_w) break;
    if (!more_g || !more_w || gl != wl) {
      ADD_FAILURE() << "line " << n << " differs from " << kGolden << "\n  want: " << (more_w ? wl : "<end>")
                    << "\n  got:  " << (more_g ? gl : "<end>");
      break;
    }
  }
  FAIL() << "exposition differs from the golden file; got:\n" << got;
}

}  // namespace
}  // namespace pressured
