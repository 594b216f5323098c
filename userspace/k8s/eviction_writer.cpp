#include "k8s/eviction_writer.hpp"

#include <spdlog/spdlog.h>

#include "common/log.hpp"
#include "k8s/api_retry.hpp"

namespace pressured::k8s {

namespace {
constexpr const char* kStrategicMerge = "application/strategic-merge-patch+json";
}  // namespace

void EvictionWriter::write(EvictionJob& job) {
  job.result = job.undone == RecordUndone::None ? evict(job) : end(job);
}

EvictionResult EvictionWriter::evict(EvictionJob& job) {
  const Eviction& e = job.eviction;
  const std::string what = "eviction of " + e.namespace_ + "/" + e.name;
  const bool mark = deps_.options.mark_failed;
  const PodCheck pod = check_pod(deps_, e, what, /*terminal_done=*/mark);
  job.on_node = pod.on_node;
  if (pod.done) return *pod.done;
  if (mark) {
    if (auto r = mark_failed(e, what, pod.generation)) return *r;
  }
  return evict_through_api(e, what);
}

EvictionResult EvictionWriter::end(EvictionJob& job) {
  // The record's Event was sent with it: no second one.
  const Eviction& e = job.eviction;
  const std::string what = "end of " + e.namespace_ + "/" + e.name + " after its record was undone";
  const PodCheck pod = check_pod(deps_, e, what, /*terminal_done=*/false);
  job.on_node = pod.on_node;
  if (pod.done) return *pod.done;  // ended already (by the run before a restart, or someone else)
  ++(job.undone == RecordUndone::PhaseReverted ? deps_.stats.records_undone_phase
                                               : deps_.stats.records_undone_restart);
  return evict_through_api(e, what);
}

void EvictionWriter::write_event(EvictionJob& job) {
  const Eviction& e = job.eviction;
  const std::string what = "event for " + e.namespace_ + "/" + e.name;
  // A static pod (its mirror pod is read) or an Eviction dropped from the
  // queue: the same read and rules, without counting the pod's fate twice.
  const bool on_node = job.on_node ? *job.on_node : check_pod(deps_, e, what, false, /*count_fate=*/false).on_node;
  if (!on_node) return;
  auto r = deps_.api.send(ApiAction::Event, what,
                          {"POST", "/api/v1/namespaces/" + e.namespace_ + "/events",
                           event_body(e, deps_.options.node_name, rfc3339_now())});
  if (r && r->status == 409) {
    // Stored by an earlier attempt whose answer was lost, or by the run
    // before a restart that resumed this eviction: recorded once.
    spdlog::debug("k8s: event for {}/{} already recorded", e.namespace_, e.name);
  } else if (r && r->status != 200 && r->status != 201) {
    // Counted; what matters for the pod is its Eviction's answer.
    ++deps_.stats.failures;
  }
}

std::optional<EvictionResult> EvictionWriter::mark_failed(const Eviction& e, const std::string& what,
                                                          std::optional<int64_t> generation) {
  using R = EvictionResult;
  auto r = deps_.api.send(ApiAction::PodStatus, "status of " + e.namespace_ + "/" + e.name,
                          {"PATCH", pod_path(e) + "/status", pod_status_patch(e, rfc3339_now(), generation),
                           kStrategicMerge});
  if (!r) return R::GaveUp;  // counted by the retries
  if (r->status == 200) return R::Recorded;
  if (r->status == 404) {
    ++deps_.stats.pods_not_found;
    return R::NotNeeded;
  }
  // The uid in the patch: a pod recreated under the name since the read.
  if (r->status == 409 || (r->status == 422 && r->body.find("metadata.uid") != std::string::npos)) {
    ++deps_.stats.uid_conflicts;
    return R::NotNeeded;
  }
  // Refused (RBAC without pods/status, a server that will not take the
  // status): the Eviction API still stops the kubelet restarting the pod.
  ++deps_.stats.status_refused;
  spdlog::warn("k8s: {}: status update refused with HTTP {} ({}): evicting through the Eviction API instead", what,
               r->status, printable_excerpt(r->body));
  return std::nullopt;
}

EvictionResult EvictionWriter::evict_through_api(const Eviction& e, const std::string& what) {
  using R = EvictionResult;
  ReporterStats& stats = deps_.stats;
  auto evict = [&] {
    return deps_.api.send(ApiAction::Eviction, what,
                          {"POST", pod_path(e) + "/eviction",
                           eviction_body(e, eviction_v1beta1_ ? "policy/v1beta1" : "policy/v1")},
                          /*retry_429_500=*/false);
  };
  auto r = evict();
  if (r && !eviction_v1beta1_ && eviction_version_not_served(*r)) {
    // Kubernetes < 1.22 serves policy/v1beta1 only; remembered for the
    // daemon's lifetime (a server is not downgraded under a running node).
    eviction_v1beta1_ = true;
    spdlog::warn("k8s: the API server does not serve policy/v1 Eviction; using policy/v1beta1");
    r = evict();
  }
  if (!r) return R::GaveUp;
  if (eviction_v1beta1_) ++stats.eviction_v1beta1;
  if (r->status == 200 || r->status == 201) return R::Landed;  // counted in pressured_kubernetes_api_requests_total
  if (r->status == 404) {
    ++stats.pods_not_found;
    return R::NotNeeded;
  }
  if (r->status == 409) {
    ++stats.uid_conflicts;
    return R::NotNeeded;
  }
  if (r->status != 429 && r->status != 500) {
    ++stats.failures;
    spdlog::error("k8s: {}: HTTP {}: {}", what, r->status, printable_excerpt(r->body));
    return R::GaveUp;
  }
  // Refused (a disruption budget, or an error): node pressure does not
  // wait for budgets, as the kubelet does not. DELETE with the same grace.
  ++stats.evictions_refused;
  spdlog::info("k8s: {} refused with HTTP {}: falling back to DELETE", what, r->status);
  auto d = deps_.api.send(ApiAction::Delete, "delete of " + e.namespace_ + "/" + e.name,
                          {"DELETE", pod_path(e), delete_body(e)});
  if (!d) return R::GaveUp;  // counted by the retries
  if (d->status == 200 || d->status == 202) return R::Landed;  // counted as an API request
  if (d->status == 404) {
    ++stats.pods_not_found;
    return R::NotNeeded;
  }
  if (d->status == 409) {
    ++stats.uid_conflicts;
    return R::NotNeeded;
  }
  ++stats.failures;
  return R::GaveUp;
}

}  // namespace pressured::k8s
