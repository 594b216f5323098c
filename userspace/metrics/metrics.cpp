// Metrics: the prometheus-cpp registry behind pressured's declared families
// (pressured/metric_families.hpp). Every family is registered once in the
// constructor, in its declared order; a series is created by its first call
// and kept in its family's table, so a later call bounds its label values on
// the stack, finds the series under a short lock and bumps an atomic.

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

std::string_view unit_of(Signal s) {
  const auto& i = info(s);
  if (i.is_psi) return "percent";
  switch (i.resource) {
    case StarvedResource::Inodes: return "inodes";
    case StarvedResource::Pids: return "pids";
    default: return "bytes";
  }
}

// A token label's longest value (LabelDef::Form::Token).
constexpr std::size_t kTokenMax = 48;

// A label value as its family bounds it (LabelDef). A token is folded into
// `buf`, so bounding allocates nothing.
std::string_view bound_value(const LabelDef& l, std::string_view v, std::array<char, kTokenMax>& buf) {
  switch (l.form) {
    case LabelDef::Form::Fixed: return v;
    case LabelDef::Form::Text: return v.substr(0, l.max_length);
    case LabelDef::Form::Token: break;
  }
  std::size_t n = 0;
  for (char c : v) {
    if (n == std::min<std::size_t>(l.max_length, kTokenMax)) break;
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    buf[n++] = keep ? c : '_';
  }
  return n == 0 ? std::string_view("unknown") : std::string_view(buf.data(), n);
}

// FNV-1a over the values (each followed by a separator no value holds).
uint64_t hash_of(std::span<const std::string_view> values) {
  uint64_t h = 1469598103934665603ULL;
  for (const auto v : values) {
    for (const char c : v) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    h = (h ^ 0x1fU) * 1099511628211ULL;
  }
  return h;
}

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

  // One declared family: its prometheus family and the series calls made.
  struct Slot {
    FamilyInfo info;
    Family<Counter>* counter = nullptr;
    Family<Gauge>* gauge = nullptr;
    Family<Histogram>* histogram = nullptr;
    Histogram::BucketBoundaries buckets;
    struct Series {
      uint64_t hash;
      std::vector<std::string> values;  // bounded, in the declared order
      void* metric;                     // the Counter, Gauge or Histogram
    };
    std::vector<Series> series;  // under mu
    // The values each capped label has a series for (under mu).
    std::array<std::set<std::string, std::less<>>, kMaxFamilyLabels> capped;
  };

  MetricsOptions options;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::vector<Registered> names;
  std::map<std::string, Family<Counter>*> counter_families;  // by name, for export_counters
  std::map<std::string, Family<Gauge>*> gauge_families;      // by name, for export_counters
  std::shared_ptr<StatsExport::Table> exports = std::make_shared<StatsExport::Table>();
  std::array<Slot, stats::kFamilyCount> slots;

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

  explicit Impl(MetricsOptions o) : options(std::move(o)), health(options.liveness_timeout) {
    for (std::size_t i = 0; i < stats::kFamilies.size(); ++i) {
      const FamilyInfo& f = stats::kFamilies[i];
      Slot& s = slots[i];
      s.info = f;
      switch (f.kind) {
        case StatKind::Counter: s.counter = &counter(str(f.name), str(f.help)); break;
        case StatKind::Gauge: s.gauge = &gauge(str(f.name), str(f.help)); break;
        case StatKind::Histogram:
          s.histogram = &histogram(str(f.name), str(f.help));
          s.buckets.assign(f.buckets.begin(), f.buckets.end());
          break;
      }
    }
  }

  template <std::size_t N>
  Family<Counter>& family(const FamilyDef<StatKind::Counter, N>& f) { return *slots[f.index].counter; }
  template <std::size_t N>
  Family<Gauge>& family(const FamilyDef<StatKind::Gauge, N>& f) { return *slots[f.index].gauge; }
  template <std::size_t N>
  Family<Histogram>& family(const FamilyDef<StatKind::Histogram, N>& f) { return *slots[f.index].histogram; }

  // A family's labels with these values, bounded as it declares them (for
  // the series the stateful methods below create and remove themselves).
  template <StatKind K, std::size_t N>
  static Labels labels(const FamilyDef<K, N>& f, const LabelValues<N>& values) {
    Labels out;
    std::array<char, kTokenMax> buf{};
    for (std::size_t i = 0; i < N; ++i) out.emplace(str(f.labels[i].name), str(bound_value(f.labels[i], values.values[i], buf)));
    return out;
  }

  // The series of `s` with these bounded values; created on the first call.
  // Called with mu held.
  void* series(Slot& s, std::span<const std::string_view> values) {
    const uint64_t h = hash_of(values);
    for (const auto& e : s.series) {
      if (e.hash == h && std::equal(e.values.begin(), e.values.end(), values.begin(), values.end())) return e.metric;
    }
    Labels l;
    for (std::size_t i = 0; i < values.size(); ++i) l.emplace(str(s.info.labels[i].name), str(values[i]));
    void* metric = nullptr;
    switch (s.info.kind) {
      case StatKind::Counter: metric = &s.counter->Add(l); break;
      case StatKind::Gauge: metric = &s.gauge->Add(l); break;
      case StatKind::Histogram:
        if (s.buckets.empty()) {
          throw std::logic_error("metrics: " + str(s.info.name) + " takes its buckets at run time, not observe()");
        }
        metric = &s.histogram->Add(l, s.buckets);
        break;
    }
    s.series.push_back({h, std::vector<std::string>(values.begin(), values.end()), metric});
    return metric;
  }

  // Families whose series come and go with the node's state, set by the
  // stateful methods (everything below is guarded by mu; prometheus metrics
  // are atomic themselves).

  // The reactor's latency totals as last copied in (reactor_dispatch_latency).
  std::mutex reactor_mu;
  Histogram* reactor_h = nullptr;
  std::vector<uint64_t> reactor_seen;
  double reactor_sum_seen = 0;
  std::mutex hooks_mu;
  std::vector<std::function<void()>> render_hooks;

  std::mutex mu;

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

  // The activity families in the order of activity_values().
  std::array<Family<Counter>*, 4> pod_activity() {
    return {&family(stats::kPodReclaimScannedPages), &family(stats::kPodReclaimStolenPages),
            &family(stats::kPodWorkingsetRefaults), &family(stats::kPodMemstallSeconds)};
  }
  std::array<Family<Counter>*, 4> kubepods_activity() {
    return {&family(stats::kKubepodsReclaimScannedPages), &family(stats::kKubepodsReclaimStolenPages),
            &family(stats::kKubepodsWorkingsetRefaults), &family(stats::kKubepodsMemstallSeconds)};
  }

  // Called with mu held.
  void remove_activity(PodSeries& s) {
    const auto families = pod_activity();
    for (std::size_t i = 0; i < s.activity.size(); ++i) {
      if (s.activity[i] != nullptr) families[i]->Remove(s.activity[i]);
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
        t.gauge = &family(stats::kSignalThreshold)
                       .Add(labels(stats::kSignalThreshold, {t.signal, unit_of(t.signal), t.kind}));
      }
      t.gauge->Set(t.value.resolve(capacity[idx]));
    }
  }
};

void Metrics::record(uint16_t family, std::span<const std::string_view> values, double value) {
  auto& m = *impl_;
  Impl::Slot& s = m.slots.at(family);
  const auto defs = s.info.labels;
  if (values.size() != defs.size()) throw std::logic_error("metrics: wrong label count for " + str(s.info.name));
  std::array<std::array<char, kTokenMax>, kMaxFamilyLabels> bufs;
  std::array<std::string_view, kMaxFamilyLabels> bounded;
  for (std::size_t i = 0; i < values.size(); ++i) bounded[i] = bound_value(defs[i], values[i], bufs[i]);
  const std::span<const std::string_view> key(bounded.data(), values.size());
  void* metric = nullptr;
  {
    std::lock_guard lock(m.mu);
    for (std::size_t i = 0; i < defs.size(); ++i) {
      if (defs[i].max_values == 0 || s.capped[i].contains(bounded[i])) continue;
      if (s.capped[i].size() >= defs[i].max_values) {
        bounded[i] = defs[i].overflow;
      } else {
        s.capped[i].emplace(bounded[i]);
      }
    }
    metric = m.series(s, key);
  }
  switch (s.info.kind) {
    case StatKind::Counter: static_cast<Counter*>(metric)->Increment(value); break;
    case StatKind::Gauge: static_cast<Gauge*>(metric)->Set(value); break;
    case StatKind::Histogram: static_cast<Histogram*>(metric)->Observe(value); break;
  }
}

Metrics::Metrics(MetricsOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  auto& m = *impl_;
  m.family(stats::kBuildInfo).Add({{"version", build_info::kVersion}, {"build_type", build_info::kBuildType}}).Set(1);
  m.family(stats::kStartTime).Add({}).Set(unix_now());
  m.ready_g = &m.family(stats::kReady).Add({});
  m.ready_g->Set(0);
  m.pod_source_synced_g = &m.family(stats::kPodSourceSynced).Add({});
  m.pod_source_synced_g->Set(1);
  m.observations_c = &m.family(stats::kObservations).Add({});
  set(stats::kConfigLastReloadSuccessful, {}, 1);
  // Until the daemon has looked (run): a node is taken to have PSI.
  set(stats::kPsiAvailable, {}, 1);
  for (std::size_t i = 0; i < kConditionCount; ++i) {
    const auto c = static_cast<Condition>(i);
    m.condition_g[i] = &m.family(stats::kNodeCondition).Add(Impl::labels(stats::kNodeCondition, {c}));
    m.transitions_c[i] =
        &m.family(stats::kNodeConditionTransitions).Add(Impl::labels(stats::kNodeConditionTransitions, {c}));
  }
  // Series that alerts take increase() of exist from the start at 0, so the
  // first increment is seen as an increase.
  for (auto s : {OomScope::Node, OomScope::Cgroup, OomScope::Unknown}) {
    for (auto q : {QosClass::BestEffort, QosClass::Burstable, QosClass::Guaranteed}) {
      add(stats::kKernelOomKills, {q, s}, 0);
    }
    add(stats::kKernelOomKills, {"none", s}, 0);
  }
  for (const bool ok : {true, false}) {
    add(stats::kLocalKills, {result_name(ok)}, 0);
    add(stats::kConfigReloads, {result_name(ok)}, 0);
    add(stats::kCheckpointWrites, {result_name(ok)}, 0);
  }
}

Metrics::~Metrics() = default;

void Metrics::signal_observed(Signal signal, double value, double capacity) {
  auto& m = *impl_;
  const auto i = static_cast<std::size_t>(signal);
  std::lock_guard lock(m.mu);
  if (m.value_g[i] == nullptr) {
    m.value_g[i] = &m.family(stats::kSignalValue).Add(Impl::labels(stats::kSignalValue, {signal, unit_of(signal)}));
    m.capacity_g[i] =
        &m.family(stats::kSignalCapacity).Add(Impl::labels(stats::kSignalCapacity, {signal, unit_of(signal)}));
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
  std::vector<std::pair<Signal, ThresholdKind>> configured;
  {
    std::lock_guard lock(m.mu);
    for (auto& t : m.thresholds) {
      if (t.gauge != nullptr) m.family(stats::kSignalThreshold).Remove(t.gauge);
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
    for (const auto& t : m.thresholds) configured.emplace_back(t.signal, t.kind);
  }
  // Eviction counters for what can happen exist at 0 (rate() sees the first one).
  for (const auto& [signal, kind] : configured) {
    for (auto q : {QosClass::BestEffort, QosClass::Burstable, QosClass::Guaranteed}) {
      add(stats::kEvictions, {signal, q, kind}, 0);
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
  add(stats::kEvictions, {signal, qos, kind});
  if (m.options.recent_evictions == 0) return;
  const Labels l = Impl::labels(stats::kEvictionLastTimestamp, {namespace_, pod, uid, signal, qos, kind});
  auto& family = m.family(stats::kEvictionLastTimestamp);
  std::lock_guard lock(m.mu);
  // A pod evicted again replaces its previous entry.
  for (auto it = m.victims.begin(); it != m.victims.end(); ++it) {
    if (it->uid == uid) {
      family.Remove(it->gauge);
      m.victims.erase(it);
      break;
    }
  }
  Gauge& g = family.Add(l);
  g.Set(unix_now());
  m.victims.push_back({std::string(uid), &g});
  while (m.victims.size() > m.options.recent_evictions) {
    family.Remove(m.victims.front().gauge);
    m.victims.pop_front();
  }
}

void Metrics::reactor_dispatch_latency(const std::vector<double>& bounds_seconds,
                                       const std::vector<uint64_t>& bucket_totals, double sum_seconds) {
  auto& m = *impl_;
  std::lock_guard lock(m.reactor_mu);
  if (bucket_totals.size() != bounds_seconds.size() + 1) return;  // a caller bug; never a half-built histogram
  if (m.reactor_h == nullptr) {
    m.reactor_h = &m.family(stats::kReactorDispatchLatency).Add({}, Histogram::BucketBoundaries(bounds_seconds));
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
      if (st.kind == StatKind::Histogram) {
        throw std::logic_error("stats: " + name + " is a histogram: a stat is a counter or a gauge");
      }
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
  const Labels l = Impl::labels(stats::kBpfProgramInfo, {program, mode, reason});
  const std::string& prog = l.at("program");
  auto& family = m.family(stats::kBpfProgramInfo);
  std::lock_guard lock(m.mu);
  auto it = m.bpf_programs.find(prog);
  if (it != m.bpf_programs.end()) {
    family.Remove(it->second);
    m.bpf_programs.erase(it);
  }
  Gauge& g = family.Add(l);
  g.Set(1);
  m.bpf_programs.emplace(prog, &g);
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

  auto& ws = m.family(stats::kPodMemoryWorkingSet);
  auto& req = m.family(stats::kPodMemoryRequest);
  auto& ratio = m.family(stats::kPodMemoryUsageOverRequest);
  const auto activity = m.pod_activity();
  std::lock_guard lock(m.mu);
  std::unordered_map<std::string, Impl::PodSeries> next;
  next.reserve(n);
  for (const auto* p : top) {
    std::string key = p->uid.empty() ? p->namespace_ + "/" + p->pod : p->uid;
    Labels l = Impl::labels(stats::kPodMemoryWorkingSet, {p->namespace_, p->pod, p->uid, p->qos});
    Impl::PodSeries s;
    auto it = m.pods.find(key);
    if (it != m.pods.end() && it->second.labels == l) {
      s = it->second;
      m.pods.erase(it);
    } else {
      if (it != m.pods.end()) {  // labels changed (metadata arrived): replace
        ws.Remove(it->second.ws);
        req.Remove(it->second.req);
        if (it->second.ratio != nullptr) ratio.Remove(it->second.ratio);
        m.remove_activity(it->second);
        m.pods.erase(it);
      }
      s.labels = l;
      s.ws = &ws.Add(l);
      s.req = &req.Add(l);
    }
    s.ws->Set(p->working_set_bytes);
    s.req->Set(p->memory_request_bytes);
    if (p->memory_request_bytes > 0) {
      if (s.ratio == nullptr) s.ratio = &ratio.Add(l);
      s.ratio->Set(p->working_set_bytes / p->memory_request_bytes);
    } else if (s.ratio != nullptr) {
      ratio.Remove(s.ratio);
      s.ratio = nullptr;
    }
    if (p->activity) {
      const auto values = activity_values(*p->activity);
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (s.activity[i] == nullptr) s.activity[i] = &activity[i]->Add(l);
        follow(*s.activity[i], values[i]);
      }
    } else {
      m.remove_activity(s);
    }
    next.emplace(std::move(key), std::move(s));
  }
  // Whatever is left in the old map left the top N (or the node).
  for (auto& [key, s] : m.pods) {
    ws.Remove(s.ws);
    req.Remove(s.req);
    if (s.ratio != nullptr) ratio.Remove(s.ratio);
    m.remove_activity(s);
  }
  m.pods = std::move(next);
}

void Metrics::memcg_activity(std::string_view cgroup, const MemcgActivitySample& activity) {
  auto& m = *impl_;
  const auto families = m.kubepods_activity();
  std::lock_guard lock(m.mu);
  auto [it, inserted] = m.kubepods_series.try_emplace(str(cgroup.substr(0, stats::kCgroupLabel.max_length)));
  const auto values = activity_values(activity);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (it->second[i] == nullptr) it->second[i] = &families[i]->Add({{"cgroup", it->first}});
    follow(*it->second[i], values[i]);
  }
}

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
