#pragma once
// The eviction order on ranking keys, inline: the ranking's callers compare
// a node's pods thousands of times per decision, and a call per comparison
// costs more than the comparison (counted by budget.work_counts).

#include <cstdint>
#include <string>
#include <tuple>

#include "pressured/engine.hpp"

namespace pressured::rank {

// The keys `k` as if the pod used `usage`: the fields that follow the usage
// (engine.cpp's keys_at builds every key through this). A decision ranks each
// pod at two or three usages (the reading in hand, unbounded, its bound)
// without looking up its request again.
[[gnu::always_inline]] inline RankKeys with_usage(RankKeys k, uint64_t usage) {
  k.usage = usage;
  k.zero_usage = usage == 0;
  // The kubelet's PID order has no "over the request" key, and without stats
  // it compares nothing else but priority.
  k.over_request = usage > k.request && !(k.kubelet && (k.pid_order || k.no_stats));
  return k;
}

// a.usage - a.offset > b.usage - b.offset, exactly (the kubelet subtracts
// Quantities), without overflow: a.usage + b.offset > b.usage + a.offset.
[[gnu::always_inline]] inline bool larger_kubelet_amount(const RankKeys& a, const RankKeys& b) {
  uint64_t l = 0, r = 0;
  const bool lc = __builtin_add_overflow(a.usage, b.offset, &l);
  const bool rc = __builtin_add_overflow(b.usage, a.offset, &r);
  if (lc != rc) return lc;
  return l > r;
}

// The kubelet's orders (helpers.go: rankMemoryPressure, rankDiskPressureFunc,
// rankPIDPressure): usage over the request first (for pids every pod is
// "within", the PID order has no such key), then lower priority, then the
// larger usage - request. Its sort is not stable; the uid makes this one total.
// A pod without stats goes first ("prioritize evicting the pod for which no
// stats were found": exceedMemoryRequests, exceedDiskRequests, process).
inline bool kubelet_evict_before(const RankKeys& a, const std::string& ua, const RankKeys& b, const std::string& ub) {
  if (!a.pid_order && a.no_stats != b.no_stats) return a.no_stats;
  if (a.over_request != b.over_request) return a.over_request;
  if (a.priority != b.priority) return a.priority < b.priority;
  if (a.no_stats != b.no_stats) return a.no_stats;
  // Two pods without stats are equal on every later key but the uid.
  if (a.no_stats) return ua < ub;
  if (larger_kubelet_amount(a, b)) return true;
  if (larger_kubelet_amount(b, a)) return false;
  return ua < ub;
}

// True when the pod with keys `a` (uid `ua`) is evicted before the one with
// `b`. Smaller sorts first (evicted first) on every key but the amount,
// where larger goes first; the uid breaks ties so the order is total.
[[gnu::always_inline]] inline bool evict_before(const RankKeys& a, const std::string& ua, const RankKeys& b,
                                                const std::string& ub) {
  if (a.kubelet) return kubelet_evict_before(a, ua, b, ub);
  auto head = [](const RankKeys& k) {
    return std::make_tuple(k.zero_usage, k.daemonset_last, static_cast<uint8_t>(k.qos), !k.over_request, k.priority);
  };
  auto ha = head(a), hb = head(b);
  if (ha != hb) return ha < hb;
  if (a.amount() != b.amount()) return a.amount() > b.amount();
  return ua < ub;
}

}  // namespace pressured::rank
