#include "k8s/pod_check.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/log.hpp"
#include "k8s/api_retry.hpp"
#include "k8s/bounded_json.hpp"
#include "k8s/eviction_bodies.hpp"

namespace pressured::k8s {

namespace {

using json = nlohmann::json;

// Counts and logs a write not sent for want of the pod's node.
void refuse_write(const WriterDeps& deps, const std::string& what, bool other_node, const std::string& why) {
  ++(other_node ? deps.stats.writes_refused_other_node : deps.stats.writes_refused_node_unknown);
  spdlog::warn("k8s: {}: not sent: {}; pressured writes only about pods on its node {}", what, why,
               deps.options.node_name);
}

}  // namespace

PodCheck check_pod(const WriterDeps& deps, const Eviction& e, const std::string& what, bool terminal_done,
                   bool count_fate) {
  using R = EvictionResult;
  ReporterStats& stats = deps.stats;
  PodCheck out;
  auto done = [&](R r) {
    out.done = r;
    return out;
  };
  // Read the pod first: a pod already gone or recreated under the same
  // name needs no eviction at all, and API servers before 1.22 retry a
  // failed uid precondition inside the Eviction for ~10 s before they
  // answer 409 (longer than the request timeout). The precondition still
  // guards the race between this read and the eviction.
  auto current = deps.api.send(ApiAction::ListPods, "get pod " + e.namespace_ + "/" + e.name, {.path = pod_path(e)});
  if (!current) {
    refuse_write(deps, what, false, "the pod could not be read");
    return done(R::GaveUp);  // counted by the retries
  }
  if (current->status == 404) {
    if (count_fate) {
      ++stats.pods_not_found;
    } else {
      refuse_write(deps, what, false, "the pod is gone");
    }
    return done(R::NotNeeded);
  }
  if (current->status != 200) {
    ++stats.failures;
    refuse_write(deps, what, false,
                 fmt::format("GET pod: HTTP {}: {}", current->status, printable_excerpt(current->body)));
    return done(R::GaveUp);
  }
  auto pod = parse_bounded_json(current->body);
  if (!pod) {
    refuse_write(deps, what, false, "GET pod: " + pod.error().message);
    return done(R::GaveUp);
  }
  // Whatever the answer's shape, a uid that is not a string is no uid:
  // the eviction's own uid precondition still guards it.
  const json* meta = member(*pod, "metadata");
  const std::string uid = meta != nullptr ? string_member(*meta, "uid").value_or("") : "";
  // Server capability: a server that tracks a pod's generation (1.34+,
  // PodObservedGenerationTracking) serves conditions' observedGeneration;
  // one that does not (1.20) leaves metadata.generation out.
  if (const json* g = meta != nullptr ? member(*meta, "generation") : nullptr;
      g != nullptr && g->is_number_integer() && g->get<int64_t>() > 0) {
    out.generation = g->get<int64_t>();
  }
  if (!e.uid.empty() && !uid.empty() && uid != e.uid) {
    if (count_fate) {
      ++stats.uid_conflicts;
      spdlog::info("k8s: {}: the pod now has uid {} (recreated), not {}: not evicted", what, uid, e.uid);
    } else {
      refuse_write(deps, what, false, "the pod under that name is another one now (uid " + uid + ")");
    }
    return done(R::NotNeeded);
  }
  const json* spec = member(*pod, "spec");
  const std::string node = spec != nullptr ? string_member(*spec, "nodeName").value_or("") : "";
  if (node.empty()) {
    refuse_write(deps, what, false, "the pod has no spec.nodeName");
    return done(R::GaveUp);
  }
  if (node != deps.options.node_name) {
    refuse_write(deps, what, true, "the pod runs on node " + node);
    return done(R::NotNeeded);
  }
  out.on_node = true;
  // Already terminating: evicted by the run before a restart (whose answer
  // was lost with it), or deleted by someone else. A second Eviction would
  // change nothing but be counted twice.
  const json* deleting = meta != nullptr ? member(*meta, "deletionTimestamp") : nullptr;
  if (deleting != nullptr && !deleting->is_null()) {
    if (count_fate) spdlog::info("k8s: {}: the pod is already terminating: not evicted again", what);
    return done(R::NotNeeded);
  }
  // Already terminal: recorded by the run before a restart, or ended on
  // its own meanwhile. Its status stays as it is.
  const json* status = member(*pod, "status");
  const std::string phase = status != nullptr ? string_member(*status, "phase").value_or("") : "";
  if (terminal_done && (phase == "Failed" || phase == "Succeeded")) {
    spdlog::info("k8s: {}: the pod is already {}: its status is left as it is", what, phase);
    // An eviction record there already (the run before a restart wrote
    // it; its answer was lost): answered as a record, so that it is
    // watched like one the kubelet may undo.
    const bool evicted = phase == "Failed" && string_member(*status, "reason").value_or("") == "Evicted";
    return done(evicted ? R::Recorded : R::NotNeeded);
  }
  return out;
}

}  // namespace pressured::k8s
