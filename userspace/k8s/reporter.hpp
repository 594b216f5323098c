#pragma once
// Tells the Kubernetes API what pressured did: evictions recorded as the
// kubelet records its own (the pod's status: phase Failed, reason Evicted, the
// DisruptionTarget condition; the kubelet may keep it or write its own status
// back, and then the pod is ended through the Eviction API: end_pod), or,
// where the status update is refused, through the Eviction
// API (policy/v1, policy/v1beta1 on servers that do not serve v1, with the
// pod's uid as precondition, DELETE fallback on 429/500), an `Evicted` Event
// with the kubelet's annotations on the pod,
// pressured's own node conditions, and a NoSchedule taint of its own while a
// pressure condition is true. All API
// work runs on one worker thread behind a bounded queue: the API being slow or
// down never delays a local eviction, and requests never pile up (the oldest
// is dropped and counted). See docs/kubernetes.md.

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/api_client.hpp"
#include "pressured/metrics.hpp"
#include "pressured/engine.hpp"
#include "pressured/policy.hpp"
#include "pressured/signals.hpp"

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

/// Strategic-merge patch of pods/status that records an eviction as the
/// kubelet does: phase Failed, reason Evicted, the message, and the
/// DisruptionTarget condition (reason TerminationByKubelet; not for an own
/// local-storage limit, as the kubelet's). The uid in metadata makes the
/// server refuse it for a pod recreated under the name.
/// `observed_generation`: the pod's metadata.generation, set only when the
/// server serves the field (the DisruptionTarget condition then carries it as
/// observedGeneration, as the kubelet's does from 1.34; an older server
/// would drop or refuse it).
std::string pod_status_patch(const Eviction& e, const std::string& now_rfc3339,
                             std::optional<int64_t> observed_generation = std::nullopt);
/// The grace period pressured asks the API for when it ends a pod: the
/// eviction's, and at least 1 s. In the API a grace of 0 is a force deletion:
/// the pod object goes before its containers are confirmed gone, and a
/// StatefulSet can then run two pods of one identity. The kubelet's
/// "immediate" is 1 s too (immediateEvictionGracePeriodSeconds). The local
/// kill of a hard eviction stays immediate (the record keeps 0).
int64_t api_grace_period_seconds(const Eviction& e);
/// Body of the Eviction subresource request (policy/v1, or policy/v1beta1
/// for servers older than 1.22), with api_grace_period_seconds().
std::string eviction_body(const Eviction& e, const std::string& api_version = "policy/v1");
/// True when an Eviction answer says the server does not serve this
/// Eviction version (1.20 answers 400 "no kind "Eviction" is registered for
/// version "policy/v1"").
bool eviction_version_not_served(const HttpResponse& r);
/// Body of the DELETE fallback (the same grace period, at least 1 s; uid
/// precondition).
std::string delete_body(const Eviction& e);
/// Body of the core/v1 Event.
std::string event_body(const Eviction& e, const std::string& node, const std::string& now_rfc3339);
/// Body of the node's Event before an eviction for a node threshold, as the
/// kubelet's eviction manager records it (eviction_manager.go, synchronize):
/// Warning `EvictionThresholdMet`, "Attempting to reclaim <resource>", about
/// the Node (uid: its name, as the kubelet's nodeRef), in namespace default,
/// named "<node>.<eviction id>" so that a retry or a resumed eviction records
/// it once. nullopt for an own local-storage limit (not a node threshold).
std::optional<std::string> threshold_met_event_body(const Eviction& e, const std::string& node,
                                                    const std::string& now_rfc3339);
/// Strategic-merge patch of nodes/status for pressured's own condition types;
/// lastTransitionTime is set only for conditions in `flipped`.
std::string conditions_patch(const std::string& prefix, const std::array<bool, kConditionCount>& status,
                             const std::array<bool, kConditionCount>& flipped, const std::string& now_rfc3339);
/// The taint keys pressured owns, by Condition.
std::array<std::string, kConditionCount> taint_keys(const std::string& prefix);
/// The Node's new spec.taints when pressured's own NoSchedule taints must
/// change for `status`, or nullopt when they are already right. Every other
/// taint is kept as it is, in order.
std::optional<nlohmann::json> updated_taints(const nlohmann::json& current, const std::string& prefix,
                                             const std::array<bool, kConditionCount>& status,
                                             const std::string& now_rfc3339);
/// Now, as RFC 3339 UTC with seconds.
std::string rfc3339_now();

/// What became of an API eviction (Reporter::set_eviction_hook).
enum class EvictionResult {
  Landed,     // the API accepted the Eviction or its DELETE fallback
  Recorded,   // the API accepted the status record (Failed, Evicted): the pod object stays, its status the kubelet's
  NotNeeded,  // the pod is gone, is another pod now, is already terminating or terminal, or is static (Event only)
  GaveUp,     // the retry budget spent, or an answer that cannot be acted on
  Dropped,    // never sent: the queue was full
};

class Reporter {
 public:
  explicit Reporter(ApiClient client, ReporterOptions options);
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  /// Starts the worker thread.
  void start();
  /// Stops the worker; what is still queued is dropped (and counted).
  void stop();

  /// Queues the API eviction of a pod plus its Event, after the node's
  /// EvictionThresholdMet Event for a node threshold. Static/mirror pods are
  /// refused (counted) and only the Events are sent. Never blocks on the API.
  void report_eviction(const Eviction& e);
  /// Queues the end of a pod whose status record the kubelet undid
  /// (`cause`, counted): the Eviction API with its DELETE fallback and the
  /// same grace, no second Event; a pod already gone, recreated or
  /// terminating is left alone (NotNeeded). Answers through the eviction hook.
  void end_pod(const Eviction& e, RecordUndone cause);
  /// Publishes the node conditions (the newest state replaces a queued one)
  /// and, with taint_nodes, sets or clears pressured's NoSchedule taints to
  /// match them.
  void report_conditions(const std::array<bool, kConditionCount>& status,
                         const std::array<bool, kConditionCount>& flipped);

  /// Blocks until the queue is empty and the worker idle, or `timeout`. Tests.
  bool drain(Duration timeout);

  const ReporterStats& stats() const { return stats_; }
  /// Counts every HTTP attempt in `metrics`
  /// (pressured_kubernetes_api_requests_total) and exports the reporter's
  /// own counters (ReporterStats). `metrics` must outlive the reporter's
  /// worker (stop()). Call before start().
  void attach_metrics(Metrics& metrics);
  /// Optional hook called once per HTTP attempt with its outcome (tests
  /// record the sequence). Set before start().
  void set_outcome_hook(std::function<void(ApiAction, ApiOutcome)> hook) { hook_ = std::move(hook); }
  /// Called once per report_eviction() with what became of the Eviction (by
  /// Eviction::id), once its Event was sent too (a daemon that hears
  /// "done" must be able to forget both), on the worker thread (on the
  /// caller's for a full queue); not for evictions still queued at stop().
  /// The daemon turns these into inputs of its eviction policy.
  /// Thread-safe; an empty function removes it.
  void set_eviction_hook(std::function<void(const std::string& id, EvictionResult)> hook);

 private:
  struct Task {
    enum class Kind { Evict, End, Event, Conditions, NodeEvent } kind;
    Eviction eviction;
    std::array<bool, kConditionCount> status{};
    std::array<bool, kConditionCount> flipped{};
    bool event_follows = false;  // Evict: its Event is queued behind it (the answer waits for it)
    RecordUndone undone = RecordUndone::None;  // End: why (counted)
  };
  void push(Task t);
  void run();
  void execute(const Task& t);
  EvictionResult evict(const Eviction& e);
  // The pod as the API has it now: NotNeeded when gone, recreated under the
  // name, on another node or terminating (and, with `terminal_done`, Failed
  // or Succeeded); GaveUp when its node cannot be told. Every write about a
  // pod waits for this read: nullopt only for a pod of this uid whose
  // spec.nodeName is this node (remembered for its Event in on_node_).
  // `count_fate`: false for an Event's own read (the pod's fate is its
  // Eviction's to count and log). `generation`: the pod's
  // metadata.generation when the server tracks it (1.34+: it then also
  // serves a condition's observedGeneration).
  std::optional<EvictionResult> already_done(const Eviction& e, const std::string& what, bool terminal_done,
                                             bool count_fate = true, std::optional<int64_t>* generation = nullptr);
  // Whether an Event about the pod may be sent: the verdict of its
  // Eviction's read, or a read of its own (a static pod's Event, or one
  // whose Eviction was dropped).
  bool event_on_node(const Eviction& e);
  // Counts and logs a write not sent for want of the pod's node.
  void refuse_write(const std::string& what, bool other_node, const std::string& why);
  // The Eviction API with its DELETE fallback.
  EvictionResult evict_through_api(const Eviction& e, const std::string& what);
  // PATCH pods/status; nullopt when refused (the caller falls back).
  std::optional<EvictionResult> mark_failed(const Eviction& e, const std::string& what,
                                            std::optional<int64_t> generation);
  void eviction_done(const std::string& id, EvictionResult result);
  // Retries `call` on network errors, 429 and 5xx (honouring Retry-After)
  // until it returns a final response or the budget is spent.
  std::optional<HttpResponse> with_retries(ApiAction action, const std::string& what,
                                           const std::function<Result<HttpResponse>()>& call,
                                           bool retry_429_500 = true);
  bool wait_interruptible(Duration d);
  void sync_taints(const std::array<bool, kConditionCount>& status);

  ApiClient client_;
  ReporterOptions opts_;
  ReporterStats stats_;
  StatsExport stats_export_;  // after stats_: released first
  Metrics* metrics_ = nullptr;
  std::function<void(ApiAction, ApiOutcome)> hook_;
  std::mutex eviction_hook_mu_;
  std::function<void(const std::string&, EvictionResult)> eviction_hook_;
  // By eviction id: what became of an Eviction whose Event is still to be sent.
  std::map<std::string, EvictionResult> awaiting_event_;  // under mu_
  std::set<std::string> event_dropped_;  // under mu_: one half of an eviction was dropped
  // By eviction id: whether its read found the pod on this node (the worker's only).
  std::map<std::string, bool> on_node_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
  // Learnt from the first answer: the server serves policy/v1beta1 only.
  std::atomic<bool> eviction_v1beta1_{false};
};

}  // namespace pressured::k8s
