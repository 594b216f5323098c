// The eviction engine. Semantics (the contract it keeps with the kubelet's
// eviction manager): docs/engine.md. Pure: no I/O, no clock, no logging; callers log and export what
// evaluate() returns.

#include "pressured/engine.hpp"
#include "pressured/predictive.hpp"

#include <algorithm>
#include <iterator>
#include <tuple>

#include "engine/local_storage.hpp"
#include "engine/rank_order.hpp"

namespace pressured {
namespace {

using rank::evict_before;
using rank::larger_kubelet_amount;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Who is evicted, the caller adds why.
Eviction eviction_of(const Pod& p) {
  Eviction e;
  set_victim_identity(e, p);
  return e;
}

}  // namespace

void set_victim_identity(Eviction& e, const Pod& p) {
  e.uid = p.uid;
  e.name = p.name;
  e.namespace_ = p.namespace_;
  e.qos = p.qos;
  e.static_pod = p.static_pod;
  e.metadata_known = p.metadata_known;
  e.cgroup_path = p.cgroup_path;
}

bool never_evicted(const Pod& pod, const EvictionConfig& config) {
  return pod.critical || pod.static_pod || pod.metadata_unavailable || pod.priority >= kCriticalPodPriority ||
         (pod.daemonset && config.daemonset_pods == DaemonSetPolicy::Never);
}

bool never_evicted_for(const Pod& pod, StarvedResource resource, const EvictionConfig& config) {
  if (never_evicted(pod, config)) return true;
  switch (resource) {
    case StarvedResource::Memory: return pod.memory_spec_unparsable;
    case StarvedResource::EphemeralStorage: return pod.storage_spec_unparsable;
    default: return false;  // no request or limit of inodes or pids to know
  }
}

uint64_t pod_usage(const Pod& pod, StarvedResource resource) {
  switch (resource) {
    case StarvedResource::Memory: return pod.usage.memory_working_set_bytes;
    case StarvedResource::EphemeralStorage: return pod.usage.ephemeral_storage_bytes;
    case StarvedResource::Inodes: return pod.usage.inodes;
    case StarvedResource::Pids: return pod.usage.pids;
    case StarvedResource::None: return 0;
  }
  return 0;
}

std::vector<ContainerUsage> container_usage(const Pod& pod, StarvedResource resource,
                                            const std::vector<ContainerMemory>& memory) {
  std::vector<ContainerUsage> out;
  const EphemeralStorageBreakdown* b = pod.ephemeral_storage ? &*pod.ephemeral_storage : nullptr;
  auto find = [](const std::vector<NamedStorageUsage>& list, const std::string& key) -> const NamedStorageUsage* {
    auto it = std::find_if(list.begin(), list.end(), [&](const NamedStorageUsage& u) { return u.name == key; });
    return it == list.end() ? nullptr : &*it;
  };
  for (const ContainerSpec& c : pod.containers) {
    if (c.id.empty()) continue;  // not started: nothing of its own to measure
    ContainerUsage u;
    u.name = c.name;
    if (resource == StarvedResource::Memory) {
      auto m = std::find_if(memory.begin(), memory.end(), [&](const ContainerMemory& x) { return x.id == c.id; });
      if (m == memory.end()) continue;
      u.usage = m->working_set_bytes;
      u.request = c.memory_request_bytes;
      u.previous_usage = m->previous_working_set_bytes;
      u.previous_age_seconds = m->previous_age_seconds;
      u.memory_pressure = m->memory_pressure;
    } else if (resource == StarvedResource::EphemeralStorage && b != nullptr) {
      // The kubelet counts a container only with both its rootfs and its logs.
      const NamedStorageUsage* layer = find(b->container_layers, c.id);
      const NamedStorageUsage* logs = find(b->container_logs, c.name);
      if (layer == nullptr || logs == nullptr) continue;
      u.usage = layer->bytes + logs->bytes;
      u.request = c.ephemeral_storage_request_bytes;
    } else {
      continue;
    }
    out.push_back(std::move(u));
  }
  return out;
}

uint64_t pod_request(const Pod& pod, StarvedResource resource) {
  switch (resource) {
    case StarvedResource::Memory: return pod.requests.memory_bytes;
    case StarvedResource::EphemeralStorage: return pod.requests.ephemeral_storage_bytes;
    default: return 0;  // Kubernetes has no inode or pid requests
  }
}

int64_t eviction_grace_period(const Pod& pod, ThresholdKind kind, const EvictionConfig& config) {
  if (kind == ThresholdKind::Hard) return 0;
  const int64_t own = pod.termination_grace_period_seconds;
  // The eviction manager's override for a soft threshold (1.32 on).
  int64_t grace = std::min(config.max_pod_grace_period_seconds, own);
  // The pod worker (calculateEffectiveGracePeriod) takes an override of 0 as
  // no override, hence the pod's own period, and never goes below 1 s: so
  // evictionMaxPodGracePeriod 0 (its default) leaves the pod's period, and a
  // negative one kills after 1 s.
  if (grace == 0) grace = own;
  grace = std::max<int64_t>(1, grace);
  if (config.soft_grace_ceiling_seconds > 0) grace = std::min(grace, config.soft_grace_ceiling_seconds);
  return grace;
}

std::vector<const Pod*> rank_pods(const std::vector<Pod>& pods, StarvedResource resource,
                                  const EvictionConfig& config, const std::vector<std::string>& terminating) {
  std::vector<std::pair<RankKeys, const Pod*>> keyed;
  keyed.reserve(pods.size());
  for (const Pod& p : pods) {
    if (never_evicted_for(p, resource, config) || contains(terminating, p.uid)) continue;
    keyed.emplace_back(rank_keys(p, resource, config), &p);
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return evict_before(a.first, a.second->uid, b.first, b.second->uid);
  });
  std::vector<const Pod*> out;
  out.reserve(keyed.size());
  for (const auto& k : keyed) out.push_back(k.second);
  return out;
}

// The keys of `pod` as if it used `usage`. Always inlined: the ranking
// comparator (evicted_before) builds two per comparison, and a call there
// costs more than the keys themselves (counted by budget.work_counts).
[[gnu::always_inline]] static inline RankKeys keys_at(const Pod& pod, uint64_t usage, StarvedResource resource,
                                              const EvictionConfig& config) {
  RankKeys k;
  k.request = pod_request(pod, resource);
  k.daemonset_last = pod.daemonset && config.daemonset_pods == DaemonSetPolicy::EvictLast;
  k.qos = pod.qos;
  k.priority = pod.priority;
  if (config.ranking == Ranking::Kubelet) {
    k.kubelet = true;
    // The kubelet's disk order subtracts the ephemeral-storage request from
    // the inode count too (rankDiskPressureFunc with resourceInodes).
    k.offset = resource == StarvedResource::Inodes ? pod.requests.ephemeral_storage_bytes : k.request;
    k.pid_order = resource == StarvedResource::Pids;
    k.no_stats = resource == StarvedResource::EphemeralStorage || resource == StarvedResource::Inodes
                     ? pod.no_storage_stats
                     : pod.no_usage_stats;
  }
  return rank::with_usage(k, usage);
}

RankKeys rank_keys(const Pod& pod, StarvedResource resource, const EvictionConfig& config) {
  return keys_at(pod, pod_usage(pod, resource), resource, config);
}

bool evicted_before(const Pod& a, uint64_t a_usage, const Pod& b, uint64_t b_usage, StarvedResource resource,
                    const EvictionConfig& config) {
  // The keys as if the pod used `usage`: callers compare bounds, not readings.
  return evict_before(keys_at(a, a_usage, resource, config), a.uid, keys_at(b, b_usage, resource, config), b.uid);
}

int64_t RankKeys::kubelet_amount() const {
  if (usage >= offset) {
    const uint64_t d = usage - offset;
    return d > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(d);
  }
  const uint64_t d = offset - usage;
  return d > static_cast<uint64_t>(INT64_MAX) ? INT64_MIN : -static_cast<int64_t>(d);
}

std::string_view name(RankKey key) {
  switch (key) {
    case RankKey::ZeroUsage: return "zeroUsage";
    case RankKey::DaemonSet: return "daemonset";
    case RankKey::Qos: return "qos";
    case RankKey::OverRequest: return "overRequest";
    case RankKey::Priority: return "priority";
    case RankKey::Amount: return "amount";
    case RankKey::Uid: return "uid";
    case RankKey::NoStats: return "noStats";
  }
  return "?";
}

std::optional<RankKey> parse_rank_key(std::string_view text) {
  for (auto k : {RankKey::ZeroUsage, RankKey::DaemonSet, RankKey::Qos, RankKey::OverRequest, RankKey::Priority,
                 RankKey::Amount, RankKey::Uid, RankKey::NoStats}) {
    if (name(k) == text) return k;
  }
  return std::nullopt;
}

RankKey deciding_key(const RankKeys& a, const RankKeys& b) {
  if (a.kubelet) {
    if (!a.pid_order && a.no_stats != b.no_stats) return RankKey::NoStats;
    if (a.over_request != b.over_request) return RankKey::OverRequest;
    if (a.priority != b.priority) return RankKey::Priority;
    if (a.no_stats != b.no_stats) return RankKey::NoStats;
    if (a.no_stats) return RankKey::Uid;
    if (larger_kubelet_amount(a, b) || larger_kubelet_amount(b, a)) return RankKey::Amount;
    return RankKey::Uid;
  }
  if (a.zero_usage != b.zero_usage) return RankKey::ZeroUsage;
  if (a.daemonset_last != b.daemonset_last) return RankKey::DaemonSet;
  if (a.qos != b.qos) return RankKey::Qos;
  if (a.over_request != b.over_request) return RankKey::OverRequest;
  if (a.priority != b.priority) return RankKey::Priority;
  if (a.amount() != b.amount()) return RankKey::Amount;
  return RankKey::Uid;
}

std::string_view eviction_reason(const Eviction& e) {
  if (!e.plugin_signal.empty()) return e.plugin_signal;
  return e.local_storage_rule.empty() ? name(e.signal) : std::string_view(e.local_storage_rule);
}

namespace {

// The predictive threshold's projection, for the eviction's "why".
std::string prediction_words(const ThresholdStatus& st, Duration lead) {
  constexpr double kMiB = 1 << 20;
  char b[320];
  std::snprintf(b, sizeof b,
                "predicted: %s falls at %.0fMi/s and reaches the threshold %.0fMi from %.0fMi in %.0f ms, sooner "
                "than daemon.predictiveLead %.0f ms (pressured's reaction time)",
                std::string(name(st.threshold.signal)).c_str(), st.fall_rate / kMiB, st.threshold_value / kMiB,
                st.observed / kMiB, st.seconds_to_threshold * 1e3, std::chrono::duration<double, std::milli>(lead).count());
  return b;
}

}  // namespace

std::vector<std::size_t> threshold_eviction_order(const std::vector<Threshold>& thresholds) {
  std::vector<std::size_t> order(thresholds.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](std::size_t i) {
    const Threshold& t = thresholds[i];
    return std::make_tuple(info(t.signal).resource == StarvedResource::Memory ? 0 : 1, static_cast<int>(t.kind),
                           static_cast<int>(t.signal), i);
  };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  return order;
}

namespace {

std::shared_ptr<const LiveConfig> own_config(EvictionConfig eviction) {
  Config c;
  c.eviction = std::move(eviction);
  return std::make_shared<const LiveConfig>(std::move(c));
}

}  // namespace

Engine::Engine(EvictionConfig config) : Engine(own_config(std::move(config))) {}

Engine::Engine(std::shared_ptr<const LiveConfig> config)
    : live_(std::move(config)), generation_(live_->generation()) {
  compute_eviction_order();
}

void Engine::follow() {
  if (live_->generation() == generation_) return;
  // State is keyed by signal and kind: it carries over to the thresholds
  // that still exist.
  generation_ = live_->generation();
  drop_unconfigured(state_);
  compute_eviction_order();
}

void Engine::compute_eviction_order() { eviction_order_ = threshold_eviction_order(config().thresholds); }

void Engine::drop_unconfigured(EngineState& state) const {
  auto configured = [this](const ThresholdKey& k) {
    return std::any_of(config().thresholds.begin(), config().thresholds.end(),
                       [&](const Threshold& t) { return t.signal == k.signal && t.kind == k.kind; });
  };
  std::erase_if(state.threshold_first_observed, [&](const auto& e) { return !configured(e.first); });
  std::erase_if(state.threshold_met, [&](const auto& e) { return !configured(e.first); });
}

std::size_t Engine::restore(EngineState state) {
  follow();
  const std::size_t before = state.threshold_first_observed.size() + state.threshold_met.size();
  drop_unconfigured(state);
  state_ = std::move(state);
  return before - state_.threshold_first_observed.size() - state_.threshold_met.size();
}

void Engine::reconfigure(EvictionConfig config) {
  live_ = own_config(std::move(config));
  generation_ = live_->generation();
  drop_unconfigured(state_);
  compute_eviction_order();
}

namespace {

// Candidates of different lanes are independent (see EvictionPolicy).
int lane_index(StarvedResource r) {
  switch (r) {
    case StarvedResource::Memory: return 0;
    case StarvedResource::EphemeralStorage:
    case StarvedResource::Inodes: return 1;
    case StarvedResource::Pids: return 2;
    case StarvedResource::None: break;
  }
  return -1;
}

}  // namespace

void Engine::predict(const NodeSnapshot& snapshot, TimePoint now, ThresholdStatus& st) {
  SignalTrend* trend = st.threshold.signal == Signal::MemoryAvailable              ? &memory_trend_
                       : st.threshold.signal == Signal::AllocatableMemoryAvailable ? &allocatable_trend_
                                                                                   : nullptr;
  if (trend == nullptr || st.stale) return;
  // Both trends, at the time of each observation (a partial refresh reads
  // them fresh; now when the observer set no time). A second threshold of
  // the same evaluation hands the same times again, which observe() ignores.
  for (auto [signal, tr] : {std::pair{Signal::MemoryAvailable, &memory_trend_},
                            std::pair{Signal::AllocatableMemoryAvailable, &allocatable_trend_}}) {
    const auto& o = snapshot.signal(signal);
    if (o && !o->stale) tr->observe(o->observed_at == TimePoint{} ? now : o->observed_at, o->value);
  }
  const auto rate = trend->fall_rate();
  if (!rate || *rate <= 0) return;
  const double seconds = (st.observed - st.threshold_value) / *rate;
  st.fall_rate = *rate;
  st.seconds_to_threshold = seconds;
  st.predicted = seconds < std::chrono::duration<double>(live_->get().daemon.predictive_lead).count();
}

Decisions Engine::evaluate(const NodeSnapshot& snapshot, TimePoint now, const std::vector<std::string>& excluded) {
  follow();
  const EvictionConfig& ec = config();
  Decisions d;
  d.thresholds.reserve(ec.thresholds.size());
  std::array<bool, kConditionCount> condition_met{};

  for (std::size_t i = 0; i < ec.thresholds.size(); ++i) {
    const Threshold& t = ec.thresholds[i];
    const SignalInfo& si = info(t.signal);
    const ThresholdKey key{t.signal, t.kind};
    ThresholdStatus st;
    st.threshold = t;
    const auto& obs = snapshot.signal(t.signal);
    bool met = false;
    if (obs) {
      // PSI values are percentages: their capacity is 100 whatever was reported.
      const double capacity = si.is_psi ? 100.0 : obs->capacity;
      const double threshold = t.value.resolve(capacity);
      const double reclaim = t.min_reclaim.resolve(capacity);
      auto was = state_.threshold_met.find(key);
      const bool was_met = was != state_.threshold_met.end() && was->second;
      st.signal_observed = true;
      st.stale = obs->stale;
      st.observed = obs->value;
      st.threshold_value = threshold;
      // A percentage of an unknown (zero) capacity resolves to 0 and is never met.
      if (si.op == Operator::LessThan) {
        met = obs->value < (was_met ? threshold + reclaim : threshold);
      } else {
        met = obs->value > (was_met ? threshold - reclaim : threshold);
      }
      if (!met && predictable(t) && live_->get().daemon.predictive_lead > Duration::zero()) {
        predict(snapshot, now, st);
        met = st.predicted;
      }
    }
    if (met) {
      state_.threshold_met[key] = true;
      auto [it, inserted] = state_.threshold_first_observed.try_emplace(key, now);
      st.first_observed = it->second;
      st.grace_elapsed = t.kind == ThresholdKind::Hard || now - it->second >= t.grace_period;
      condition_met[static_cast<std::size_t>(si.condition)] = true;
    } else {
      state_.threshold_met.erase(key);
      state_.threshold_first_observed.erase(key);
    }
    st.met = met;
    d.thresholds.push_back(st);
  }

  for (std::size_t c = 0; c < kConditionCount; ++c) {
    if (condition_met[c]) state_.condition_last_met[c] = now;
    const auto& last = state_.condition_last_met[c];
    const bool status =
        condition_met[c] || (last && now - *last < ec.pressure_transition_period);
    if (status != state_.conditions[c]) d.changes.push_back(ConditionChange{static_cast<Condition>(c), status});
    state_.conditions[c] = status;
  }
  d.conditions = state_.conditions;

  std::array<bool, 3> lane_done{};
  // Local ephemeral-storage limits come first, whatever the node thresholds
  // say (the kubelet's localStorageEviction runs before them): the first pod
  // over one of its own limits is the disk lane's candidate, hard (grace 0).
  if (ec.local_storage_capacity_isolation) {
    // A writable layer counts against its container's limit only where it
    // shares nodefs with the logs and emptyDirs (the kubelet: unless the
    // node has a dedicated image filesystem, which holds the layers).
    LocalStorageOptions options;
    options.dedicated_imagefs = snapshot.containerfs_layout == ContainerfsLayout::Imagefs ||
                                snapshot.containerfs_layout == ContainerfsLayout::Separate;
    for (const Pod& p : snapshot.pods) {
      // Not walked yet: nothing to judge (the cheapest test first: this
      // pass runs at every evaluation, pressure or not).
      if (!p.ephemeral_storage || never_evicted_for(p, StarvedResource::EphemeralStorage, ec) ||
          contains(excluded, p.uid)) {
        continue;
      }
      auto v = local_storage_violation(p, options);
      if (!v) continue;
      Eviction e = eviction_of(p);
      e.signal = Signal::NodefsAvailable;
      e.kind = ThresholdKind::Hard;
      e.observed = static_cast<double>(v->usage_bytes);
      e.threshold_value = static_cast<double>(v->limit_bytes);
      e.grace_period_seconds = 0;
      e.usage_at_decision = pod_usage(p, StarvedResource::EphemeralStorage);
      e.keys = rank_keys(p, StarvedResource::EphemeralStorage, ec);
      e.local_storage_rule = std::string(name(v->rule));
      e.local_storage_message = std::move(v->message);
      lane_done[static_cast<std::size_t>(lane_index(StarvedResource::EphemeralStorage))] = true;
      d.candidates.push_back(std::move(e));
      break;
    }
  }
  for (std::size_t i : eviction_order_) {
    const ThresholdStatus& st = d.thresholds[i];
    if (!st.met || !st.grace_elapsed) continue;
    const Threshold& t = ec.thresholds[i];
    const StarvedResource resource = info(t.signal).resource;
    const int lane = lane_index(resource);
    if (lane < 0) continue;  // condition only, see docs/engine.md
    if (lane_done[static_cast<std::size_t>(lane)]) continue;  // a more urgent threshold of this lane decided

    // Partial selection: only the first two pods of the ranking are needed
    // (the victim, and the runner-up that explains the choice).
    const Pod* best = nullptr;
    const Pod* second = nullptr;
    RankKeys best_key{}, second_key{};
    for (const Pod& p : snapshot.pods) {
      if (never_evicted_for(p, resource, ec)) continue;
      const RankKeys k = rank_keys(p, t.signal, snapshot.containerfs_layout, ec);
      if (second && !evict_before(k, p.uid, second_key, second->uid)) continue;
      if (contains(excluded, p.uid)) continue;
      if (!best || evict_before(k, p.uid, best_key, best->uid)) {
        second = best;
        second_key = best_key;
        best = &p;
        best_key = k;
      } else {
        second = &p;
        second_key = k;
      }
    }
    if (!best) {
      if (std::find(d.no_candidates.begin(), d.no_candidates.end(), t.signal) == d.no_candidates.end()) {
        d.no_candidates.push_back(t.signal);
      }
      continue;
    }
    Eviction e = eviction_of(*best);
    e.usage_at_decision = pod_usage(*best, t.signal, snapshot.containerfs_layout);
    e.signal = t.signal;
    e.kind = t.kind;
    e.observed = st.observed;
    e.threshold_value = st.threshold_value;
    e.grace_period_seconds = eviction_grace_period(*best, t.kind, ec);
    e.signal_stale = st.stale;
    e.keys = best_key;
    if (second) e.runner_up = RunnerUp{second->uid, second->name, second->namespace_, second_key};
    if (resource == StarvedResource::EphemeralStorage) e.containers = container_usage(*best, resource);
    if (resource == StarvedResource::Memory) e.pod_level_request = best->pod_level_memory_request_bytes;
    if (st.predicted) e.prediction = prediction_words(st, live_->get().daemon.predictive_lead);
    lane_done[static_cast<std::size_t>(lane)] = true;
    d.candidates.push_back(std::move(e));
  }
  if (!d.candidates.empty()) d.eviction = d.candidates.front();
  return d;
}

}  // namespace pressured
