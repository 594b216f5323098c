#pragma once
// pressured's reporter against the test control plane (control_plane.hpp), as
// the eviction tests (eviction_k8s_test, eviction_record_k8s_test) drive it:
// authenticated as the `pressured` ServiceAccount of deploy/base/rbac.yaml, its
// metrics and every HTTP answer it got kept for the test to read.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "k8s/control_plane.hpp"
#include "k8s/reporter.hpp"
#include "metrics/exposition.hpp"

namespace pressured::testing {

/// Attempts of one API action with one outcome, as exported.
inline std::optional<double> api_requests(const Metrics& m, const char* action, const char* result) {
  return scraped(m, "pressured_kubernetes_api_requests_total", {{"action", action}, {"result", result}});
}

/// Every HTTP answer the reporter got, by action and outcome.
struct ApiOutcomes {
  std::mutex mu;
  std::map<std::pair<ApiAction, ApiOutcome>, int> n;
  int count(ApiAction a, ApiOutcome o) {
    std::lock_guard lk(mu);
    return n[{a, o}];
  }
  int total(ApiAction a) {
    std::lock_guard lk(mu);
    int t = 0;
    for (auto& [k, v] : n) t += k.first == a ? v : 0;
    return t;
  }
};

struct ReporterHarness {
  std::unique_ptr<Metrics> metrics = std::make_unique<Metrics>(MetricsOptions{.node = "node-a"});  // outlives reporter
  std::unique_ptr<k8s::Reporter> reporter;
  std::shared_ptr<ApiOutcomes> outcomes = std::make_shared<ApiOutcomes>();
};

/// A started reporter for node-a (no taints, 50 ms first backoff).
/// `mark_failed`: true records an eviction in the pod's status (the
/// default), false goes through the Eviction API (the fallback when a server
/// refuses the status update).
inline ReporterHarness make_reporter(const ControlPlane& cp, bool mark_failed) {
  using namespace std::chrono_literals;
  auto id = cp.pressured_identity();
  EXPECT_TRUE(id) << (id ? "" : id.error().message);
  k8s::ReporterOptions o;
  o.mark_failed = mark_failed;
  o.node_name = "node-a";
  o.initial_backoff = 50ms;
  o.taint_nodes = false;
  ReporterHarness h;
  h.reporter = std::make_unique<k8s::Reporter>(k8s::ApiClient(*id, 10s), o);
  h.reporter->attach_metrics(*h.metrics);
  auto out = h.outcomes;
  h.reporter->set_outcome_hook([out](ApiAction a, ApiOutcome oc) {
    std::lock_guard lk(out->mu);
    ++out->n[{a, oc}];
  });
  h.reporter->start();
  return h;
}

/// A memory.available eviction of pod ns/name (uid) with `grace` seconds,
/// 255Mi available against a 256Mi threshold.
inline Eviction eviction_of(const std::string& ns, const std::string& name, const std::string& uid,
                            int64_t grace = 0) {
  Eviction e;
  e.id = "test-" + name;
  e.uid = uid;
  e.name = name;
  e.namespace_ = ns;
  e.grace_period_seconds = grace;
  e.signal = Signal::MemoryAvailable;
  e.observed = 255.0 * 1024 * 1024;
  e.threshold_value = 256.0 * 1024 * 1024;
  return e;
}

}  // namespace pressured::testing
