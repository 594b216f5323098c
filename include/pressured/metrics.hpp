#pragma once
// Prometheus metrics and the HTTP endpoint (/metrics, /healthz, /readyz).
//
// `Metrics` serves the families declared in pressured/metric_families.hpp: a
// fact is one call naming its family and the values of its labels
// (`add`, `set`, `observe`, checked when it compiles), and the series whose
// set follows the node's state (signals, thresholds, conditions, recent
// victims, top pods, BPF programs) have a method each that keeps that state.
// Every series is named `pressured_*` and carries a constant `node` label.
// This header knows nothing of the events, observation or daemon code, and
// nothing of prometheus-cpp either (the registry lives in the implementation).
// Every method is thread-safe and cheap (no allocation on the counting paths
// after a series' first call): the reactor thread may call them.
//
// How a family is declared: docs/metrics.md; what operators read of each:
// docs/operations.md.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/config.hpp"
#include "pressured/enum_names.hpp"
#include "pressured/listen_address.hpp"
#include "pressured/metric_families.hpp"
#include "pressured/result.hpp"
#include "pressured/signals.hpp"
#include "pressured/snapshot.hpp"
#include "pressured/stats.hpp"

namespace pressured {

/// The Kubernetes API calls the daemon makes, for outcome counting.
enum class ApiAction : uint8_t {
  Eviction,    // POST pods/eviction (policy/v1)
  Delete,      // DELETE pod (fallback when the eviction is refused)
  Event,       // POST/PATCH events
  NodeStatus,  // PATCH nodes/status (pressured's conditions)
  ListPods,    // GET pods on this node
  PodStatus,   // PATCH pods/status (the evicted pod's Failed phase and DisruptionTarget condition)
  NodeEvent,   // POST the node's EvictionThresholdMet event
};

/// How a Kubernetes API call ended.
enum class ApiOutcome : uint8_t {
  Success,          // 2xx
  NotFound,         // 404: the pod is already gone
  Conflict,         // 409: uid precondition failed
  TooManyRequests,  // 429: eviction refused (disruption budget) or throttled
  ClientError,      // other 4xx
  ServerError,      // 5xx
  Timeout,          // no answer within the request timeout
  Unreachable,      // connection refused, DNS, TLS
};

/// Label values of pressured_api_requests_total{action, outcome}.
inline constexpr EnumName<ApiAction> kApiActionNames[] = {
    {ApiAction::Eviction, "eviction"},     {ApiAction::Delete, "delete"},
    {ApiAction::Event, "event"},           {ApiAction::NodeStatus, "node_status"},
    {ApiAction::ListPods, "list_pods"},    {ApiAction::PodStatus, "pod_status"},
    {ApiAction::NodeEvent, "node_event"},
};
inline constexpr EnumName<ApiOutcome> kApiOutcomeNames[] = {
    {ApiOutcome::Success, "success"},
    {ApiOutcome::NotFound, "not_found"},
    {ApiOutcome::Conflict, "conflict"},
    {ApiOutcome::TooManyRequests, "too_many_requests"},
    {ApiOutcome::ClientError, "client_error"},
    {ApiOutcome::ServerError, "server_error"},
    {ApiOutcome::Timeout, "timeout"},
    {ApiOutcome::Unreachable, "unreachable"},
};

/// Label values of the enums above and of a threshold's type, for
/// LabelValues (pressured/stats.hpp).
constexpr std::string_view name(ApiAction a) { return enum_name(kApiActionNames, a); }
constexpr std::string_view name(ApiOutcome o) { return enum_name(kApiOutcomeNames, o); }
constexpr std::string_view name(ThresholdKind k) { return k == ThresholdKind::Hard ? "hard" : "soft"; }
/// The `result` label value of something that worked or not.
constexpr std::string_view result_name(bool ok) { return ok ? "success" : "failure"; }

/// Maps an HTTP status code to an ApiOutcome (2xx Success, 404, 409, 429,
/// other 4xx, 5xx; anything else counts as ClientError).
ApiOutcome api_outcome_from_http_status(int status);

/// Reclaim and stall activity of a memory cgroup (pod, kubepods, QoS tier),
/// summed over it and its descendants since the daemon began tracking it
/// (BPF; see Reactor::track_memcg). Monotonic.
struct MemcgActivitySample {
  double reclaim_scanned_pages = 0;  // pages scanned by reclaim
  double reclaim_stolen_pages = 0;   // pages reclaimed
  double workingset_refaults = 0;    // refaults of recently evicted pages (thrashing)
  double memstall_seconds = 0;       // time its tasks were stalled on memory
};

/// One pod's memory numbers, as handed to Metrics::update_pods().
struct PodMemorySample {
  std::string namespace_;  // empty when metadata is unknown
  std::string pod;         // empty when metadata is unknown
  std::string uid;
  QosClass qos = QosClass::BestEffort;
  double working_set_bytes = 0;
  double memory_request_bytes = 0;  // 0: no request (usage-over-request is not exported)
  std::optional<MemcgActivitySample> activity;  // nullopt: not tracked (no BPF): no activity series
};

/// Construction-time settings.
struct MetricsOptions {
  std::string node;             // value of the constant `node` label on every series
  uint32_t top_pods = 20;       // per-pod series are kept for this many pods only
  uint32_t recent_evictions = 10;  // victims kept in pressured_eviction_last_timestamp_seconds
  Duration liveness_timeout = std::chrono::seconds(30);  // see Metrics::heartbeat()

  /// Options from the configuration: top_pods from MetricsConfig, node from
  /// K8sConfig::node_name (the hostname when that is empty), liveness_timeout
  /// at least 30 s and 5 safety-net/poll intervals.
  static MetricsOptions from_config(const Config& config);
};

class Metrics;
class Health;  // metrics/health.hpp

/// A component's stats as registered with Metrics::export_counters: the
/// series stay, and follow the stats while this handle lives. Destroying it
/// copies the last values in and stops reading the stats (so a component may
/// go before its Metrics; its gauges keep their last value); destroying the
/// Metrics first is safe too. Move-only.
class StatsExport {
 public:
  StatsExport() = default;
  ~StatsExport();
  StatsExport(StatsExport&& other) noexcept;
  StatsExport& operator=(StatsExport&& other) noexcept;
  StatsExport(const StatsExport&) = delete;
  StatsExport& operator=(const StatsExport&) = delete;

  /// Whether stats are registered through this handle.
  bool active() const { return id_ != 0; }

 private:
  friend class Metrics;
  struct Table;
  StatsExport(std::weak_ptr<Table> table, uint64_t id) : table_(std::move(table)), id_(id) {}
  void release();
  std::weak_ptr<Table> table_;
  uint64_t id_ = 0;
};

/// The daemon's metrics. Build one in main()/run and pass it down by reference.
class Metrics {
 public:
  explicit Metrics(MetricsOptions options);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // --- Counts into declared families ------------------------------------------
  // One fact, one call: a family of pressured/metric_families.hpp and the
  // values of its labels in the declared order, e.g.
  //   metrics.add(stats::kLocalKills, {result_name(ok)});
  //   metrics.observe(stats::kDetectionLatency, {source}, seconds);
  // A family of the wrong kind, or one label value too many or too few, does
  // not compile. A series is created by its first call (`add` by 0 creates it
  // at 0, for alerts that take increase()); after that a call takes a short
  // lock and allocates nothing. Values are bounded as the family declares
  // (cut, folded to an identifier, capped with an overflow value).

  /// Adds `by` to a counter family's series.
  template <std::size_t N>
  void add(const FamilyDef<StatKind::Counter, N>& family, const LabelValues<N>& labels, double by = 1) {
    record(family.index, labels.values, by);
  }
  /// Sets a gauge family's series.
  template <std::size_t N>
  void set(const FamilyDef<StatKind::Gauge, N>& family, const LabelValues<N>& labels, double value) {
    record(family.index, labels.values, value);
  }
  /// Observes one value into a histogram family's series.
  template <std::size_t N>
  void observe(const FamilyDef<StatKind::Histogram, N>& family, const LabelValues<N>& labels, double value) {
    record(family.index, labels.values, value);
  }

  // --- Signals, thresholds, conditions -------------------------------------

  /// A fresh observation of a signal: value and capacity in the signal's unit
  /// (bytes, inodes, pids, or percent for PSI). Also re-resolves percentage
  /// thresholds of that signal against the new capacity.
  /// -> pressured_signal_value, pressured_signal_capacity {signal, unit}
  void signal_observed(Signal signal, double value, double capacity);

  /// The configured thresholds (at startup and after every reload); series of
  /// thresholds that no longer exist are removed. Percentage thresholds are
  /// exported once the signal's capacity is known.
  /// -> pressured_signal_threshold {signal, unit, threshold_type="hard|soft"}
  void set_thresholds(const EvictionConfig& config);

  /// The node condition as the engine decided it (after every evaluation).
  /// Counts a transition when the value flips.
  /// -> pressured_node_condition {condition} 0/1,
  ///    pressured_node_condition_transitions_total {condition}
  void condition(Condition condition, bool status);

  /// One fresh observation plus engine evaluation completed. The first one
  /// is half of readiness (see ready()).
  /// -> pressured_observations_total
  void observation_completed();

  // --- Evictions -------------------------------------------------------------

  /// The engine chose a victim. Counted, and remembered among the most recent
  /// victims (the dashboard's "latest victims" table; bounded series).
  /// -> pressured_evictions_total {signal, qos_class, threshold_type},
  ///    pressured_eviction_last_timestamp_seconds {namespace, pod, uid, signal, qos_class, threshold_type}
  void eviction(Signal signal, QosClass qos, ThresholdKind kind, std::string_view namespace_, std::string_view pod,
                std::string_view uid);
  /// The same with the `signal` label given as text: a local ephemeral-storage
  /// eviction is labelled with its rule ("emptydirfs.limit", as the kubelet's
  /// evictions metric); those series appear with the first such eviction.
  void eviction(std::string_view reason, QosClass qos, ThresholdKind kind, std::string_view namespace_,
                std::string_view pod, std::string_view uid);

  // --- Event path ------------------------------------------------------------

  /// The reactor's own dispatch latency (kernel event timestamp -> handler),
  /// which the reactor keeps in plain atomics (EventStats) so its path never
  /// touches the metrics library. Takes running totals: per-bucket counts
  /// (not cumulative; one more than `bounds_seconds`, the last is +Inf) and
  /// the sum; each call adds what is new since the previous one. Call it from
  /// an on_render hook. `bounds_seconds` must not change between calls.
  /// -> pressured_reactor_dispatch_latency_seconds (histogram, 10 us..1 s)
  void reactor_dispatch_latency(const std::vector<double>& bounds_seconds, const std::vector<uint64_t>& bucket_totals,
                                double sum_seconds);

  // Events received, ring-buffer losses, resyncs after them and safety-net
  // polls are counted by the reactor (EventStats, pressured/events.hpp) and
  // exported with export_stats; missed crossings by the daemon (DaemonStats).

  /// How a BPF program was attached (mode: "tp_btf", "raw_tp", "fentry",
  /// "kprobe", "tracepoint", "off") and why (e.g. "fentry: EPERM"; empty when
  /// the preferred mode worked). Replaces the program's previous series.
  /// -> pressured_bpf_program_info {program, mode, reason} 1
  void bpf_attach(std::string_view program, std::string_view mode, std::string_view reason);

  // --- Pods -------------------------------------------------------------------
  // What the observer counts of its reads (degraded reads, pods without
  // metadata, pods unevictable for lack of it) is in ObserverCounters
  // (pressured/observer.hpp), exported with export_stats.

  /// The current pods. Only the `top_pods` with the largest working set get
  /// series; series of pods that left the top are removed.
  /// -> pressured_pod_memory_working_set_bytes, pressured_pod_memory_request_bytes,
  ///    pressured_pod_memory_usage_over_request_ratio {namespace, pod, uid, qos_class}
  /// and, for top pods with `activity`:
  /// -> pressured_pod_reclaim_scanned_pages_total, pressured_pod_reclaim_stolen_pages_total,
  ///    pressured_pod_workingset_refaults_total, pressured_pod_memstall_seconds_total (counters)
  void update_pods(const std::vector<PodMemorySample>& pods);

  /// Node-level reclaim activity of the pods' cgroups: `cgroup` is
  /// "kubepods" (all pods), or a QoS tier ("burstable", "besteffort").
  /// Values are the totals since tracking began (the counters follow them).
  /// -> pressured_kubepods_reclaim_scanned_pages_total, pressured_kubepods_reclaim_stolen_pages_total,
  ///    pressured_kubepods_workingset_refaults_total, pressured_kubepods_memstall_seconds_total {cgroup}
  void memcg_activity(std::string_view cgroup, const MemcgActivitySample& activity);

  // --- Health -----------------------------------------------------------------

  /// Events are attached (BPF, or the PSI/notification fallback) or not.
  void set_events_attached(bool attached);
  /// Runs `hook` at the start of every render(), on the rendering thread:
  /// copies values that other components keep outside Metrics (e.g. the
  /// reactor's latency totals) in at scrape time. Whatever the hook reads
  /// must outlive this Metrics or its server.
  void on_render(std::function<void()> hook);

  /// Registers stats a component keeps itself (declared with
  /// PRESSURED_DECLARE_STATS, pressured/stats.hpp; see export_stats below):
  /// each series is created at 0 now (a counter `from_first_count`: with its
  /// first count) and follows its stat at every render(): a counter adds
  /// what its total gained (several components may feed one series), a gauge
  /// takes the value. Families that do not exist yet are registered with the
  /// given help. Programming errors, std::logic_error: a name already used by
  /// a family of another type, a counter not ending in _total or a gauge
  /// ending in it, an unparsable label list, a gauge series another live
  /// export already sets.
  [[nodiscard]] StatsExport export_counters(std::span<const ExternalStat> stats);

  /// Readiness also waits for the pod metadata source: `delivered` answers
  /// whether it has delivered a pod list yet. Until then no pod has
  /// metadata and the node is not protected, so the DaemonSet must show it
  /// NotReady. Called at every /readyz and scrape, from the server's thread:
  /// cheap, thread-safe, and alive as long as this Metrics.
  /// -> pressured_pod_source_synced 0/1 (1 without a source)
  void require_pod_source(std::function<bool()> delivered);

  /// Ready: events attached, at least one observation completed, and the
  /// pod source (require_pod_source) delivered.
  /// -> pressured_ready 0/1, served as /readyz
  bool ready() const;

  /// The reactor is alive. Call it every loop iteration; once called at least
  /// once, /healthz fails when no heartbeat came within liveness_timeout.
  void heartbeat();

  /// /healthz: true unless heartbeats started and stopped.
  bool alive() const;

  /// The facts above, which the metrics port's probes read (metrics/health.hpp).
  const Health& health() const;

  // --- Exposition -------------------------------------------------------------

  /// The Prometheus text exposition (format 0.0.4) of every series.
  std::string render() const;

  /// Every sample name this class can export (histograms expanded to
  /// _bucket/_sum/_count), sorted. For the dashboard and rule validators.
  std::vector<std::string> metric_names() const;

 private:
  struct Impl;
  void record(uint16_t family, std::span<const std::string_view> labels, double value);
  std::unique_ptr<Impl> impl_;
};

/// Exports every stat of a PRESSURED_DECLARE_STATS struct into `metrics`
/// (the series its declaration names, plus those of its extra_stats() when
/// it has one). Keep the handle beside `stats`, and declared after it, so it
/// goes first.
template <typename Stats>
[[nodiscard]] StatsExport export_stats(Metrics& metrics, const Stats& stats) {
  return metrics.export_counters(stat_list(stats));
}

/// TLS and authentication for the metrics port, read from a web
/// configuration file in node_exporter's format (docs/operations.md):
///   tls_server_config: {cert_file: ..., key_file: ..., min_version: VersionTLS12|VersionTLS13}
///   basic_auth_users: {user: <bcrypt hash>}
///   bearer_token_file: <file holding one token>   (pressured's addition)
/// /healthz and /readyz never require authentication (probes reveal
/// nothing); /metrics requires it when users or a token are configured.
struct WebConfig {
  std::string cert_file;  // PEM certificate chain; TLS when set (with key_file)
  std::string key_file;   // PEM private key
  std::string min_version;  // "VersionTLS12" (also when empty) or "VersionTLS13"
  std::vector<std::pair<std::string, std::string>> basic_auth_users;  // user -> bcrypt hash ($2a$/$2b$/$2y$)
  std::string bearer_token;  // the token itself (read from bearer_token_file)
  bool tls() const { return !cert_file.empty(); }
  bool auth() const { return !basic_auth_users.empty() || !bearer_token.empty(); }
};

/// Reads and validates a web configuration file; every problem (unknown key,
/// missing file, a hash that is not bcrypt, ...) is an error naming it.
Result<WebConfig> load_web_config(const std::string& path);

/// Bounds that keep the port answering under abuse (see server.cpp).
struct MetricsServerLimits {
  std::size_t max_connections = 128;
  Duration header_timeout = std::chrono::seconds(5);  // accept -> whole request (TLS handshake included)
  Duration write_timeout = std::chrono::seconds(10);  // request -> whole answer written
  std::size_t max_request_bytes = 8192;
  // bcrypt checks of unknown credentials a second, and at most as many
  // waiting or running at once (each takes 50 ms to a second of one core,
  // on a thread of their own).
  unsigned auth_failures_per_second = 5;
};

/// What the server did (pressured/stats.hpp): the daemon exports them into
/// the Metrics the server serves (export_stats(metrics, server->counters())).
#define PRESSURED_METRICS_SERVER_STATS(COUNTER, GAUGE)                                                          \
  COUNTER(accepted, "pressured_metrics_server_connections_total", "",                                         \
          "Connections accepted on the metrics port (each scrape is one, or fewer with keep-alive).")        \
  COUNTER(served, "pressured_metrics_server_answers_total", "",                                               \
          "HTTP answers written in full, error answers (400, 401, 404, 429, 431) included.")                            \
  COUNTER(shed, "pressured_metrics_server_shed_connections_total", "",                                        \
          "Connections closed unanswered at the cap of open connections (the oldest one still sending its "   \
          "request makes room). Rising: something opens connections faster than it scrapes.")        \
  COUNTER(timed_out, "pressured_metrics_server_timed_out_connections_total", "",                              \
          "Connections closed because the request (TLS handshake included) or the answer did not complete "   \
          "in time: slow or stuck clients.")                                                                  \
  COUNTER(rejected, "pressured_metrics_server_rejected_requests_total", "",                                   \
          "Connections that ended without a request pressured could answer: malformed or too large "          \
          "requests, failed TLS handshakes (plain HTTP to a TLS port, or the reverse), connections closed "    \
          "before their request was complete.")                                                               \
  COUNTER(unauthorized, "pressured_metrics_server_unauthorized_requests_total", "",                           \
          "Scrapes of /metrics refused for missing or wrong basic-auth credentials (401), or for too many "  \
          "failed attempts in a second (429).")                                                                      \
  GAUGE(open, "pressured_metrics_server_open_connections", "", "Connections open on the metrics port, now.")
PRESSURED_DECLARE_STATS(MetricsServerCounters, PRESSURED_METRICS_SERVER_STATS);
/// A plain snapshot, for tests and `top`.
using MetricsServerStats = MetricsServerCounters::Values;

/// Serves /metrics, /healthz and /readyz over HTTP(S) on its own thread.
class MetricsServer {
 public:
  /// Binds `listen` and starts serving `metrics` (which must outlive the
  /// server). Errors (bad address, port in use, permission, unusable TLS
  /// files) are returned.
  static Result<std::unique_ptr<MetricsServer>> start(const Metrics& metrics, std::string_view listen,
                                                      const WebConfig& web = {}, MetricsServerLimits limits = {});

  ~MetricsServer();  // stops serving
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  /// The port actually bound (useful with port 0).
  uint16_t port() const;

  /// host:port actually bound.
  std::string address() const;

  /// "http" or "https".
  std::string scheme() const;

  MetricsServerStats stats() const;
  /// The live counters, for export_stats; they live as long as the server.
  const MetricsServerCounters& counters() const;

  /// Stops serving and joins the thread; idempotent.
  void stop();

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pressured
