#pragma once
// What the reporter and its writers share: the options an operator sets
// (kubernetes.* in the configuration) and the counters of what became of the
// reports, each fact once (pressured/stats.hpp).

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "pressured/clock.hpp"
#include "pressured/stats.hpp"

namespace pressured::k8s {

// What the reporter counts, each fact once (pressured/stats.hpp). The API
// calls themselves are counted per attempt in
// pressured_kubernetes_api_requests_total{action, result} (Metrics::api_request):
// an accepted eviction is {action="eviction", result="success"}, an accepted
// DELETE fallback {action="delete", ...}, a recorded Event {action="event", ...}.
// These are the outcomes no single API answer shows.
inline constexpr std::string_view kEvictionsSkippedHelp =
    "API evictions not sent or not done because the pod is already gone (reason=pod_gone: 404) or is "
    "another pod now (reason=uid_changed: recreated under the name, or 409 on the uid precondition).";
inline constexpr std::string_view kPodWritesRefusedHelp =
    "Writes about a pod (status record, Eviction, DELETE, Event) not sent because the API server does not show "
    "the pod on this node: reason=other_node (its spec.nodeName is another node's), reason=node_unknown (the pod "
    "could not be read, is gone, or has no spec.nodeName).";
inline constexpr std::string_view kRecordsUndoneHelp =
    "Evicted pods whose status record (phase Failed, reason Evicted) the kubelet undid, ended through the "
    "Eviction API (DELETE on 429/500) after all: cause=phase (the phase, seen Failed, is no longer Failed), "
    "cause=restart (the pod's processes came back after the kill).";
#define PRESSURED_REPORTER_STATS(COUNTER, GAUGE)                                                                \
  COUNTER(evictions_refused, "pressured_kubernetes_eviction_fallbacks_total", "",                              \
          "API evictions refused (429: a disruption budget; 500) and sent again as a DELETE with the same "    \
          "grace period and uid precondition.")                                                                \
  COUNTER(pods_not_found, "pressured_kubernetes_evictions_skipped_total", "reason=pod_gone",                   \
          ::pressured::k8s::kEvictionsSkippedHelp)                                                            \
  COUNTER(uid_conflicts, "pressured_kubernetes_evictions_skipped_total", "reason=uid_changed",                \
          ::pressured::k8s::kEvictionsSkippedHelp)                                                            \
  COUNTER(conditions_patched, "pressured_kubernetes_node_condition_updates_total", "",                         \
          "Updates of pressured's node conditions the API server accepted (PATCH nodes/status).")              \
  COUNTER(taints_updated, "pressured_kubernetes_node_taint_updates_total", "",                                 \
          "Changes of pressured's NoSchedule taints the API server accepted.")                                 \
  COUNTER(taint_conflicts, "pressured_kubernetes_node_taint_conflicts_total", "",                              \
          "Taint updates refused because the Node changed meanwhile (409 on its resourceVersion): re-read and " \
          "tried again.")                                                                                      \
  COUNTER(retries, "pressured_kubernetes_api_retries_total", "",                                               \
          "API requests tried again after a network error, a timeout, 429 or 5xx (with backoff, honouring "    \
          "Retry-After).")                                                                                     \
  COUNTER(failures, "pressured_kubernetes_report_failures_total", "",                                          \
          "Reports to the API given up: the retry budget spent, or an answer that cannot be acted on.")         \
  COUNTER(dropped, "pressured_kubernetes_reports_dropped_total", "",                                           \
          "Reports never sent: the queue was full (the oldest go first) or pressured stopped with them queued.") \
  COUNTER(refused_static, "pressured_kubernetes_static_pod_evictions_total", "",                               \
          "Static or mirror pods chosen as victims: not evicted through the API (the kubelet would recreate "  \
          "them), killed locally; only their Event is sent.")                                                  \
  COUNTER(eviction_v1beta1, "pressured_kubernetes_evictions_v1beta1_total", "",                                \
          "API evictions sent as policy/v1beta1, the server not serving policy/v1 (Kubernetes before 1.22).")   \
  COUNTER(records_undone_phase, "pressured_kubernetes_eviction_records_undone_total", "cause=phase",            \
          ::pressured::k8s::kRecordsUndoneHelp)                                                               \
  COUNTER(records_undone_restart, "pressured_kubernetes_eviction_records_undone_total", "cause=restart",        \
          ::pressured::k8s::kRecordsUndoneHelp)                                                               \
  COUNTER(writes_refused_other_node, "pressured_kubernetes_pod_writes_refused_total", "reason=other_node",        \
          ::pressured::k8s::kPodWritesRefusedHelp)                                                            \
  COUNTER(writes_refused_node_unknown, "pressured_kubernetes_pod_writes_refused_total", "reason=node_unknown",    \
          ::pressured::k8s::kPodWritesRefusedHelp)                                                            \
  COUNTER(status_refused, "pressured_kubernetes_pod_status_refusals_total", "",                                 \
          "Evicted pods whose status update (phase Failed, reason Evicted) the API server refused (403: RBAC "  \
          "without pods/status patch; 422): evicted through the Eviction API instead.")
PRESSURED_DECLARE_STATS(ReporterStats, PRESSURED_REPORTER_STATS);

struct ReporterOptions {
  std::string node_name;
  std::string condition_prefix = "Pressured";
  std::size_t queue_capacity = 64;
  int max_attempts = 5;
  Duration initial_backoff{std::chrono::milliseconds(200)};
  Duration max_backoff{std::chrono::seconds(30)};
  // A NoSchedule taint `<taint_key_prefix>memory-pressure` (disk-, pid-)
  // while the matching condition is true, so the scheduler stops sending pods
  // to a node pressured is evicting from.
  bool taint_nodes = true;
  std::string taint_key_prefix = "pressured.io/";
  // How an eviction reaches the API: true, the pod's status is set to what
  // the kubelet writes for its own evictions (Failed, Evicted, the message,
  // DisruptionTarget), falling back to the Eviction API when that is
  // refused; false, the Eviction API only (the pod is deleted: no record
  // stays). docs/kubernetes.md, "The eviction record".
  bool mark_failed = true;
  // The node's EvictionThresholdMet Event before an eviction for a node
  // threshold, as the kubelet records it.
  bool threshold_met_events = true;
};

class RetryingApi;

/// What each writer works with: the API (asked again while it says "later"),
/// the options and the counters, all owned by the reporter.
struct WriterDeps {
  RetryingApi& api;
  const ReporterOptions& options;
  ReporterStats& stats;
};

}  // namespace pressured::k8s
