// Metrics and MetricsServer: record values, serve them on a loopback
// ephemeral port, scrape over HTTP and check names, labels and values.

#include "pressured/metrics.hpp"

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "daemon/daemon_stats.hpp"
#include "metrics/exposition.hpp"
#include "pressured/build_info.hpp"
#include "pressured/events.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

using testing::Exposition;
using testing::parse_exposition;

MetricsOptions options(uint32_t top = 20) {
  MetricsOptions o;
  o.node = "node-a";
  o.top_pods = top;
  return o;
}

struct Scrape {
  int status = 0;
  std::string body;
  std::string content_type;
};

Scrape get(uint16_t port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(5, 0);
  auto res = cli.Get(path.c_str());
  if (!res) return {};
  return {res->status, res->body, res->get_header_value("Content-Type")};
}

class ServedMetrics : public ::testing::Test {
 protected:
  void start(MetricsOptions o = options()) {
    metrics_ = std::make_unique<Metrics>(std::move(o));
    auto s = MetricsServer::start(*metrics_, "127.0.0.1:0");
    ASSERT_TRUE(s.ok()) << s.error().message;
    server_ = std::move(s.value());
    ASSERT_NE(server_->port(), 0);
  }
  Exposition scrape() {
    auto r = get(server_->port(), "/metrics");
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.content_type.find("text/plain; version=0.0.4"), std::string::npos) << r.content_type;
    auto e = parse_exposition(r.body);
    EXPECT_TRUE(e.errors.empty()) << "unparsable line: " << (e.errors.empty() ? "" : e.errors.front());
    return e;
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<MetricsServer> server_;
};

TEST_F(ServedMetrics, SignalsThresholdsAndConditions) {
  start();
  EvictionConfig cfg;
  Threshold hard;
  hard.signal = Signal::MemoryAvailable;
  hard.kind = ThresholdKind::Hard;
  hard.value.kind = ThresholdValue::Kind::Quantity;
  hard.value.quantity = 100.0 * 1024 * 1024;
  Threshold soft;
  soft.signal = Signal::MemoryAvailable;
  soft.kind = ThresholdKind::Soft;
  soft.value.kind = ThresholdValue::Kind::Percent;
  soft.value.percent = 10;
  Threshold psi;
  psi.signal = Signal::MemoryPressureSomeAvg10;
  psi.value.quantity = 40;
  cfg.thresholds = {hard, soft, psi};
  metrics_->set_thresholds(cfg);

  // Before the capacity is known only the quantity thresholds are exported.
  auto e = scrape();
  EXPECT_EQ(e.value("pressured_signal_threshold", {{"signal", "memory.available"}, {"threshold_type", "hard"}}),
            100.0 * 1024 * 1024);
  EXPECT_TRUE(e.find("pressured_signal_threshold", {{"threshold_type", "soft"}}).empty());

  metrics_->signal_observed(Signal::MemoryAvailable, 3e9, 8e9);
  metrics_->signal_observed(Signal::PidAvailable, 4000, 4194304);
  metrics_->signal_observed(Signal::MemoryPressureSomeAvg10, 12.5, 100);
  metrics_->condition(Condition::MemoryPressure, true);

  e = scrape();
  const std::map<std::string, std::string> mem{{"signal", "memory.available"}, {"unit", "bytes"}, {"node", "node-a"}};
  EXPECT_EQ(e.value("pressured_signal_value", mem), 3e9);
  EXPECT_EQ(e.value("pressured_signal_capacity", mem), 8e9);
  EXPECT_EQ(e.value("pressured_signal_value", {{"signal", "pid.available"}, {"unit", "pids"}}), 4000);
  EXPECT_EQ(e.value("pressured_signal_value", {{"signal", "memory.pressure.some.avg10"}, {"unit", "percent"}}), 12.5);
  EXPECT_EQ(e.value("pressured_signal_threshold", {{"signal", "memory.available"}, {"threshold_type", "soft"}}), 8e8);
  EXPECT_EQ(e.value("pressured_signal_threshold",
                    {{"signal", "memory.pressure.some.avg10"}, {"unit", "percent"}, {"threshold_type", "hard"}}),
            40);
  // Signals never observed have no series.
  EXPECT_TRUE(e.find("pressured_signal_value", {{"signal", "imagefs.available"}}).empty());
  EXPECT_EQ(e.value("pressured_node_condition", {{"condition", "MemoryPressure"}}), 1);
  EXPECT_EQ(e.value("pressured_node_condition", {{"condition", "DiskPressure"}}), 0);
  EXPECT_EQ(e.value("pressured_node_condition", {{"condition", "PIDPressure"}}), 0);
  EXPECT_EQ(e.value("pressured_node_condition_transitions_total", {{"condition", "MemoryPressure"}}), 1);
  EXPECT_EQ(e.types["pressured_node_condition_transitions_total"], "counter");
  EXPECT_EQ(e.types["pressured_signal_value"], "gauge");

  // A capacity change re-resolves the percentage threshold.
  metrics_->signal_observed(Signal::MemoryAvailable, 3e9, 16e9);
  // Reload without the soft threshold: its series goes away.
  cfg.thresholds = {hard};
  metrics_->set_thresholds(cfg);
  e = scrape();
  EXPECT_TRUE(e.find("pressured_signal_threshold", {{"threshold_type", "soft"}}).empty());
  EXPECT_TRUE(e.find("pressured_signal_threshold", {{"signal", "memory.pressure.some.avg10"}}).empty());
  EXPECT_EQ(e.find("pressured_signal_threshold").size(), 1u);
  metrics_->condition(Condition::MemoryPressure, true);   // no flip
  metrics_->condition(Condition::MemoryPressure, false);  // flip
  e = scrape();
  EXPECT_EQ(e.value("pressured_node_condition", {{"condition", "MemoryPressure"}}), 0);
  EXPECT_EQ(e.value("pressured_node_condition_transitions_total", {{"condition", "MemoryPressure"}}), 2);
}

TEST_F(ServedMetrics, PercentThresholdResolvedWhenCapacityChanges) {
  start();
  EvictionConfig cfg;
  Threshold t;
  t.signal = Signal::NodefsAvailable;
  t.value.kind = ThresholdValue::Kind::Percent;
  t.value.percent = 10;
  cfg.thresholds = {t};
  metrics_->set_thresholds(cfg);
  metrics_->signal_observed(Signal::NodefsAvailable, 50, 1000);
  EXPECT_EQ(scrape().value("pressured_signal_threshold", {{"signal", "nodefs.available"}}), 100);
  metrics_->signal_observed(Signal::NodefsAvailable, 50, 2000);
  EXPECT_EQ(scrape().value("pressured_signal_threshold", {{"signal", "nodefs.available"}}), 200);
}

TEST_F(ServedMetrics, EvictionsOutcomesAndRecentVictims) {
  MetricsOptions o = options();
  o.recent_evictions = 3;
  start(o);
  EvictionConfig cfg;
  Threshold t;
  t.signal = Signal::AllocatableMemoryAvailable;
  cfg.thresholds = {t};
  metrics_->set_thresholds(cfg);
  auto e = scrape();
  // Counters for configured thresholds exist at 0 so rate() sees the first eviction.
  EXPECT_EQ(e.find("pressured_evictions_total", {{"signal", "allocatableMemory.available"}}).size(), 3u);
  EXPECT_EQ(e.value("pressured_evictions_total", {{"signal", "allocatableMemory.available"},
                                                   {"qos_class", "BestEffort"},
                                                   {"threshold_type", "hard"}}),
            0);

  for (int i = 0; i < 5; ++i) {
    metrics_->eviction(Signal::AllocatableMemoryAvailable, QosClass::BestEffort, ThresholdKind::Hard, "default",
                       "pod-" + std::to_string(i), "uid-" + std::to_string(i));
  }
  metrics_->eviction(Signal::MemoryAvailable, QosClass::Burstable, ThresholdKind::Soft, "kube-system", "pod-4",
                     "uid-4");  // evicted again: replaces its entry
  metrics_->add(stats::kEvictionNoCandidates, {Signal::PidAvailable});
  metrics_->add(stats::kLocalKills, {result_name(true)});
  metrics_->add(stats::kLocalKills, {result_name(true)});
  metrics_->add(stats::kLocalKills, {result_name(false)});
  metrics_->add(stats::kKubernetesApiRequests, {ApiAction::Eviction, ApiOutcome::TooManyRequests});
  metrics_->add(stats::kKubernetesApiRequests, {ApiAction::Delete, api_outcome_from_http_status(200)});
  metrics_->add(stats::kKubernetesApiRequests, {ApiAction::NodeStatus, ApiOutcome::Timeout});
  metrics_->observe(stats::kEvictionLatency, {ThresholdKind::Hard}, 0.004);
  metrics_->observe(stats::kEvictionLatency, {ThresholdKind::Soft}, 45);

  e = scrape();
  EXPECT_EQ(e.value("pressured_evictions_total", {{"signal", "allocatableMemory.available"},
                                                   {"qos_class", "BestEffort"},
                                                   {"threshold_type", "hard"}}),
            5);
  EXPECT_EQ(e.value("pressured_evictions_total",
                    {{"signal", "memory.available"}, {"qos_class", "Burstable"}, {"threshold_type", "soft"}}),
            1);
  auto victims = e.find("pressured_eviction_last_timestamp_seconds");
  ASSERT_EQ(victims.size(), 3u);
  std::set<std::string> uids;
  for (const auto& v : victims) {
    uids.insert(v.labels.at("uid"));
    EXPECT_GT(v.value, 1.6e9);  // a unix time
  }
  EXPECT_EQ(uids, (std::set<std::string>{"uid-2", "uid-3", "uid-4"}));
  EXPECT_EQ(e.find("pressured_eviction_last_timestamp_seconds", {{"uid", "uid-4"}}).at(0).labels.at("namespace"),
            "kube-system");
  EXPECT_EQ(e.value("pressured_eviction_no_candidates_total", {{"signal", "pid.available"}}), 1);
  EXPECT_EQ(e.value("pressured_local_kills_total", {{"result", "success"}}), 2);
  EXPECT_EQ(e.value("pressured_local_kills_total", {{"result", "failure"}}), 1);
  // A local ephemeral-storage eviction is labelled with its rule, as the
  // kubelet's evictions metric.
  metrics_->eviction("emptydirfs.limit", QosClass::Burstable, ThresholdKind::Hard, "shop", "cache", "uid-9");
  e = scrape();
  EXPECT_EQ(e.value("pressured_evictions_total",
                    {{"signal", "emptydirfs.limit"}, {"qos_class", "Burstable"}, {"threshold_type", "hard"}}),
            1);
  EXPECT_EQ(e.find("pressured_eviction_last_timestamp_seconds", {{"uid", "uid-9"}}).at(0).labels.at("signal"),
            "emptydirfs.limit");
  metrics_->add(stats::kEvictionPolicyActions, {"escalate"}, 0);
  metrics_->add(stats::kEvictionPolicyActions, {"stuck"});
  metrics_->add(stats::kEvictionPolicyActions, {"stuck"});
  e = parse_exposition(metrics_->render());
  EXPECT_EQ(e.value("pressured_eviction_policy_actions_total", {{"action", "stuck"}}), 2);
  EXPECT_EQ(e.value("pressured_eviction_policy_actions_total", {{"action", "escalate"}}), 0);
  EXPECT_EQ(e.value("pressured_kubernetes_api_requests_total", {{"action", "eviction"}, {"result", "too_many_requests"}}),
            1);
  EXPECT_EQ(e.value("pressured_kubernetes_api_requests_total", {{"action", "delete"}, {"result", "success"}}), 1);
  EXPECT_EQ(e.value("pressured_kubernetes_api_requests_total", {{"action", "node_status"}, {"result", "timeout"}}), 1);
  EXPECT_EQ(e.value("pressured_eviction_latency_seconds_count", {{"threshold_type", "hard"}}), 1);
  EXPECT_EQ(e.value("pressured_eviction_latency_seconds_bucket", {{"threshold_type", "hard"}, {"le", "0.005"}}), 1);
  EXPECT_EQ(e.value("pressured_eviction_latency_seconds_bucket", {{"threshold_type", "hard"}, {"le", "0.0025"}}), 0);
  EXPECT_EQ(e.value("pressured_eviction_latency_seconds_bucket", {{"threshold_type", "soft"}, {"le", "30"}}), 0);
  EXPECT_EQ(e.value("pressured_eviction_latency_seconds_bucket", {{"threshold_type", "soft"}, {"le", "60"}}), 1);
  EXPECT_EQ(e.value("pressured_eviction_latency_seconds_sum", {{"threshold_type", "soft"}}), 45);
}

// Evictions by the victim's container that grew: container names come from
// pod specs, unbounded over a node's life, so the series are capped.
TEST_F(ServedMetrics, EvictionsByContainerAreBoundedInNames) {
  start();
  metrics_->add(stats::kEvictionContainers, {"app"});
  metrics_->add(stats::kEvictionContainers, {"app"});
  auto e = scrape();
  EXPECT_EQ(e.value("pressured_eviction_containers_total", {{"container", "app"}}), 2);
  for (std::size_t i = 0; i < std::size_t{stats::kEvictionContainers.labels[0].max_values} + 10; ++i) {
    metrics_->add(stats::kEvictionContainers, {fmt::format("c{}", i)});
  }
  metrics_->add(stats::kEvictionContainers, {"app"});  // one with a series already keeps it
  e = scrape();
  EXPECT_EQ(e.find("pressured_eviction_containers_total").size(), std::size_t{stats::kEvictionContainers.labels[0].max_values} + 1)
      << "64 names and other";
  EXPECT_EQ(e.value("pressured_eviction_containers_total", {{"container", "app"}}), 3);
  EXPECT_EQ(e.value("pressured_eviction_containers_total", {{"container", "other"}}), 11);
}

TEST(ApiOutcome, FromHttpStatus) {
  EXPECT_EQ(api_outcome_from_http_status(201), ApiOutcome::Success);
  EXPECT_EQ(api_outcome_from_http_status(404), ApiOutcome::NotFound);
  EXPECT_EQ(api_outcome_from_http_status(409), ApiOutcome::Conflict);
  EXPECT_EQ(api_outcome_from_http_status(429), ApiOutcome::TooManyRequests);
  EXPECT_EQ(api_outcome_from_http_status(403), ApiOutcome::ClientError);
  EXPECT_EQ(api_outcome_from_http_status(503), ApiOutcome::ServerError);
  EXPECT_EQ(api_outcome_from_http_status(0), ApiOutcome::ClientError);
}

TEST_F(ServedMetrics, EventPathCountersAndDetectionHistogram) {
  start();
  // The event path's counters are the reactor's (EventStats) and the
  // daemon's (DaemonStats), exported as run_cmd.cpp exports them.
  EventStats events;
  DaemonStats daemon;
  const StatsExport events_export = export_stats(*metrics_, events);
  const StatsExport daemon_export = export_stats(*metrics_, daemon);
  auto e = scrape();
  // Alerted-on counters exist from the start, at 0.
  EXPECT_EQ(e.value("pressured_ring_buffer_dropped_events_total"), 0);
  EXPECT_EQ(e.value("pressured_safety_net_detections_total"), 0);
  EXPECT_EQ(e.find("pressured_kernel_oom_kills_total").size(), 12u) << "4 classes by 3 scopes";
  EXPECT_EQ(e.value("pressured_kernel_oom_kills_total", {{"qos_class", "none"}, {"scope", "node"}}), 0);

  for (int i = 0; i < 4; ++i) events.count_event(EventSource::Bpf, EventType::ThresholdUp);
  events.count_event(EventSource::Psi, EventType::PsiTrigger);
  events.ringbuf_drops += 7;
  ++events.resyncs;
  events.safety_net_ticks += 2;
  ++daemon.safety_net_detections;
  ++events.startup_resyncs;
  metrics_->add(stats::kKernelOomKills, {QosClass::Burstable, OomScope::Cgroup});
  metrics_->add(stats::kKernelOomKills, {"none", OomScope::Node});
  metrics_->observe(stats::kDetectionLatency, {"bpf"}, 0.00002);   // 20 us
  metrics_->observe(stats::kDetectionLatency, {"bpf"}, 0.003);     // 3 ms
  metrics_->observe(stats::kDetectionLatency, {"safety_net"}, 20);  // beyond the last bucket
  metrics_->add(stats::kStaleReads, {Signal::NodefsAvailable});
  metrics_->add(stats::kStaleReads, {"pod_usage"});
  metrics_->add(stats::kStaleReads, {"pod_metadata"});
  metrics_->add(stats::kConfigReloads, {result_name(true)});
  metrics_->set(stats::kConfigLastReloadSuccessful, {}, 1);
  metrics_->add(stats::kConfigReloads, {result_name(false)});
  metrics_->set(stats::kConfigLastReloadSuccessful, {}, 0);
  metrics_->add(stats::kCheckpointWrites, {result_name(true)});
  metrics_->add(stats::kCheckpointWrites, {result_name(true)});
  metrics_->observation_completed();
  metrics_->observation_completed();

  e = scrape();
  EXPECT_EQ(e.value("pressured_events_total", {{"source", "bpf"}, {"type", "threshold_up"}}), 4);
  EXPECT_EQ(e.value("pressured_events_total", {{"source", "psi"}, {"type", "psi_trigger"}}), 1);
  EXPECT_EQ(e.find("pressured_events_total").size(), 2u) << "only the pairs that occurred have a series";
  EXPECT_EQ(e.value("pressured_ring_buffer_dropped_events_total"), 7);
  EXPECT_EQ(e.value("pressured_resyncs_total", {{"reason", "ring_buffer_overflow"}}), 1);
  EXPECT_EQ(e.value("pressured_resyncs_total", {{"reason", "startup"}}), 1) << "the start's resync, in the same family";
  EXPECT_EQ(e.value("pressured_safety_net_polls_total"), 2);
  EXPECT_EQ(e.value("pressured_safety_net_detections_total"), 1);
  EXPECT_EQ(e.value("pressured_kernel_oom_kills_total", {{"qos_class", "Burstable"}, {"scope", "cgroup"}}), 1);
  EXPECT_EQ(e.value("pressured_kernel_oom_kills_total", {{"qos_class", "Burstable"}, {"scope", "node"}}), 0);
  EXPECT_EQ(e.value("pressured_kernel_oom_kills_total", {{"qos_class", "none"}, {"scope", "node"}}), 1);
  EXPECT_EQ(e.sum("pressured_kernel_oom_kills_total", {{"qos_class", "Guaranteed"}}), 0);
  EXPECT_EQ(e.types["pressured_detection_latency_seconds"], "histogram");
  const std::map<std::string, std::string> bpf{{"source", "bpf"}};
  auto buckets = e.find("pressured_detection_latency_seconds_bucket", bpf);
  ASSERT_EQ(buckets.size(), 20u);  // 19 bounds 10us..10s + Inf
  std::vector<double> les;
  for (const auto& b : buckets) les.push_back(std::strtod(b.labels.at("le").c_str(), nullptr));
  std::sort(les.begin(), les.end());
  EXPECT_DOUBLE_EQ(les.front(), 1e-5);
  EXPECT_DOUBLE_EQ(les[les.size() - 2], 10);
  EXPECT_TRUE(std::isinf(les.back()));
  for (const auto& b : buckets) {
    const double le = std::strtod(b.labels.at("le").c_str(), nullptr);
    const double want = (le >= 0.003) ? 2 : (le >= 0.00002 ? 1 : 0);
    EXPECT_EQ(b.value, want) << "le=" << b.labels.at("le");
  }
  EXPECT_EQ(e.value("pressured_detection_latency_seconds_count", bpf), 2);
  EXPECT_NEAR(*e.value("pressured_detection_latency_seconds_sum", bpf), 0.00302, 1e-12);
  EXPECT_EQ(e.value("pressured_detection_latency_seconds_bucket", {{"source", "safety_net"}, {"le", "10"}}), 0);
  EXPECT_EQ(e.value("pressured_detection_latency_seconds_bucket", {{"source", "safety_net"}, {"le", "+Inf"}}), 1);
  EXPECT_EQ(e.value("pressured_stale_reads_total", {{"target", "nodefs.available"}}), 1);
  EXPECT_EQ(e.value("pressured_stale_reads_total", {{"target", "pod_usage"}}), 1);
  EXPECT_EQ(e.value("pressured_stale_reads_total", {{"target", "pod_metadata"}}), 1);
  EXPECT_EQ(e.value("pressured_config_reloads_total", {{"result", "success"}}), 1);
  EXPECT_EQ(e.value("pressured_config_reloads_total", {{"result", "failure"}}), 1);
  EXPECT_EQ(e.value("pressured_config_last_reload_successful"), 0);
  EXPECT_EQ(e.value("pressured_checkpoint_writes_total", {{"result", "success"}}), 2);
  EXPECT_EQ(e.value("pressured_checkpoint_writes_total", {{"result", "failure"}}), 0);
  EXPECT_EQ(e.value("pressured_observations_total"), 2);
}

TEST_F(ServedMetrics, BpfAttachModeReplacesPreviousSeries) {
  start();
  metrics_->bpf_attach("memcg_charge", "fentry", "");
  metrics_->bpf_attach("oom_victim", "raw_tp", "tp_btf: EPERM");
  metrics_->bpf_attach("memcg_charge", "off", "fentry: EPERM; kprobe: not supported");
  auto e = scrape();
  auto charge = e.find("pressured_bpf_program_info", {{"program", "memcg_charge"}});
  ASSERT_EQ(charge.size(), 1u);
  EXPECT_EQ(charge[0].labels.at("mode"), "off");
  EXPECT_EQ(charge[0].labels.at("reason"), "fentry: EPERM; kprobe: not supported");
  EXPECT_EQ(charge[0].value, 1);
  EXPECT_EQ(e.value("pressured_bpf_program_info", {{"program", "oom_victim"}, {"mode", "raw_tp"}}), 1);
}

TEST_F(ServedMetrics, BpfLoadRefusalsAreCountedPerProgramAndFlavour) {
  start();
  metrics_->add(stats::kBpfLoadRefusals, {"memcg_charge", "fentry"});
  metrics_->add(stats::kBpfLoadRefusals, {"memcg_charge", "fentry"});
  metrics_->add(stats::kBpfLoadRefusals, {"memstall_enter", "kprobe"});
  auto e = scrape();
  EXPECT_EQ(e.value("pressured_bpf_load_refusals_total", {{"program", "memcg_charge"}, {"flavour", "fentry"}}), 2);
  EXPECT_EQ(e.value("pressured_bpf_load_refusals_total", {{"program", "memstall_enter"}, {"flavour", "kprobe"}}), 1);
}

TEST_F(ServedMetrics, BuildInfoAndNodeLabelOnEverySeries) {
  start();
  metrics_->signal_observed(Signal::MemoryAvailable, 1, 2);
  auto e = scrape();
  EXPECT_EQ(e.value("pressured_build_info", {{"version", build_info::kVersion}}), 1);
  EXPECT_GT(*e.value("pressured_start_time_seconds"), 1.6e9);
  ASSERT_FALSE(e.samples.empty());
  for (const auto& s : e.samples) {
    EXPECT_EQ(s.name.rfind("pressured_", 0), 0u) << s.name;
    ASSERT_TRUE(s.labels.count("node")) << s.name;
    EXPECT_EQ(s.labels.at("node"), "node-a");
  }
}

TEST_F(ServedMetrics, TopPodsAreBoundedAndLeaversRemoved) {
  start(options(5));
  std::vector<PodMemorySample> pods;
  for (int i = 0; i < 50; ++i) {
    PodMemorySample p;
    p.namespace_ = "ns";
    p.pod = fmt::format("p{}", i);
    p.uid = fmt::format("u{}", i);
    p.qos = i % 2 ? QosClass::Burstable : QosClass::BestEffort;
    p.working_set_bytes = 1000.0 * i;
    p.memory_request_bytes = i % 2 ? 500.0 * i : 0;
    pods.push_back(p);
  }
  metrics_->update_pods(pods);
  auto e = scrape();
  auto ws = e.find("pressured_pod_memory_working_set_bytes");
  ASSERT_EQ(ws.size(), 5u);
  std::set<std::string> got;
  for (const auto& s : ws) got.insert(s.labels.at("pod"));
  EXPECT_EQ(got, (std::set<std::string>{"p45", "p46", "p47", "p48", "p49"}));
  EXPECT_EQ(e.value("pressured_pod_memory_working_set_bytes",
                    {{"namespace", "ns"}, {"pod", "p49"}, {"uid", "u49"}, {"qos_class", "Burstable"}}),
            49000);
  EXPECT_EQ(e.value("pressured_pod_memory_request_bytes", {{"pod", "p49"}}), 24500);
  EXPECT_EQ(e.value("pressured_pod_memory_usage_over_request_ratio", {{"pod", "p49"}}), 2);
  // No request: no ratio series (it would be infinite).
  EXPECT_EQ(e.value("pressured_pod_memory_request_bytes", {{"pod", "p48"}}), 0);
  EXPECT_TRUE(e.find("pressured_pod_memory_usage_over_request_ratio", {{"pod", "p48"}}).empty());
  EXPECT_EQ(e.find("pressured_pod_memory_usage_over_request_ratio").size(), 3u);  // p45, p47, p49

  // p0 grows to the top and p49 leaves the node: p0 and p45..p48 remain.
  pods[0].working_set_bytes = 1e9;
  pods.pop_back();
  metrics_->update_pods(pods);
  e = scrape();
  got.clear();
  for (const auto& s : e.find("pressured_pod_memory_working_set_bytes")) got.insert(s.labels.at("pod"));
  EXPECT_EQ(got, (std::set<std::string>{"p0", "p45", "p46", "p47", "p48"}));
  EXPECT_EQ(e.find("pressured_pod_memory_request_bytes").size(), 5u);
  EXPECT_TRUE(e.find("pressured_pod_memory_usage_over_request_ratio", {{"pod", "p49"}}).empty());
  EXPECT_TRUE(e.find("pressured_pod_memory_request_bytes", {{"pod", "p49"}}).empty());
  EXPECT_TRUE(e.find("pressured_pod_memory_working_set_bytes", {{"pod", "p49"}}).empty());
  EXPECT_EQ(e.value("pressured_pod_memory_working_set_bytes", {{"pod", "p0"}}), 1e9);

  // Many rounds of churn never exceed the bound.
  for (int round = 0; round < 20; ++round) {
    for (auto& p : pods) p.working_set_bytes = static_cast<double>((std::hash<std::string>{}(p.uid) + round * 7919) % 100000);
    metrics_->update_pods(pods);
  }
  e = scrape();
  EXPECT_EQ(e.find("pressured_pod_memory_working_set_bytes").size(), 5u);
  EXPECT_EQ(e.find("pressured_pod_memory_request_bytes").size(), 5u);
  EXPECT_LE(e.find("pressured_pod_memory_usage_over_request_ratio").size(), 5u);

  metrics_->update_pods({});
  e = scrape();
  EXPECT_TRUE(e.find("pressured_pod_memory_working_set_bytes").empty());
  EXPECT_TRUE(e.find("pressured_pod_memory_usage_over_request_ratio").empty());
}

TEST_F(ServedMetrics, PodReclaimActivityFollowsTheTrackedTotals) {
  start(options(2));
  std::vector<PodMemorySample> pods(3);
  for (int i = 0; i < 3; ++i) {
    pods[i].namespace_ = "ns";
    pods[i].pod = "p" + std::to_string(i);
    pods[i].uid = "u" + std::to_string(i);
    pods[i].working_set_bytes = 100.0 * (i + 1);
  }
  pods[2].activity = MemcgActivitySample{1000, 800, 50, 0.25};
  pods[0].activity = MemcgActivitySample{7, 7, 7, 7};  // not in the top 2: no series
  // p1 untracked (no BPF for it): no activity series.
  metrics_->update_pods(pods);
  metrics_->memcg_activity("kubepods", MemcgActivitySample{5000, 4000, 300, 2});
  metrics_->memcg_activity("burstable", MemcgActivitySample{10, 9, 8, 0.5});
  auto e = scrape();
  EXPECT_EQ(e.value("pressured_pod_reclaim_scanned_pages_total", {{"pod", "p2"}}), 1000);
  EXPECT_EQ(e.value("pressured_pod_reclaim_stolen_pages_total", {{"pod", "p2"}}), 800);
  EXPECT_EQ(e.value("pressured_pod_workingset_refaults_total", {{"pod", "p2"}}), 50);
  EXPECT_EQ(e.value("pressured_pod_memstall_seconds_total", {{"pod", "p2"}}), 0.25);
  EXPECT_EQ(e.find("pressured_pod_reclaim_scanned_pages_total").size(), 1u) << "only tracked top pods";
  EXPECT_TRUE(e.find("pressured_pod_reclaim_scanned_pages_total", {{"pod", "p0"}}).empty());
  EXPECT_EQ(e.value("pressured_kubepods_reclaim_scanned_pages_total", {{"cgroup", "kubepods"}}), 5000);
  EXPECT_EQ(e.value("pressured_kubepods_memstall_seconds_total", {{"cgroup", "burstable"}}), 0.5);
  EXPECT_EQ(e.types.at("pressured_pod_reclaim_scanned_pages_total"), "counter");

  // Totals grow: the counters follow; a lower total (re-tracked) never decreases a counter.
  pods[2].activity = MemcgActivitySample{1500, 900, 60, 1.0};
  metrics_->update_pods(pods);
  metrics_->memcg_activity("kubepods", MemcgActivitySample{4000, 4000, 300, 2});
  e = scrape();
  EXPECT_EQ(e.value("pressured_pod_reclaim_scanned_pages_total", {{"pod", "p2"}}), 1500);
  EXPECT_EQ(e.value("pressured_pod_memstall_seconds_total", {{"pod", "p2"}}), 1.0);
  EXPECT_EQ(e.value("pressured_kubepods_reclaim_scanned_pages_total", {{"cgroup", "kubepods"}}), 5000);

  // Untracked again, or gone: the series go.
  pods[2].activity.reset();
  metrics_->update_pods(pods);
  e = scrape();
  EXPECT_TRUE(e.find("pressured_pod_reclaim_scanned_pages_total").empty());
  pods[2].activity = MemcgActivitySample{1, 1, 1, 1};
  metrics_->update_pods(pods);
  metrics_->update_pods({});
  e = scrape();
  EXPECT_TRUE(e.find("pressured_pod_workingset_refaults_total").empty());
}

TEST_F(ServedMetrics, PodLabelsChangeWhenMetadataArrives) {
  start(options(3));
  PodMemorySample p;
  p.uid = "u1";
  p.working_set_bytes = 10;
  metrics_->update_pods({p});
  auto e = scrape();
  ASSERT_EQ(e.find("pressured_pod_memory_working_set_bytes").size(), 1u);
  p.namespace_ = "ns";
  p.pod = "web";
  metrics_->update_pods({p});
  e = scrape();
  auto ws = e.find("pressured_pod_memory_working_set_bytes");
  ASSERT_EQ(ws.size(), 1u);
  EXPECT_EQ(ws[0].labels.at("pod"), "web");
}

TEST_F(ServedMetrics, HealthzAndReadyzTransitions) {
  MetricsOptions o = options();
  o.liveness_timeout = std::chrono::milliseconds(200);
  start(o);
  const uint16_t port = server_->port();
  EXPECT_EQ(get(port, "/healthz").status, 200);  // no heartbeat yet: alive
  auto r = get(port, "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("not ready"), std::string::npos);
  EXPECT_EQ(scrape().value("pressured_ready"), 0);

  metrics_->set_events_attached(true);
  EXPECT_EQ(get(port, "/readyz").status, 503);  // attached, no observation yet
  metrics_->observation_completed();
  EXPECT_EQ(get(port, "/readyz").status, 200);
  EXPECT_TRUE(metrics_->ready());
  EXPECT_EQ(scrape().value("pressured_ready"), 1);
  metrics_->set_events_attached(false);  // detached (shutdown): not ready again
  EXPECT_EQ(get(port, "/readyz").status, 503);
  EXPECT_EQ(scrape().value("pressured_ready"), 0);

  metrics_->heartbeat();
  EXPECT_EQ(get(port, "/healthz").status, 200);
  // Bounded wait for the heartbeat to go stale.
  int status = 0;
  for (int i = 0; i < 50 && status != 503; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    status = get(port, "/healthz").status;
  }
  EXPECT_EQ(status, 503);
  EXPECT_FALSE(metrics_->alive());
  metrics_->heartbeat();
  EXPECT_EQ(get(port, "/healthz").status, 200);
  EXPECT_EQ(get(port, "/nope").status, 404);
}

// A node whose pods have no metadata is not protected: /readyz waits for the
// pod source's first delivery, and says so in its own gauge.
TEST_F(ServedMetrics, ReadyzWaitsForThePodSourcesFirstDelivery) {
  start(options());
  const uint16_t port = server_->port();
  metrics_->set_events_attached(true);
  metrics_->observation_completed();
  EXPECT_EQ(scrape().value("pressured_pod_source_synced"), 1) << "no source: nothing to wait for";
  std::atomic<bool> delivered{false};
  metrics_->require_pod_source([&] { return delivered.load(); });
  EXPECT_EQ(get(port, "/readyz").status, 503);
  EXPECT_FALSE(metrics_->ready());
  auto e = scrape();
  EXPECT_EQ(e.value("pressured_pod_source_synced"), 0);
  EXPECT_EQ(e.value("pressured_ready"), 0);
  delivered = true;  // on the source's own thread, in the daemon
  EXPECT_EQ(get(port, "/readyz").status, 200);
  e = scrape();
  EXPECT_EQ(e.value("pressured_pod_source_synced"), 1);
  EXPECT_EQ(e.value("pressured_ready"), 1);
  metrics_->require_pod_source({});  // before the source is released
}

TEST(MetricsServer, StopIsIdempotentAndFreesThePort) {
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0");
  ASSERT_TRUE(s.ok()) << s.error().message;
  const uint16_t port = s.value()->port();
  EXPECT_EQ(s.value()->address(), "127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(get(port, "/healthz").status, 200);
  s.value()->stop();
  s.value()->stop();
  EXPECT_EQ(get(port, "/healthz").status, 0);  // nothing listens any more
}

TEST(MetricsServer, PortInUseIsAClearError) {
  // Hold a loopback port with a plain socket.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string addr = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));

  Metrics m(options());
  auto s = MetricsServer::start(m, addr);
  ::close(fd);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find(addr), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("in use"), std::string::npos) << s.error().message;
  EXPECT_EQ(s.error().code, EADDRINUSE);
}

TEST(MetricsServer, UnresolvableHostIsAnError) {
  Metrics m(options());
  auto s = MetricsServer::start(m, "256.1.1.1:0");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("256.1.1.1"), std::string::npos) << s.error().message;
}

// The parser itself is tested with the config library (tests/config/listen_address_test.cpp);
// here, that the server reports a bad address in an operator's words.
TEST(MetricsServer, BadListenAddressIsAnError) {
  Metrics m(options());
  for (const char* bad : {"", "9847", "host:", "host:65536", "::1:80", "[::1", "h:80x"}) {
    auto s = MetricsServer::start(m, bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.error().code, EINVAL) << bad;
    const std::string expected = std::string("invalid metrics listen address \"").append(bad).append("\"");
    EXPECT_NE(s.error().message.find(expected), std::string::npos) << s.error().message;
  }
}

TEST(Metrics, NamesListCoversEverythingRendered) {
  Metrics m(options());
  // Touch every family so each appears in the exposition.
  EvictionConfig cfg;
  cfg.thresholds = {Threshold{}};
  m.set_thresholds(cfg);
  m.signal_observed(Signal::MemoryAvailable, 1, 2);
  m.condition(Condition::DiskPressure, true);
  m.observation_completed();
  m.eviction(Signal::MemoryAvailable, QosClass::BestEffort, ThresholdKind::Hard, "n", "p", "u");
  m.add(stats::kEvictionContainers, {"app"});
  m.add(stats::kEvictionNoCandidates, {Signal::MemoryAvailable});
  m.observe(stats::kEvictionLatency, {ThresholdKind::Hard}, 1);
  m.add(stats::kLocalKills, {result_name(true)});
  m.add(stats::kEvictionPolicyActions, {"stuck"});
  m.add(stats::kKubernetesApiRequests, {ApiAction::Event, ApiOutcome::Success});
  m.add(stats::kKernelOomKills, {QosClass::Guaranteed, OomScope::Node});
  m.observe(stats::kDetectionLatency, {"bpf"}, 0.001);
  m.observe(stats::kReclaimDuration, {}, 0.02);
  for (const auto* f : {&stats::kPluginCalls, &stats::kPluginTimeouts, &stats::kPluginErrors, &stats::kPluginVetoes,
                        &stats::kPluginProposals}) {
    m.add(*f, {"protect"}, 0);
  }
  EventStats events;  // the families components export (as pressured_metric_names does)
  ObserverCounters observer;
  DaemonStats daemon;
  const StatsExport events_export = export_stats(m, events);
  const StatsExport observer_export = export_stats(m, observer);
  const StatsExport daemon_export = export_stats(m, daemon);
  events.count_event(EventSource::Bpf, EventType::CgroupMkdir);
  m.bpf_attach("p", "raw_tp", "");
  m.add(stats::kBpfLoadRefusals, {"p", "fentry"});
  m.add(stats::kStaleReads, {Signal::MemoryAvailable});
  m.add(stats::kConfigReloads, {result_name(true)});
  m.set(stats::kConfigLastReloadSuccessful, {}, 1);
  m.update_pods({PodMemorySample{"n", "p", "u", QosClass::Burstable, 10, 5, MemcgActivitySample{1, 1, 1, 0.5}}});
  m.memcg_activity("kubepods", MemcgActivitySample{2, 2, 2, 1});
  m.reactor_dispatch_latency({0.001}, {1, 0}, 0.0005);
  auto e = parse_exposition(m.render());
  ASSERT_TRUE(e.errors.empty());
  const auto names = m.metric_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  std::set<std::string> rendered;
  for (const auto& s : e.samples) rendered.insert(s.name);
  // Named apart, so that a failure says which series is missing where.
  const std::set<std::string> listed(names.begin(), names.end());
  std::vector<std::string> only_rendered, only_listed;
  std::set_difference(rendered.begin(), rendered.end(), listed.begin(), listed.end(), std::back_inserter(only_rendered));
  std::set_difference(listed.begin(), listed.end(), rendered.begin(), rendered.end(), std::back_inserter(only_listed));
  EXPECT_TRUE(only_rendered.empty()) << "rendered, not listed: " << ::testing::PrintToString(only_rendered);
  EXPECT_TRUE(only_listed.empty()) << "listed, not rendered by this test: " << ::testing::PrintToString(only_listed);
  for (const auto& n : names) {
    const bool suffix_ok = n.ends_with("_total") || n.ends_with("_bytes") || n.ends_with("_seconds") ||
                           n.ends_with("_info") || n.ends_with("_ratio") || n.ends_with("_bucket") ||
                           n.ends_with("_sum") || n.ends_with("_count") || n == "pressured_ready" ||
                           n == "pressured_pod_source_synced" ||  // 0/1 like ready, which it gates
                           n == "pressured_psi_available" ||  // 0/1: /proc/pressure was found
                           n.starts_with("pressured_signal_") || n == "pressured_node_condition" ||
                           n == "pressured_config_last_reload_successful" ||
                           n == "pressured_pods_unevictable_without_metadata" ||  // counts of pods
                           n == "pressured_observer_pods_without_metadata" ||
                           n == "pressured_observer_metadata_without_cgroup" ||
                           n.ends_with("_enabled");  // 0/1 state, no unit
    EXPECT_TRUE(suffix_ok) << n;
  }
  // Counters end in _total (Prometheus naming).
  for (const auto& [family, type] : e.types) {
    if (type == "counter") {
      EXPECT_TRUE(family.ends_with("_total")) << family;
    }
  }
}

TEST(Metrics, ConcurrentUpdatesAreSafe) {
  Metrics m(options(4));
  EventStats events;  // counted on other threads while render() reads it
  const StatsExport events_export = export_stats(m, events);
  constexpr EventType kTypes[] = {EventType::ThresholdUp, EventType::MemcgReclaimBegin, EventType::CgroupRmdir};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m, &events, &kTypes, t] {
      for (int i = 0; i < 2000; ++i) {
        events.count_event(EventSource::Bpf, kTypes[i % 3]);
        m.observe(stats::kDetectionLatency, {"psi"}, 1e-4);
        m.signal_observed(Signal::MemoryAvailable, i, 1e6);
        if (i % 100 == 0) {
          std::vector<PodMemorySample> pods(10);
          for (int k = 0; k < 10; ++k) {
            pods[k].uid = std::to_string(t) + "-" + std::to_string((k + i) % 13);
            pods[k].working_set_bytes = k * i;
          }
          m.update_pods(pods);
          (void)m.render();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  auto e = parse_exposition(m.render());
  double total = 0;
  for (const auto& s : e.find("pressured_events_total", {{"source", "bpf"}})) total += s.value;
  EXPECT_EQ(total, 8000);
  EXPECT_EQ(e.value("pressured_detection_latency_seconds_count", {{"source", "psi"}}), 8000);
  EXPECT_LE(e.find("pressured_pod_memory_working_set_bytes").size(), 4u);
}

}  // namespace
}  // namespace pressured

namespace pressured {
namespace {

TEST(MetricsOptions, FromConfig) {
  Config c;
  c.kubernetes.node_name = "worker-7";
  c.metrics.top_pods = 7;
  auto o = MetricsOptions::from_config(c);
  EXPECT_EQ(o.node, "worker-7");
  EXPECT_EQ(o.top_pods, 7u);
  EXPECT_EQ(o.liveness_timeout, std::chrono::seconds(30));
  c.events.safety_net_interval = std::chrono::seconds(20);
  EXPECT_EQ(MetricsOptions::from_config(c).liveness_timeout, std::chrono::seconds(100));
  c.kubernetes.node_name.clear();
  EXPECT_FALSE(MetricsOptions::from_config(c).node.empty());  // the hostname
}

}  // namespace
}  // namespace pressured
