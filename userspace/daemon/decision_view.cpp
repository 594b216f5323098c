#include "daemon/decision_view.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>

#include <spdlog/spdlog.h>

#include "engine/rank_order.hpp"
#include "node/attribution.hpp"
#include "pressured/engine.hpp"
#include "pressured/predictive.hpp"

namespace pressured {
namespace {

// Whether the threshold could be met at this value, whichever side of its
// min-reclaim band the engine's hysteresis is on (erring towards "maybe").
bool may_be_met(const Threshold& t, const SignalObservation& obs) {
  const SignalInfo& si = info(t.signal);
  const double capacity = si.is_psi ? 100.0 : obs.capacity;
  const double threshold = t.value.resolve(capacity);
  const double reclaim = t.min_reclaim.resolve(capacity);
  if (si.op == Operator::LessThan) return obs.value < threshold + reclaim;
  return obs.value > threshold - reclaim;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

Result<DecisionRefresh> refresh_for_decision(NodeObserver& observer, NodeSnapshot& snapshot,
                                             const EvictionConfig& config, const std::vector<std::string>& excluded,
                                             TimePoint now, const InFlightView& in_flight,
                                             Duration predictive_lead) {
  DecisionRefresh out;
  std::array<bool, kSignalCount> read{};
  for (const auto& t : config.thresholds) {
    const auto i = static_cast<std::size_t>(t.signal);
    if (read[i]) continue;
    read[i] = true;
    auto o = observer.refresh_signal(t.signal, now);
    ++out.signals_read;
    if (!o) {
      // Not observed on this node: the full observation said so too (absent);
      // any other failure is for the full observation to mark stale.
      if (o.error().code == ENOTSUP && !snapshot.signal(t.signal)) continue;
      return o.error();
    }
    snapshot.signal(t.signal) = *o;
  }
  snapshot.taken_at = now;

  // The victims the policy looks at: gone (as a full observation would not
  // list them), or read in full (usage for the release, presence for the
  // restart watch). Before any pointer into snapshot.pods is taken.
  for (const std::string& uid : in_flight.victims) {
    auto it = std::find_if(snapshot.pods.begin(), snapshot.pods.end(), [&](const Pod& p) { return p.uid == uid; });
    if (it == snapshot.pods.end()) continue;  // not observed: the full observation did not list it either
    ++out.victims_refreshed;
    if (auto r = observer.refresh_pod(*it, now); !r) {
      if (r.error().code != ENOENT) return r.error();
      snapshot.pods.erase(it);
      ++out.victims_gone;
    }
  }

  for (const auto& t : config.thresholds) {
    const auto& obs = snapshot.signal(t.signal);
    const bool predicted = predictive_lead > Duration::zero() && predictable(t);
    if (!obs || (!predicted && !may_be_met(t, *obs))) continue;
    const StarvedResource r = info(t.signal).resource;
    if (r == StarvedResource::None) continue;  // a condition only: no victim needed
    // A lane the policy holds defers every candidate: no ranking needed.
    if (auto lane = lane_of(t.signal); lane && in_flight.held[static_cast<std::size_t>(*lane)]) continue;
    if (r != StarvedResource::Memory) {
      // Disk and PID rankings use usage this view does not bound.
      return Error{EAGAIN, std::string(name(t.signal)) + " may be met: its ranking needs a full observation"};
    }
    out.ranking_needed = true;
  }
  if (!out.ranking_needed) return out;

  constexpr StarvedResource kMem = StarvedResource::Memory;
  constexpr uint64_t kUnbounded = UINT64_MAX;
  // Each pod's keys are built once and compared many times (rank::evict_before):
  // at the usage in hand, then at its bound.
  struct Keyed {
    RankKeys keys;
    Pod* pod;
  };
  auto before = [](const RankKeys& a, const Pod& pa, const RankKeys& b, const Pod& pb) {
    return rank::evict_before(a, pa.uid, b, pb.uid);
  };
  auto& pods = snapshot.pods;
  std::vector<Keyed> eligible;
  eligible.reserve(pods.size());
  for (Pod& p : pods) {
    if (!never_evicted_for(p, kMem, config) && !contains(excluded, p.uid)) {
      eligible.push_back({rank_keys(p, kMem, config), &p});
    }
  }

  // A seed: the head by the values in hand, read in full. Pods that could not
  // rank before it whatever their usage (another QoS class, a higher
  // priority, ...) need no read at all.
  const Keyed* seed = nullptr;
  for (const Keyed& e : eligible) {
    if (!seed || before(e.keys, *e.pod, seed->keys, *seed->pod)) seed = &e;
  }
  Pod* best = nullptr;
  RankKeys best_keys{};
  std::vector<Pod*> contenders;
  std::vector<const Keyed*> contending;  // the same, with their keys
  contenders.reserve(eligible.size());
  contending.reserve(eligible.size());
  if (seed) {
    best = seed->pod;
    if (auto r = observer.refresh_pod(*best, now); !r) return r.error();
    ++out.pods_refreshed;
    best_keys = rank_keys(*best, kMem, config);
    for (const Keyed& e : eligible) {
      if (e.pod != best && before(rank::with_usage(e.keys, kUnbounded), *e.pod, best_keys, *best)) {
        contenders.push_back(e.pod);
        contending.push_back(&e);
      }
    }
  }
  // Their page counters, fresh: an upper bound of each working set. (Also
  // checks that the pod set did not change, even with no contender.)
  if (auto r = observer.refresh_memory_usage(contenders, now); !r) return r.error();
  out.pods_bounded = contenders.size();

  // Ranked at its bound a pod takes the best place it can have (a pod's place
  // only improves as its usage grows). A pod whose bound does not rank before
  // the head read in full never will (the head only moves up as pods are
  // read): it keeps what it had, capped by its fresh bound, so that none can
  // rank before the head on a value older than this decision. The others, most
  // often none, go to a heap: only its top few are taken.
  std::vector<Keyed> bounds;
  bounds.reserve(contending.size());
  for (const Keyed* e : contending) {
    Pod* p = e->pod;
    RankKeys k = rank::with_usage(e->keys, p->memory_usage_bytes);
    if (before(k, *p, best_keys, *best)) {
      bounds.push_back({k, p});
    } else {
      p->usage.memory_working_set_bytes = std::min(p->usage.memory_working_set_bytes, p->memory_usage_bytes);
    }
  }
  auto later = [&](const Keyed& a, const Keyed& b) {  // max-heap on "evicted later": the top has the best bound
    return before(b.keys, *b.pod, a.keys, *a.pod);
  };
  std::make_heap(bounds.begin(), bounds.end(), later);

  // Read pods in full, best bound first, until the best read one ranks
  // before the next bound (hence before every later one).
  auto end = bounds.end();
  while (end != bounds.begin()) {
    const Keyed& top = bounds.front();
    if (!before(top.keys, *top.pod, best_keys, *best)) break;
    if (out.pods_refreshed == kMaxHeadRefreshes) {
      return Error{EAGAIN, "the memory ranking's head is uncertain after " + std::to_string(kMaxHeadRefreshes) +
                               " pod reads"};
    }
    std::pop_heap(bounds.begin(), end, later);
    --end;
    Pod& p = *end->pod;
    if (auto r = observer.refresh_pod(p, now); !r) return r.error();
    ++out.pods_refreshed;
    RankKeys k = rank_keys(p, kMem, config);
    if (before(k, p, best_keys, *best)) {
      best = &p;
      best_keys = k;
    }
  }
  // The rest of the heap keep what they had, capped the same way. (Pods that
  // were no contender cannot rank before the head at any usage.)
  for (auto it = bounds.begin(); it != end; ++it) {
    Pod& p = *it->pod;
    p.usage.memory_working_set_bytes = std::min(p.usage.memory_working_set_bytes, p.memory_usage_bytes);
  }
  return out;
}

InFlightView in_flight_view(const EvictionPolicy& policy, TimePoint now) {
  InFlightView view;
  for (const auto& f : policy.state().records) {
    if (f.in_flight()) view.victims.push_back(f.eviction.uid);
  }
  for (const Eviction& e : policy.probes(now)) {
    if (std::find(view.victims.begin(), view.victims.end(), e.uid) == view.victims.end()) view.victims.push_back(e.uid);
  }
  for (std::size_t l = 0; l < kLaneCount; ++l) view.held[l] = policy.holds_lane(static_cast<Lane>(l), now);
  return view;
}

void attribute_containers(Decisions& d, const NodeSnapshot& snapshot, const EvictionPolicy& policy,
                          NodeObserver& observer, TimePoint now) {
  for (auto& c : d.candidates) {
    if (info(c.signal).resource != StarvedResource::Memory || !c.local_storage_rule.empty()) continue;
    const auto lane = lane_of(c.signal);
    if (!lane || policy.holds_lane(*lane, now)) continue;
    auto pod = std::find_if(snapshot.pods.begin(), snapshot.pods.end(), [&](const Pod& p) { return p.uid == c.uid; });
    if (pod == snapshot.pods.end()) continue;
    node::attribute_containers(c, *pod, observer.container_memory(*pod));
  }
}

Result<bool> observe_for_decision(NodeObserver& observer, NodeSnapshot& last, std::optional<TimePoint>& last_full,
                                  const Config& config, const EvictionPolicy& policy, TimePoint now, bool partial_ok,
                                  DaemonStats& stats) {
  // An event or a safety-net tick between full observations (at most
  // events.fullObservationInterval apart) re-reads only what the decision
  // uses: the fresh-read guarantee is the same, and an idle node then costs
  // a few signal reads a tick instead of a walk over every pod. While an
  // eviction is in flight that includes its victim, and a lane the policy
  // holds needs no ranking (docs/observation.md, "Decisions while an
  // eviction is in flight"). The poll mode takes a full observation.
  if (partial_ok && last_full && now - *last_full < config.events.effective_full_observation_interval()) {
    auto r = refresh_for_decision(observer, last, config.eviction, policy.excluded(), now, in_flight_view(policy, now),
                                  config.daemon.predictive_lead);
    if (r) {
      ++stats.incremental_evaluations;
      return false;
    }
    spdlog::debug("partial refresh not enough ({}): full observation", r.error().message);
  }
  auto snap = observer.observe(now);
  if (!snap) {
    ++stats.observe_failures;
    spdlog::warn("observation failed: {}", snap.error().message);
    return snap.error();
  }
  last = std::move(*snap);
  last_full = now;
  ++stats.full_observations;
  return true;
}

}  // namespace pressured
