// The eviction engine. Semantics: docs/engine.md and issue 2, "Semantics (the
// contract)". Pure: no I/O, no clock, no logging; callers log and export what
// evaluate() returns.

#include "pressured/engine.hpp"

#include <algorithm>
#include <tuple>

namespace pressured {
namespace {

// Everything the ranking compares, computed once per pod. Smaller sorts first
// (evicted first), except `amount`, where larger goes first.
struct RankKey {
  bool zero_usage;  // a pod not using the starved resource is a last resort
  bool daemonset_last;
  uint8_t qos;         // BestEffort, Burstable, Guaranteed
  bool within_request;  // pods over their request go first
  int32_t priority;     // lower priority first
  uint64_t amount;      // over request: usage - request; within: usage
};

inline RankKey rank_key(const Pod& p, uint64_t usage, StarvedResource r, DaemonSetPolicy policy) {
  const uint64_t request = pod_request(p, r);
  const bool over = usage > request;
  return RankKey{usage == 0,
                 p.daemonset && policy == DaemonSetPolicy::EvictLast,
                 static_cast<uint8_t>(p.qos),
                 !over,
                 p.priority,
                 over ? usage - request : usage};
}

inline RankKey rank_key(const Pod& p, StarvedResource r, DaemonSetPolicy policy) {
  return rank_key(p, pod_usage(p, r), r, policy);
}

// True when the pod with key `a` (uid `ua`) is evicted before the one with `b`.
inline bool evict_before(const RankKey& a, const std::string& ua, const RankKey& b, const std::string& ub) {
  auto head = [](const RankKey& k) {
    return std::tie(k.zero_usage, k.daemonset_last, k.qos, k.within_request, k.priority);
  };
  auto ha = head(a), hb = head(b);
  if (ha != hb) return ha < hb;
  if (a.amount != b.amount) return a.amount > b.amount;
  return ua < ub;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

bool never_evicted(const Pod& pod, const EvictionConfig& config) {
  return pod.critical || pod.static_pod || pod.metadata_unavailable || pod.priority >= kCriticalPodPriority ||
         (pod.daemonset && config.daemonset_pods == DaemonSetPolicy::Never);
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

uint64_t pod_request(const Pod& pod, StarvedResource resource) {
  switch (resource) {
    case StarvedResource::Memory: return pod.requests.memory_bytes;
    case StarvedResource::EphemeralStorage: return pod.requests.ephemeral_storage_bytes;
    default: return 0;  // Kubernetes has no inode or pid requests
  }
}

int64_t eviction_grace_period(const Pod& pod, ThresholdKind kind, const EvictionConfig& config) {
  if (kind == ThresholdKind::Hard) return 0;
  int64_t grace = std::max<int64_t>(0, pod.termination_grace_period_seconds);
  if (config.max_pod_grace_period_seconds > 0) grace = std::min(grace, config.max_pod_grace_period_seconds);
  return grace;
}

bool evicted_before(const Pod& a, uint64_t a_usage, const Pod& b, uint64_t b_usage, StarvedResource resource,
                    const EvictionConfig& config) {
  return evict_before(rank_key(a, a_usage, resource, config.daemonset_pods), a.uid,
                      rank_key(b, b_usage, resource, config.daemonset_pods), b.uid);
}

std::vector<const Pod*> rank_pods(const std::vector<Pod>& pods, StarvedResource resource,
                                  const EvictionConfig& config, const std::vector<std::string>& terminating) {
  std::vector<std::pair<RankKey, const Pod*>> keyed;
  keyed.reserve(pods.size());
  for (const Pod& p : pods) {
    if (never_evicted(p, config) || contains(terminating, p.uid)) continue;
    keyed.emplace_back(rank_key(p, resource, config.daemonset_pods), &p);
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return evict_before(a.first, a.second->uid, b.first, b.second->uid);
  });
  std::vector<const Pod*> out;
  out.reserve(keyed.size());
  for (const auto& k : keyed) out.push_back(k.second);
  return out;
}

Engine::Engine(EvictionConfig config) : config_(std::move(config)) { compute_eviction_order(); }

void Engine::compute_eviction_order() {
  // Memory first (as the kubelet's byEvictionPriority), then hard before
  // soft, then signal order, then configuration order.
  eviction_order_.resize(config_.thresholds.size());
  for (std::size_t i = 0; i < eviction_order_.size(); ++i) eviction_order_[i] = i;
  auto key = [this](std::size_t i) {
    const Threshold& t = config_.thresholds[i];
    return std::make_tuple(info(t.signal).resource == StarvedResource::Memory ? 0 : 1, static_cast<int>(t.kind),
                           static_cast<int>(t.signal), i);
  };
  std::sort(eviction_order_.begin(), eviction_order_.end(),
            [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
}

void Engine::drop_unconfigured(EngineState& state) const {
  auto configured = [this](const ThresholdKey& k) {
    return std::any_of(config_.thresholds.begin(), config_.thresholds.end(),
                       [&](const Threshold& t) { return t.signal == k.signal && t.kind == k.kind; });
  };
  std::erase_if(state.threshold_first_observed, [&](const auto& e) { return !configured(e.first); });
  std::erase_if(state.threshold_met, [&](const auto& e) { return !configured(e.first); });
}

std::size_t Engine::restore(EngineState state) {
  const std::size_t before = state.threshold_first_observed.size() + state.threshold_met.size();
  drop_unconfigured(state);
  state_ = std::move(state);
  return before - state_.threshold_first_observed.size() - state_.threshold_met.size();
}

void Engine::reconfigure(EvictionConfig config) {
  // State is keyed by signal and kind: it carries over to the thresholds
  // that still exist.
  config_ = std::move(config);
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

Decisions Engine::evaluate(const NodeSnapshot& snapshot, TimePoint now, const std::vector<std::string>& excluded) {
  Decisions d;
  d.thresholds.reserve(config_.thresholds.size());
  std::array<bool, kConditionCount> condition_met{};

  for (std::size_t i = 0; i < config_.thresholds.size(); ++i) {
    const Threshold& t = config_.thresholds[i];
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
        condition_met[c] || (last && now - *last < config_.pressure_transition_period);
    if (status != state_.conditions[c]) d.changes.push_back(ConditionChange{static_cast<Condition>(c), status});
    state_.conditions[c] = status;
  }
  d.conditions = state_.conditions;

  std::array<bool, 3> lane_done{};
  for (std::size_t i : eviction_order_) {
    const ThresholdStatus& st = d.thresholds[i];
    if (!st.met || !st.grace_elapsed) continue;
    const Threshold& t = config_.thresholds[i];
    const StarvedResource resource = info(t.signal).resource;
    const int lane = lane_index(resource);
    if (lane < 0) continue;  // condition only, see docs/engine.md
    if (lane_done[static_cast<std::size_t>(lane)]) continue;  // a more urgent threshold of this lane decided

    // Partial selection: only the first pod of the ranking is needed.
    const Pod* best = nullptr;
    RankKey best_key{};
    for (const Pod& p : snapshot.pods) {
      if (never_evicted(p, config_)) continue;
      const RankKey k = rank_key(p, resource, config_.daemonset_pods);
      if (best && !evict_before(k, p.uid, best_key, best->uid)) continue;
      if (contains(excluded, p.uid)) continue;
      best = &p;
      best_key = k;
    }
    if (!best) {
      if (std::find(d.no_candidates.begin(), d.no_candidates.end(), t.signal) == d.no_candidates.end()) {
        d.no_candidates.push_back(t.signal);
      }
      continue;
    }
    Eviction e;
    e.uid = best->uid;
    e.name = best->name;
    e.namespace_ = best->namespace_;
    e.qos = best->qos;
    e.static_pod = best->static_pod;
    e.metadata_known = best->metadata_known;
    e.usage_at_decision = pod_usage(*best, resource);
    e.signal = t.signal;
    e.kind = t.kind;
    e.observed = st.observed;
    e.threshold_value = st.threshold_value;
    e.grace_period_seconds = eviction_grace_period(*best, t.kind, config_);
    e.cgroup_path = best->cgroup_path;
    e.signal_stale = st.stale;
    lane_done[static_cast<std::size_t>(lane)] = true;
    d.candidates.push_back(std::move(e));
  }
  if (!d.candidates.empty()) d.eviction = d.candidates.front();
  return d;
}

}  // namespace pressured
