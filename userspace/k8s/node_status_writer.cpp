#include "k8s/node_status_writer.hpp"

#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/log.hpp"
#include "k8s/api_retry.hpp"
#include "k8s/bounded_json.hpp"
#include "k8s/eviction_bodies.hpp"

namespace pressured::k8s {

using json = nlohmann::json;

// Read-modify-write on the Node's resourceVersion: a taint someone else adds
// between the GET and the PATCH makes the PATCH fail with 409, and the list
// is computed again from the fresh Node. Conflicts get a budget of their own
// and a short jittered pause, 10 to 50 ms (this is the reporter's worker, not
// the reactor): a controller rewriting the Node in a tight loop must not
// starve pressured's taint after a handful of tries.
NodeStatusWriter::NodeStatusWriter(WriterDeps deps)
    : deps_(deps),
      conflict_pause_({.initial = std::chrono::milliseconds(10), .max = std::chrono::milliseconds(10), .jitter = 4.0}) {}

void NodeStatusWriter::publish(const std::array<bool, kConditionCount>& status,
                               const std::array<bool, kConditionCount>& flipped) {
  const ReporterOptions& o = deps_.options;
  auto r = deps_.api.send(ApiAction::NodeStatus, "node conditions",
                          {"PATCH", "/api/v1/nodes/" + o.node_name + "/status",
                           conditions_patch(o.condition_prefix, status, flipped, rfc3339_now()),
                           "application/strategic-merge-patch+json"});
  if (r && r->status == 200) {
    ++deps_.stats.conditions_patched;
  } else if (r) {
    ++deps_.stats.failures;
    spdlog::error("k8s: node conditions: HTTP {}: {}", r->status, printable_excerpt(r->body));
  }
  if (o.taint_nodes) sync_taints(status);
}

void NodeStatusWriter::threshold_met(const Eviction& e) {
  const std::string& node = deps_.options.node_name;
  auto body = threshold_met_event_body(e, node, rfc3339_now());
  if (!body) return;
  auto r = deps_.api.send(ApiAction::NodeEvent, "node event for " + node,
                          {"POST", "/api/v1/namespaces/default/events", *body});
  if (r && r->status != 200 && r->status != 201 && r->status != 409) ++deps_.stats.failures;
}

void NodeStatusWriter::sync_taints(const std::array<bool, kConditionCount>& status) {
  const ReporterOptions& o = deps_.options;
  ReporterStats& stats = deps_.stats;
  const std::string path = "/api/v1/nodes/" + o.node_name;
  constexpr int kConflictAttempts = 20;
  for (int attempt = 1; attempt <= kConflictAttempts; ++attempt) {
    auto g = deps_.api.send(ApiAction::NodeStatus, "get node " + o.node_name, {.path = path});
    if (!g) return;
    if (g->status != 200) {
      ++stats.failures;
      spdlog::error("k8s: node taints: GET {}: HTTP {}: {}", path, g->status, printable_excerpt(g->body));
      return;
    }
    auto node = parse_bounded_json(g->body);
    const json* meta = node ? member(*node, "metadata") : nullptr;
    const json* rv = meta != nullptr ? member(*meta, "resourceVersion") : nullptr;
    if (meta == nullptr || !meta->is_object() || (rv != nullptr && !rv->is_string())) {
      ++stats.failures;
      spdlog::error("k8s: node taints: GET {}: not a Node{}", path,
                    node ? std::string() : ": " + node.error().message);
      return;
    }
    const json* spec = member(*node, "spec");
    const json* taints = spec != nullptr ? member(*spec, "taints") : nullptr;
    auto next = updated_taints(taints != nullptr ? *taints : json::array(), o.taint_key_prefix, status, rfc3339_now());
    if (!next) return;
    json patch{{"metadata", {{"resourceVersion", rv != nullptr ? rv->get<std::string>() : std::string()}}},
               {"spec", {{"taints", *next}}}};
    auto p = deps_.api.send(ApiAction::NodeStatus, "taint node " + o.node_name,
                            {"PATCH", path, patch.dump(), "application/merge-patch+json"});
    if (!p) return;
    if (p->status == 200) {
      ++stats.taints_updated;
      spdlog::info("k8s: node {} taints now {}", o.node_name, next->dump());
      return;
    }
    if (p->status == 409) {
      ++stats.taint_conflicts;
      std::this_thread::sleep_for(conflict_pause_.next());
      continue;
    }
    ++stats.failures;
    spdlog::error("k8s: node taints: PATCH {}: HTTP {}: {}", path, p->status, printable_excerpt(p->body));
    return;
  }
  ++stats.failures;
  spdlog::error("k8s: node taints: the Node kept changing under {} attempts", kConflictAttempts);
}

}  // namespace pressured::k8s
