// Metrics: the prometheus-cpp registry behind pressured's one-method-per-fact
// interface. Families are registered once in the constructor; label sets that
// depend on runtime values are created on first use and cached so repeated
// calls only take a short lock and bump an atomic.

#include "pressured/metrics.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "metrics/health.hpp"
#include "pressured/build_info.hpp"

namespace pressured {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;

// Kernel event to decision: 10 us .. 10 s, 1-2.5-5 steps.
const Histogram::BucketBoundaries& detection_buckets() {
  static const Histogram::BucketBoundaries b{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
                                             2.5e-2, 5e-2, 0.1,  0.25,   0.5,  1,    2.5,    5,    10};
  return b;
}

// Decision to pod gone: 1 ms .. 600 s (soft evictions wait for grace periods).
const Histogram::BucketBoundaries& eviction_buckets() {
  static const Histogram::BucketBoundaries b{1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1,
                                             2.5,  5,      10,   30,   60,     120,  300, 600};
  return b;
}

std::string_view unit_of(Signal s) {
  const auto& i = info(s);
  if (i.is_psi) return "percent";
  switch (i.resource) {
    case StarvedResource::Inodes: return "inodes";
    case StarvedResource::Pids: return "pids";
    default: return "bytes";
  }
}

std::string_view kind_name(ThresholdKind k) { return k == ThresholdKind::Hard ? "hard" : "soft"; }

std::string_view action_name(ApiAction a) { return enum_name(kApiActionNames, a); }
std::string_view outcome_name(ApiOutcome o) { return enum_name(kApiOutcomeNames, o); }

// Free-form identifiers from other concerns become bounded label values.
std::string token(std::string_view in) {
  std::string out;
  out.reserve(std::min<std::size_t>(in.size(), 48));
  for (char c : in) {
    if (out.size() == 48) break;
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    out.push_back(keep ? c : '_');
  }
  return out.empty() ? std::string("unknown") : out;
}

// Free text (reasons) keeps its characters but not unbounded length.
std::string bounded(std::string_view in, std::size_t max = 128) { return std::string(in.substr(0, max)); }

std::string str(std::string_view v) { return std::string(v); }

// The activity values in the order of Impl::pod_activity / kubepods_activity.
std::array<double, 4> activity_values(const MemcgActivitySample& a) {
  return {a.reclaim_scanned_pages, a.reclaim_stolen_pages, a.workingset_refaults, a.memstall_seconds};
}

// Counters that follow a monotonic total kept elsewhere (the BPF map).
void follow(prometheus::Counter& c, double total) {
  const double now = c.Value();
  if (total > now) c.Increment(total - now);
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

ApiOutcome api_outcome_from_http_status(int status) {
  if (status >= 200 && status < 300) return ApiOutcome::Success;
  if (status == 404) return ApiOutcome::NotFound;
  if (status == 409) return ApiOutcome::Conflict;
  if (status == 429) return ApiOutcome::TooManyRequests;
  if (status >= 500 && status < 600) return ApiOutcome::ServerError;
  return ApiOutcome::ClientError;
}

MetricsOptions MetricsOptions::from_config(const Config& config) {
  MetricsOptions o;
  o.node = config.kubernetes.node_name.empty() ? hostname() : config.kubernetes.node_name;
  o.top_pods = config.metrics.top_pods;
  // The reactor wakes at least once per safety-net (or forced poll) interval;
  // liveness must not fail between two quiet wake-ups.
  Duration wake = config.events.safety_net_interval;
  if (config.events.forced_poll_interval) wake = std::max(wake, *config.events.forced_poll_interval);
  o.liveness_timeout = std::max<Duration>(std::chrono::seconds(30), 5 * wake);
  return o;
}

// Stats kept by components (pressured/stats.hpp), each followed by the
// prometheus series it is exported as: at every render a counter gets the
// increase since the last one, so several components may feed one series;
// a gauge takes the value.
struct StatsExport::Table {
  struct Entry {
    uint64_t owner;  // the StatsExport's id
    const std::atomic<uint64_t>* value;
    Counter* counter = nullptr;  // a counter's series; null until its first count when created lazily
    Gauge* gauge = nullptr;      // a gauge's series
    Family<Counter>* family = nullptr;  // where a lazy counter's series is created, with `labels`
    Labels labels;
    uint64_t seen = 0;
  };
  std::mutex mu;
  std::vector<Entry> entries;
  uint64_t next_id = 1;

  static void sync(Entry& e) {
    const uint64_t now = e.value->load(std::memory_order_relaxed);
    if (e.gauge != nullptr) {
      e.gauge->Set(static_cast<double>(now));
      return;
    }
    if (now > e.seen) {
      if (e.counter == nullptr) e.counter = &e.family->Add(e.labels);
      e.counter->Increment(static_cast<double>(now - e.seen));
      e.seen = now;
    }
  }
  void sync_all() {
    std::lock_guard lock(mu);
    for (auto& e : entries) sync(e);
  }
  void release(uint64_t id) {
    std::lock_guard lock(mu);
    for (auto& e : entries) {
      if (e.owner == id) sync(e);
    }
    std::erase_if(entries, [id](const Entry& e) { return e.owner == id; });
  }
};

StatsExport::~StatsExport() { release(); }

StatsExport::StatsExport(StatsExport&& other) noexcept
    : table_(std::move(other.table_)), id_(std::exchange(other.id_, 0)) {}

StatsExport& StatsExport::operator=(StatsExport&& other) noexcept {
  if (this != &other) {
    release();
    table_ = std::move(other.table_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void StatsExport::release() {
  if (id_ == 0) return;
  if (auto t = table_.lock()) t->release(id_);
  id_ = 0;
  table_.reset();
}

namespace {

// "key=value,key=value" (PRESSURED_DECLARE_STATS) into prometheus labels.
Labels parse_stat_labels(std::string_view metric, std::string_view text) {
  Labels out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view pair = text.substr(0, comma);
    const std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == pair.size()) {
      throw std::logic_error("stats: labels of " + std::string(metric) + " are not key=value: " + std::string(pair));
    }
    out.emplace(std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1)));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  return out;
}

}  // namespace

struct Metrics::Impl {
  struct Registered {
    std::string name;
    std::string type;  // counter | gauge | histogram
  };

  MetricsOptions options;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::vector<Registered> names;
  std::map<std::string, Family<Counter>*> counter_families;  // by name, for export_counters
  std::map<std::string, Family<Gauge>*> gauge_families;      // by name, for export_counters
  std::shared_ptr<StatsExport::Table> exports = std::make_shared<StatsExport::Table>();

  template <typename Builder>
  auto& reg(Builder b, const std::string& name, const std::string& help, const char* type) {
    names.push_back({name, type});
    return b.Name(name).Help(help).Labels({{"node", options.node}}).Register(*registry);
  }
  Family<Gauge>& gauge(const std::string& n, const std::string& h) {
    auto& f = reg(prometheus::BuildGauge(), n, h, "gauge");
    gauge_families[n] = &f;
    return f;
  }
  Family<Counter>& counter(const std::string& n, const std::string& h) {
    auto& f = reg(prometheus::BuildCounter(), n, h, "counter");
    counter_families[n] = &f;
    return f;
  }
  Family<Histogram>& histogram(const std::string& n, const std::string& h) {
    return reg(prometheus::BuildHistogram(), n, h, "histogram");
  }

  explicit Impl(MetricsOptions o) : options(std::move(o)), health(options.liveness_timeout) {}

  // Families (constructed in order in Metrics::Metrics).
  Family<Gauge>* build_info = nullptr;
  Family<Gauge>* start_time = nullptr;
  Family<Gauge>* ready_gauge = nullptr;
  Family<Gauge>* pod_source_synced = nullptr;
  Family<Gauge>* signal_value = nullptr;
  Family<Gauge>* signal_capacity = nullptr;
  Family<Gauge>* signal_threshold = nullptr;
  Family<Gauge>* node_condition = nullptr;
  Family<Counter>* condition_transitions = nullptr;
  Family<Counter>* observations = nullptr;
  Family<Counter>* evictions = nullptr;
  Family<Counter>* eviction_containers = nullptr;
  std::set<std::string> eviction_container_names;  // those with a series of their own (under mu)
  Family<Gauge>* eviction_last = nullptr;
  Family<Counter>* no_candidates = nullptr;
  Family<Histogram>* eviction_latency = nullptr;
  Family<Counter>* local_kills = nullptr;
  Family<Counter>* policy_actions = nullptr;
  std::array<Family<Counter>*, 5> plugin_events{};  // by Metrics::PluginEvent
  Family<Counter>* api_requests = nullptr;
  Family<Counter>* oom_kills = nullptr;
  Family<Histogram>* detection_latency = nullptr;
  Family<Histogram>* reactor_latency = nullptr;
  Family<Histogram>* reclaim_duration = nullptr;
  Family<Gauge>* bpf_info = nullptr;
  Family<Counter>* stale_reads = nullptr;
  Family<Counter>* bpf_load_refusals = nullptr;
  Family<Counter>* config_reloads = nullptr;
  Family<Counter>* checkpoint_writes = nullptr;
  Family<Gauge>* config_last_ok = nullptr;
  Family<Gauge>* psi_available = nullptr;
  Family<Gauge>* pod_ws = nullptr;
  Family<Gauge>* pod_req = nullptr;
  Family<Gauge>* pod_ratio = nullptr;
  // Reclaim activity (BPF, tracked memcgs): per pod and for kubepods / QoS tiers.
  std::array<Family<Counter>*, 4> pod_activity{};
  std::array<Family<Counter>*, 4> kubepods_activity{};

  // The reactor's latency totals as last copied in (reactor_dispatch_latency).
  std::mutex reactor_mu;
  Histogram* reactor_h = nullptr;
  std::vector<uint64_t> reactor_seen;
  double reactor_sum_seen = 0;
  std::mutex hooks_mu;
  std::vector<std::function<void()>> render_hooks;

  std::mutex mu;  // guards everything below (prometheus metrics are atomic themselves)

  std::array<Gauge*, kSignalCount> value_g{};
  std::array<Gauge*, kSignalCount> capacity_g{};
  std::array<double, kSignalCount> capacity{};
  std::array<bool, kSignalCount> capacity_known{};

  struct ThresholdSeries {
    Signal signal;
    ThresholdKind kind;
    ThresholdValue value;
    Gauge* gauge = nullptr;  // null until resolvable
  };
  std::vector<ThresholdSeries> thresholds;

  std::array<Gauge*, kConditionCount> condition_g{};
  std::array<Counter*, kConditionCount> transitions_c{};
  std::array<bool, kConditionCount> condition_state{};

  std::map<std::string, Counter*> counters;  // "<family>\x1f<labels...>" -> counter, for dynamic labels
  std::map<std::string, Histogram*> histos;

  struct Victim {
    std::string uid;
    Gauge* gauge;
  };
  std::deque<Victim> victims;

  std::map<std::string, Gauge*> bpf_programs;

  struct PodSeries {
    Labels labels;
    Gauge* ws = nullptr;
    Gauge* req = nullptr;
    Gauge* ratio = nullptr;
    std::array<Counter*, 4> activity{};  // null: pod not tracked
  };
  std::map<std::string, std::array<Counter*, 4>> kubepods_series;  // by cgroup label
  std::unordered_map<std::string, PodSeries> pods;  // by uid (or namespace/pod when uid is empty)

  Counter* observations_c = nullptr;
  Gauge* ready_g = nullptr;
  Gauge* pod_source_synced_g = nullptr;
  Gauge* config_last_ok_g = nullptr;
  Gauge* psi_available_g = nullptr;

  Counter& counter_for(Family<Counter>& f, const Labels& labels) {
    std::string key = f.GetName();
    for (const auto& [k, v] : labels) {
      key += '\x1f';
      key += k;
      key += '=';
      key += v;
    }
    std::lock_guard lock(mu);
    auto it = counters.find(key);
    if (it != counters.end()) return *it->second;
    Counter& c = f.Add(labels);
    counters.emplace(std::move(key), &c);
    return c;
  }

  Histogram& histogram_for(Family<Histogram>& f, const Labels& labels, const Histogram::BucketBoundaries& buckets) {
    std::string key = f.GetName();
    for (const auto& [k, v] : labels) key += '\x1f' + k + '=' + v;
    std::lock_guard lock(mu);
    auto it = histos.find(key);
    if (it != histos.end()) return *it->second;
    Histogram& h = f.Add(labels, buckets);
    histos.emplace(std::move(key), &h);
    return h;
  }

  // Called with mu held.
  void remove_activity(PodSeries& s) {
    for (std::size_t i = 0; i < s.activity.size(); ++i) {
      if (s.activity[i] != nullptr) pod_activity[i]->Remove(s.activity[i]);
      s.activity[i] = nullptr;
    }
  }

  // Liveness and readiness (the probes ask it, beside the server); the gauges show it.
  Health health;
  void update_ready() {
    pod_source_synced_g->Set(health.pod_source_synced() ? 1 : 0);
    ready_g->Set(health.ready() ? 1 : 0);
  }

  // Called with mu held; nullopt: every signal.
  void resolve_thresholds(std::optional<Signal> s) {
    for (auto& t : thresholds) {
      if (s && t.signal != *s) continue;
      const auto idx = static_cast<std::size_t>(t.signal);
      const bool resolvable = t.value.kind == ThresholdValue::Kind::Quantity || capacity_known[idx];
      if (!resolvable) continue;
      if (t.gauge == nullptr) {
        t.gauge = &signal_threshold->Add({{"signal", str(name(t.signal))},
                                          {"unit", str(unit_of(t.signal))},
                                          {"threshold_type", str(kind_name(t.kind))}});
      }
      t.gauge->Set(t.value.resolve(capacity[idx]));
    }
  }
};

Metrics::Metrics(MetricsOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  auto& m = *impl_;
  m.build_info = &m.gauge("pressured_build_info",
                          "Always 1; labels carry the version and build type of the running pressured.");
  m.start_time = &m.gauge("pressured_start_time_seconds", "Unix time the daemon's metrics were created (start).");
  m.ready_gauge = &m.gauge("pressured_ready",
                           "1 when events are attached (BPF or fallback), the first observation is done and the pod "
                           "source delivered its first pod list, else 0.");
  m.pod_source_synced = &m.gauge("pressured_pod_source_synced",
                                 "1 once the pod metadata source delivered a pod list (or none is configured); 0: no "
                                 "pod has metadata yet, so the ranking evicts none (docs/operations.md).");
  m.signal_value = &m.gauge("pressured_signal_value",
                            "Observed value of an eviction signal, in its unit (available bytes/inodes/pids, or "
                            "PSI stall percent).");
  m.signal_capacity = &m.gauge("pressured_signal_capacity", "Capacity of an eviction signal, in its unit.");
  m.signal_threshold = &m.gauge("pressured_signal_threshold",
                                "Configured eviction threshold, resolved to the signal's unit.");
  m.node_condition = &m.gauge("pressured_node_condition", "Node condition as decided by pressured (1 true, 0 false).");
  m.condition_transitions =
      &m.counter("pressured_node_condition_transitions_total", "Times a node condition flipped.");
  m.observations = &m.counter("pressured_observations_total", "Fresh observations evaluated by the engine.");
  m.evictions = &m.counter("pressured_evictions_total", "Pods chosen for eviction, by signal, QoS class and threshold type.");
  m.eviction_containers = &m.counter(
      "pressured_eviction_containers_total",
      "Memory evictions by the name of the victim's container that grew (or was furthest over its request); the "
      "first 64 names have a series of their own, later ones count as \"other\".");
  m.eviction_last = &m.gauge("pressured_eviction_last_timestamp_seconds",
                             "Unix time of the most recent evictions (bounded list of recent victims).");
  m.no_candidates = &m.counter("pressured_eviction_no_candidates_total",
                               "Evaluations where a threshold wanted a victim and no pod could be evicted.");
  m.eviction_latency = &m.histogram("pressured_eviction_latency_seconds",
                                    "Time from the eviction decision until the pod's processes are gone.");
  m.local_kills = &m.counter("pressured_local_kills_total", "Local kills of a pod's processes, by result.");
  m.policy_actions = &m.counter("pressured_eviction_policy_actions_total",
                                "Actions of the eviction policy (evict, escalate, kill, stuck, releasetimeout, ...).");
  m.plugin_events = {
      &m.counter("pressured_plugin_calls_total", "Calls pressured made to an eviction plugin, by plugin."),
      &m.counter("pressured_plugin_timeouts_total",
                 "Calls to an eviction plugin that missed plugins.callTimeout (the plugin was skipped and backed off)."),
      &m.counter("pressured_plugin_errors_total",
                 "Calls to an eviction plugin that failed otherwise: unreachable, an invalid or too large answer."),
      &m.counter("pressured_plugin_vetoes_total",
                 "Protections by an eviction plugin that kept the pod pressured's ranking chose from eviction."),
      &m.counter("pressured_plugin_proposals_total", "Proposals of an eviction plugin that decided an eviction."),
  };
  m.api_requests = &m.counter("pressured_kubernetes_api_requests_total",
                              "Kubernetes API calls made by pressured, by action and result.");
  m.oom_kills = &m.counter("pressured_kernel_oom_kills_total",
                           "Processes killed by the kernel OOM killer, by the victim pod's QoS class (none: not a pod) "
                           "and scope (node: the node ran out; cgroup: a pod's or container's own limit; unknown).");
  m.detection_latency = &m.histogram("pressured_detection_latency_seconds",
                                     "Time from the kernel event's timestamp to the engine's decision.");
  m.reactor_latency = &m.histogram("pressured_reactor_dispatch_latency_seconds",
                                   "Time from a kernel event's timestamp to the reactor handing it to the daemon, "
                                   "for every event.");
  m.reclaim_duration = &m.histogram("pressured_reclaim_duration_seconds",
                                    "How long each relief run (memory.reclaim writes before a memory eviction) took.");
  m.bpf_info = &m.gauge("pressured_bpf_program_info", "Always 1; how each BPF program is attached and why.");
  m.stale_reads = &m.counter("pressured_stale_reads_total", "Reads that failed and fell back to the last good value.");
  m.bpf_load_refusals = &m.counter("pressured_bpf_load_refusals_total",
                                   "BPF program flavours the kernel refused to load (the program fell back), by "
                                   "program and flavour.");
  m.config_reloads = &m.counter("pressured_config_reloads_total", "Configuration reloads (SIGHUP), by result.");
  m.checkpoint_writes = &m.counter("pressured_checkpoint_writes_total",
                                   "Checkpoint (daemon.stateFile) writes, by result; a failure means a restart "
                                   "may not resume the evictions in flight.");
  m.config_last_ok = &m.gauge("pressured_config_last_reload_successful",
                              "1 when the last configuration reload succeeded (or none happened yet), else 0.");
  m.psi_available = &m.gauge("pressured_psi_available",
                             "1 when the kernel has PSI (the system's pressure files exist), 0 when not (booted "
                             "with psi=0 or built without CONFIG_PSI): PSI signals and triggers are off.");
  m.pod_ws = &m.gauge("pressured_pod_memory_working_set_bytes",
                      "Memory working set of a pod (usage - inactive_file); top pods by working set only.");
  m.pod_req = &m.gauge("pressured_pod_memory_request_bytes", "Memory request of a pod; top pods only.");
  m.pod_ratio = &m.gauge("pressured_pod_memory_usage_over_request_ratio",
                         "Working set divided by memory request; top pods with a request only.");

  m.pod_activity = {
      &m.counter("pressured_pod_reclaim_scanned_pages_total",
                 "Pages scanned by memory reclaim in a pod's cgroup and its containers (BPF); top pods only."),
      &m.counter("pressured_pod_reclaim_stolen_pages_total",
                 "Pages reclaimed from a pod's cgroup and its containers (BPF); top pods only."),
      &m.counter("pressured_pod_workingset_refaults_total",
                 "Workingset refaults (recently evicted pages needed again: thrashing) of a pod (BPF); top pods only."),
      &m.counter("pressured_pod_memstall_seconds_total",
                 "Time a pod's tasks were stalled on memory (PSI memstalls, BPF); top pods only.")};
  m.kubepods_activity = {
      &m.counter("pressured_kubepods_reclaim_scanned_pages_total",
                 "Pages scanned by memory reclaim in kubepods or a QoS tier (BPF), by cgroup."),
      &m.counter("pressured_kubepods_reclaim_stolen_pages_total",
                 "Pages reclaimed from kubepods or a QoS tier (BPF), by cgroup."),
      &m.counter("pressured_kubepods_workingset_refaults_total",
                 "Workingset refaults in kubepods or a QoS tier (BPF), by cgroup."),
      &m.counter("pressured_kubepods_memstall_seconds_total",
                 "Time tasks in kubepods or a QoS tier were stalled on memory (BPF), by cgroup.")};

  m.build_info->Add({{"version", build_info::kVersion}, {"build_type", build_info::kBuildType}}).Set(1);
  m.start_time->Add({}).Set(unix_now());
  m.ready_g = &m.ready_gauge->Add({});
  m.ready_g->Set(0);
  m.pod_source_synced_g = &m.pod_source_synced->Add({});
  m.pod_source_synced_g->Set(1);
  m.observations_c = &m.observations->Add({});
  m.config_last_ok_g = &m.config_last_ok->Add({});
  m.config_last_ok_g->Set(1);
  // Until the daemon has looked (run): a node is taken to have PSI.
  m.psi_available_g = &m.psi_available->Add({});
  m.psi_available_g->Set(1);
  for (std::size_t i = 0; i < kConditionCount; ++i) {
    const auto c = static_cast<Condition>(i);
    m.condition_g[i] = &m.node_condition->Add({{"condition", str(name(c))}});
    m.transitions_c[i] = &m.condition_transitions->Add({{"condition", str(name(c))}});
  }
  // Series that alerts take increase() of exist from the start at 0, so the
  // first increment is seen as an increase.
  for (auto s : {OomScope::Node, OomScope::Cgroup, OomScope::Unknown}) {
    for (auto q : {QosClass::BestEffort, QosClass::Burstable, QosClass::Guaranteed}) {
      m.oom_kills->Add({{"qos_class", str(name(q))}, {"scope", str(name(s))}});
    }
    m.oom_kills->Add({{"qos_class", "none"}, {"scope", str(name(s))}});
  }
  for (const char* r : {"success", "failure"}) {
    m.local_kills->Add({{"result", r}});
    m.config_reloads->Add({{"result", r}});
    m.checkpoint_writes->Add({{"result", r}});
  }
}

Metrics::~Metrics() = default;

void Metrics::signal_observed(Signal signal, double value, double capacity) {
  auto& m = *impl_;
  const auto i = static_cast<std::size_t>(signal);
  std::lock_guard lock(m.mu);
  if (m.value_g[i] == nullptr) {
    const Labels l{{"signal", str(name(signal))}, {"unit", str(unit_of(signal))}};
    m.value_g[i] = &m.signal_value->Add(l);
    m.capacity_g[i] = &m.signal_capacity->Add(l);
  }
  m.value_g[i]->Set(value);
  m.capacity_g[i]->Set(capacity);
  const bool changed = !m.capacity_known[i] || m.capacity[i] != capacity;
  m.capacity[i] = capacity;
  m.capacity_known[i] = true;
  if (changed) m.resolve_thresholds(signal);
}

void Metrics::set_thresholds(const EvictionConfig& config) {
  auto& m = *impl_;
  std::lock_guard lock(m.mu);
  for (auto& t : m.thresholds) {
    if (t.gauge != nullptr) m.signal_threshold->Remove(t.gauge);
  }
  m.thresholds.clear();
  for (const auto& t : config.thresholds) {
    // One series per (signal, kind): a later duplicate replaces an earlier one.
    auto same = std::find_if(m.thresholds.begin(), m.thresholds.end(),
                             [&](const auto& e) { return e.signal == t.signal && e.kind == t.kind; });
    if (same != m.thresholds.end()) {
      same->value = t.value;
    } else {
      m.thresholds.push_back({t.signal, t.kind, t.value, nullptr});
    }
  }
  m.resolve_thresholds(std::nullopt);
  // Eviction counters for what can happen exist at 0 (rate() sees the first one).
  for (const auto& t : m.thresholds) {
    for (auto q : {QosClass::BestEffort, QosClass::Burstable, QosClass::Guaranteed}) {
      const Labels l{{"signal", str(name(t.signal))}, {"qos_class", str(name(q))}, {"threshold_type", str(kind_name(t.kind))}};
      std::string key = m.evictions->GetName();
      for (const auto& [k, v] : l) key += '\x1f' + k + '=' + v;
      if (m.counters.find(key) == m.counters.end()) m.counters.emplace(std::move(key), &m.evictions->Add(l));
    }
  }
}

void Metrics::condition(Condition condition, bool status) {
  auto& m = *impl_;
  const auto i = static_cast<std::size_t>(condition);
  std::lock_guard lock(m.mu);
  if (m.condition_state[i] != status) m.transitions_c[i]->Increment();
  m.condition_state[i] = status;
  m.condition_g[i]->Set(status ? 1 : 0);
}

void Metrics::observation_completed() {
  auto& m = *impl_;
  m.observations_c->Increment();
  if (m.health.observation_completed()) m.update_ready();
}

void Metrics::eviction(Signal signal, QosClass qos, ThresholdKind kind, std::string_view namespace_,
                       std::string_view pod, std::string_view uid) {
  eviction(name(signal), qos, kind, namespace_, pod, uid);
}

void Metrics::eviction(std::string_view signal, QosClass qos, ThresholdKind kind, std::string_view namespace_,
                       std::string_view pod, std::string_view uid) {
  auto& m = *impl_;
  m.counter_for(*m.evictions, {{"signal", bounded(signal)},
                               {"qos_class", str(name(qos))},
                               {"threshold_type", str(kind_name(kind))}})
      .Increment();
  if (m.options.recent_evictions == 0) return;
  const Labels l{{"namespace", bounded(namespace_)}, {"pod", bounded(pod, 253)}, {"uid", bounded(uid, 64)},
                 {"signal", bounded(signal)},         {"qos_class", str(name(qos))},
                 {"threshold_type", str(kind_name(kind))}};
  std::lock_guard lock(m.mu);
  // A pod evicted again replaces its previous entry.
  for (auto it = m.victims.begin(); it != m.victims.end(); ++it) {
    if (it->uid == uid) {
      m.eviction_last->Remove(it->gauge);
      m.victims.erase(it);
      break;
    }
  }
  Gauge& g = m.eviction_last->Add(l);
  g.Set(unix_now());
  m.victims.push_back({std::string(uid), &g});
  while (m.victims.size() > m.options.recent_evictions) {
    m.eviction_last->Remove(m.victims.front().gauge);
    m.victims.pop_front();
  }
}

void Metrics::eviction_container(std::string_view container) {
  auto& m = *impl_;
  std::string label = bounded(container, 63);  // a container name is a DNS label
  {
    std::lock_guard lock(m.mu);
    if (!m.eviction_container_names.contains(label)) {
      if (m.eviction_container_names.size() >= kEvictionContainerNames) {
        label = "other";
      } else {
        m.eviction_container_names.insert(label);
      }
    }
  }
  m.counter_for(*m.eviction_containers, {{"container", label}}).Increment();
}

void Metrics::no_eviction_candidate(Signal signal) {
  auto& m = *impl_;
  m.counter_for(*m.no_candidates, {{"signal", str(name(signal))}}).Increment();
}

void Metrics::eviction_completed(ThresholdKind kind, double seconds_since_decision) {
  auto& m = *impl_;
  m.histogram_for(*m.eviction_latency, {{"threshold_type", str(kind_name(kind))}}, eviction_buckets())
      .Observe(seconds_since_decision);
}

void Metrics::policy_action(std::string_view action, uint64_t count) {
  auto& m = *impl_;
  m.counter_for(*m.policy_actions, {{"action", token(action)}}).Increment(static_cast<double>(count));
}

void Metrics::plugin_event(std::string_view plugin, PluginEvent event, uint64_t count) {
  auto& m = *impl_;
  m.counter_for(*m.plugin_events.at(static_cast<std::size_t>(event)), {{"plugin", bounded(plugin, 63)}})
      .Increment(static_cast<double>(count));
}

void Metrics::local_kill(bool ok) {
  auto& m = *impl_;
  m.counter_for(*m.local_kills, {{"result", ok ? "success" : "failure"}}).Increment();
}

void Metrics::api_request(ApiAction action, ApiOutcome outcome) {
  auto& m = *impl_;
  m.counter_for(*m.api_requests, {{"action", str(action_name(action))}, {"result", str(outcome_name(outcome))}})
      .Increment();
}

void Metrics::kernel_oom_kill(std::optional<QosClass> qos, OomScope scope) {
  auto& m = *impl_;
  m.counter_for(*m.oom_kills, {{"qos_class", qos ? str(name(*qos)) : std::string("none")}, {"scope", str(name(scope))}})
      .Increment();
}

void Metrics::detection_latency(std::string_view source, double seconds) {
  auto& m = *impl_;
  m.histogram_for(*m.detection_latency, {{"source", token(source)}}, detection_buckets()).Observe(seconds);
}

void Metrics::reclaim_duration(double seconds) {
  auto& m = *impl_;
  m.histogram_for(*m.reclaim_duration, {}, detection_buckets()).Observe(seconds);
}

void Metrics::reactor_dispatch_latency(const std::vector<double>& bounds_seconds,
                                       const std::vector<uint64_t>& bucket_totals, double sum_seconds) {
  auto& m = *impl_;
  std::lock_guard lock(m.reactor_mu);
  if (bucket_totals.size() != bounds_seconds.size() + 1) return;  // a caller bug; never a half-built histogram
  if (m.reactor_h == nullptr) {
    m.reactor_h = &m.reactor_latency->Add({}, prometheus::Histogram::BucketBoundaries(bounds_seconds));
    m.reactor_seen.assign(bucket_totals.size(), 0);
  }
  std::vector<double> increments(bucket_totals.size());
  bool any = false;
  for (std::size_t i = 0; i < bucket_totals.size(); ++i) {
    // Totals only grow; a smaller one (a reset) adds nothing rather than going negative.
    const uint64_t now = std::max(bucket_totals[i], m.reactor_seen[i]);
    increments[i] = static_cast<double>(now - m.reactor_seen[i]);
    any = any || now != m.reactor_seen[i];
    m.reactor_seen[i] = now;
  }
  const double sum_delta = std::max(0.0, sum_seconds - m.reactor_sum_seen);
  m.reactor_sum_seen = std::max(sum_seconds, m.reactor_sum_seen);
  if (any) m.reactor_h->ObserveMultiple(increments, sum_delta);
}

StatsExport Metrics::export_counters(std::span<const ExternalStat> stats) {
  auto& m = *impl_;
  std::vector<StatsExport::Table::Entry> entries;
  std::vector<std::string> series;  // entries' names, for messages
  {
    std::lock_guard lock(m.mu);
    for (const auto& st : stats) {
      const std::string name(st.metric);
      const bool gauge = st.kind == StatKind::Gauge;
      // A new family: not one of another type, and named as its kind wants.
      const auto check_new = [&] {
        for (const auto& r : m.names) {
          if (r.name == name) throw std::logic_error("stats: " + name + " is already a " + r.type);
        }
        if (!stat_name_fits(st.kind, st.metric)) {
          throw std::logic_error("stats: " + name +
                                 (gauge ? " is a gauge: it must not end in _total" : " is a counter: it must end in _total"));
        }
      };
      const Labels labels = parse_stat_labels(st.metric, st.labels);
      StatsExport::Table::Entry e{0, st.value};
      if (gauge) {
        Family<Gauge>* family = nullptr;
        if (auto it = m.gauge_families.find(name); it != m.gauge_families.end()) {
          family = it->second;
        } else {
          check_new();
          family = &m.gauge(name, std::string(st.help));
        }
        e.gauge = &family->Add(labels);
      } else {
        Family<Counter>* family = nullptr;
        if (auto it = m.counter_families.find(name); it != m.counter_families.end()) {
          family = it->second;
        } else {
          check_new();
          family = &m.counter(name, std::string(st.help));
        }
        if (st.from_first_count) {
          e.family = family;
          e.labels = labels;
        } else {
          e.counter = &family->Add(labels);
        }
      }
      entries.push_back(std::move(e));
      series.push_back(name + "{" + std::string(st.labels) + "}");
    }
  }
  std::lock_guard lock(m.exports->mu);
  // A gauge has one value: two live stats setting one series would flip it.
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Gauge* g = entries[i].gauge;
    if (g == nullptr) continue;
    const auto same = [g](const StatsExport::Table::Entry& o) { return o.gauge == g; };
    if (std::any_of(m.exports->entries.begin(), m.exports->entries.end(), same) ||
        std::count_if(entries.begin(), entries.end(), same) > 1) {
      throw std::logic_error("stats: gauge " + series[i] + " is already set by another exported stat");
    }
  }
  const uint64_t id = m.exports->next_id++;
  for (auto& e : entries) {
    e.owner = id;
    StatsExport::Table::sync(e);
    m.exports->entries.push_back(std::move(e));
  }
  return StatsExport(m.exports, id);
}

void Metrics::on_render(std::function<void()> hook) {
  std::lock_guard lock(impl_->hooks_mu);
  impl_->render_hooks.push_back(std::move(hook));
}

void Metrics::bpf_attach(std::string_view program, std::string_view mode, std::string_view reason) {
  auto& m = *impl_;
  const std::string prog = token(program);
  std::lock_guard lock(m.mu);
  auto it = m.bpf_programs.find(prog);
  if (it != m.bpf_programs.end()) {
    m.bpf_info->Remove(it->second);
    m.bpf_programs.erase(it);
  }
  Gauge& g = m.bpf_info->Add({{"program", prog}, {"mode", token(mode)}, {"reason", bounded(reason)}});
  g.Set(1);
  m.bpf_programs.emplace(prog, &g);
}

void Metrics::bpf_load_refused(std::string_view program, std::string_view flavour) {
  auto& m = *impl_;
  m.counter_for(*m.bpf_load_refusals, {{"program", token(program)}, {"flavour", token(flavour)}}).Increment();
}

void Metrics::stale_read(Signal signal) {
  auto& m = *impl_;
  m.counter_for(*m.stale_reads, {{"target", str(name(signal))}}).Increment();
}

void Metrics::stale_pod_read(bool metadata) {
  auto& m = *impl_;
  m.counter_for(*m.stale_reads, {{"target", metadata ? "pod_metadata" : "pod_usage"}}).Increment();
}

void Metrics::config_reload(bool ok) {
  auto& m = *impl_;
  m.counter_for(*m.config_reloads, {{"result", ok ? "success" : "failure"}}).Increment();
  m.config_last_ok_g->Set(ok ? 1 : 0);
}

void Metrics::checkpoint_write(bool ok) {
  auto& m = *impl_;
  m.counter_for(*m.checkpoint_writes, {{"result", ok ? "success" : "failure"}}).Increment();
}

void Metrics::update_pods(const std::vector<PodMemorySample>& pods) {
  auto& m = *impl_;
  std::vector<const PodMemorySample*> top;
  top.reserve(pods.size());
  for (const auto& p : pods) top.push_back(&p);
  const std::size_t n = std::min<std::size_t>(top.size(), m.options.top_pods);
  std::partial_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(n), top.end(),
                    [](const auto* a, const auto* b) {
                      if (a->working_set_bytes != b->working_set_bytes) return a->working_set_bytes > b->working_set_bytes;
                      return a->uid < b->uid;  // stable choice among equals: no churn between scrapes
                    });
  top.resize(n);

  std::lock_guard lock(m.mu);
  std::unordered_map<std::string, Impl::PodSeries> next;
  next.reserve(n);
  for (const auto* p : top) {
    std::string key = p->uid.empty() ? p->namespace_ + "/" + p->pod : p->uid;
    Labels l{{"namespace", bounded(p->namespace_)},
             {"pod", bounded(p->pod, 253)},
             {"uid", bounded(p->uid, 64)},
             {"qos_class", str(name(p->qos))}};
    Impl::PodSeries s;
    auto it = m.pods.find(key);
    if (it != m.pods.end() && it->second.labels == l) {
      s = it->second;
      m.pods.erase(it);
    } else {
      if (it != m.pods.end()) {  // labels changed (metadata arrived): replace
        m.pod_ws->Remove(it->second.ws);
        m.pod_req->Remove(it->second.req);
        if (it->second.ratio != nullptr) m.pod_ratio->Remove(it->second.ratio);
        m.remove_activity(it->second);
        m.pods.erase(it);
      }
      s.labels = l;
      s.ws = &m.pod_ws->Add(l);
      s.req = &m.pod_req->Add(l);
    }
    s.ws->Set(p->working_set_bytes);
    s.req->Set(p->memory_request_bytes);
    if (p->memory_request_bytes > 0) {
      if (s.ratio == nullptr) s.ratio = &m.pod_ratio->Add(l);
      s.ratio->Set(p->working_set_bytes / p->memory_request_bytes);
    } else if (s.ratio != nullptr) {
      m.pod_ratio->Remove(s.ratio);
      s.ratio = nullptr;
    }
    if (p->activity) {
      const auto values = activity_values(*p->activity);
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (s.activity[i] == nullptr) s.activity[i] = &m.pod_activity[i]->Add(l);
        follow(*s.activity[i], values[i]);
      }
    } else {
      m.remove_activity(s);
    }
    next.emplace(std::move(key), std::move(s));
  }
  // Whatever is left in the old map left the top N (or the node).
  for (auto& [key, s] : m.pods) {
    m.pod_ws->Remove(s.ws);
    m.pod_req->Remove(s.req);
    if (s.ratio != nullptr) m.pod_ratio->Remove(s.ratio);
    m.remove_activity(s);
  }
  m.pods = std::move(next);
}

void Metrics::memcg_activity(std::string_view cgroup, const MemcgActivitySample& activity) {
  auto& m = *impl_;
  std::lock_guard lock(m.mu);
  auto [it, inserted] = m.kubepods_series.try_emplace(bounded(cgroup, 48));
  const auto values = activity_values(activity);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (it->second[i] == nullptr) it->second[i] = &m.kubepods_activity[i]->Add({{"cgroup", it->first}});
    follow(*it->second[i], values[i]);
  }
}

void Metrics::set_psi_available(bool available) { impl_->psi_available_g->Set(available ? 1 : 0); }

void Metrics::set_events_attached(bool attached) {
  impl_->health.set_events_attached(attached);
  impl_->update_ready();
}

bool Metrics::ready() const { return impl_->health.ready(); }

void Metrics::require_pod_source(std::function<bool()> delivered) {
  impl_->health.require_pod_source(std::move(delivered));
  impl_->update_ready();
}

void Metrics::heartbeat() { impl_->health.heartbeat(); }

bool Metrics::alive() const { return impl_->health.alive(); }

const Health& Metrics::health() const { return impl_->health; }

std::string Metrics::render() const {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard lock(impl_->hooks_mu);
    hooks = impl_->render_hooks;
  }
  for (const auto& h : hooks) h();
  impl_->update_ready();  // the pod source delivers on its own thread
  impl_->exports->sync_all();
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

std::vector<std::string> Metrics::metric_names() const {
  std::vector<std::string> out;
  std::lock_guard lock(impl_->mu);
  for (const auto& r : impl_->names) {
    if (r.type == "histogram") {
      out.push_back(r.name + "_bucket");
      out.push_back(r.name + "_sum");
      out.push_back(r.name + "_count");
    } else {
      out.push_back(r.name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pressured
