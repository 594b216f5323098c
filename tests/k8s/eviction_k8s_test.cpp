// pressured's evictions against a real kube-apiserver 1.20, authenticated as
// the `pressured` ServiceAccount bound to deploy/base/rbac.yaml (a TokenRequest
// token; nothing as admin). Any verb the ClusterRole lacks shows up as a 403,
// counted as a failure, and fails the test.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fakes/privilege.hpp"
#include "k8s/control_plane.hpp"
#include "k8s/reporter_harness.hpp"

namespace pressured::k8s {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::api_requests;
using testing::eviction_of;
using testing::scraped;

// The Eviction API path (the fallback when a server refuses the status
// update; tests/k8s/eviction_record_k8s_test.cpp has the status path).
testing::ReporterHarness make_reporter(const testing::ControlPlane& cp) {
  return testing::make_reporter(cp, /*mark_failed=*/false);
}

json get_pod(const testing::ControlPlane& cp, const std::string& ns, const std::string& name, long* status) {
  auto r = cp.admin_call("GET", "/api/v1/namespaces/" + ns + "/pods/" + name);
  *status = r.status;
  return r.status == 200 ? json::parse(r.body) : json();
}

TEST(K8sEviction, ServerAnswersPolicyV1WithVersionNotServedThen1beta1IsUsedAndRemembered) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("evict-v1"));
  // What the server says to the v1 body: the reason for the fallback.
  auto uid0 = cp->create_pod("evict-v1", "probe", "node-a");
  ASSERT_TRUE(uid0) << uid0.error().message;
  auto probe = cp->admin_call("POST", "/api/v1/namespaces/evict-v1/pods/probe/eviction",
                              json::parse(eviction_body(eviction_of("evict-v1", "probe", *uid0, 0))));
  EXPECT_TRUE(eviction_version_not_served(probe)) << probe.status << " " << probe.body;

  auto h = make_reporter(*cp);
  for (const char* name : {"web-1", "web-2"}) {
    auto uid = cp->create_pod("evict-v1", name, "node-a", json::object(), 30);
    ASSERT_TRUE(uid) << uid.error().message;
    h.reporter->report_eviction(eviction_of("evict-v1", name, *uid, 7));
    ASSERT_TRUE(h.reporter->drain(30s));
    long st = 0;
    json pod = get_pod(*cp, "evict-v1", name, &st);
    ASSERT_EQ(st, 200) << "no kubelet: a graceful eviction leaves the pod terminating";
    EXPECT_TRUE(pod["metadata"].contains("deletionTimestamp")) << pod.dump();
    EXPECT_EQ(pod["metadata"].value("deletionGracePeriodSeconds", -1), 7);
  }
  const Metrics& s = *h.metrics;
  EXPECT_EQ(api_requests(s, "eviction", "success"), 2u);
  EXPECT_EQ(scraped(s, "pressured_kubernetes_evictions_v1beta1_total"), 2u);
  EXPECT_EQ(scraped(s, "pressured_kubernetes_report_failures_total"), 0u);
  // One 400 for the v1 attempt, then v1beta1 only (the answer is remembered).
  EXPECT_EQ(h.outcomes->count(ApiAction::Eviction, ApiOutcome::ClientError), 1);
  EXPECT_EQ(h.outcomes->count(ApiAction::Eviction, ApiOutcome::Success), 2);
  EXPECT_EQ(api_requests(s, "event", "success"), 2u);
}

TEST(K8sEviction, DisruptionBudgetRefusesWith429ThenDeleteWithSameGraceAndUid) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("evict-pdb"));
  auto uid = cp->create_pod("evict-pdb", "db-0", "node-a", json{{"app", "db"}}, 30);
  ASSERT_TRUE(uid) << uid.error().message;
  auto pdb = cp->create_pdb_allowing_none("evict-pdb", "db", json{{"app", "db"}});
  ASSERT_TRUE(pdb) << pdb.error().message;
  // The kubelet would have reported it running and ready: the API server
  // evicts Pending pods, and not-ready pods while the budget is otherwise
  // met, without asking the budget.
  auto running = cp->set_pod_running("evict-pdb", "db-0");
  ASSERT_TRUE(running) << running.error().message;

  auto h = make_reporter(*cp);
  h.reporter->report_eviction(eviction_of("evict-pdb", "db-0", *uid, 12));
  ASSERT_TRUE(h.reporter->drain(30s));
  const Metrics& s = *h.metrics;
  EXPECT_EQ(h.outcomes->count(ApiAction::Eviction, ApiOutcome::TooManyRequests), 1)
      << "the budget must refuse; accepted " << api_requests(s, "eviction", "success").value_or(-1) << ", failures "
      << scraped(s, "pressured_kubernetes_report_failures_total").value_or(-1)
      << ", pdb " << cp->admin_call("GET", "/apis/policy/v1beta1/namespaces/evict-pdb/poddisruptionbudgets/db").body;
  EXPECT_EQ(scraped(s, "pressured_kubernetes_eviction_fallbacks_total"), 1u);
  EXPECT_EQ(api_requests(s, "delete", "success"), 1u);
  EXPECT_EQ(scraped(s, "pressured_kubernetes_report_failures_total"), 0u);
  long st = 0;
  json pod = get_pod(*cp, "evict-pdb", "db-0", &st);
  ASSERT_EQ(st, 200);
  EXPECT_TRUE(pod["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(pod["metadata"].value("deletionGracePeriodSeconds", -1), 12) << "the DELETE keeps the eviction's grace";
}

// The kubelet's "immediate" is 1 s (eviction_manager.go,
// immediateEvictionGracePeriodSeconds), never 0: in the API a grace of 0 is a
// force deletion, the pod object gone before its containers are confirmed
// gone. A hard eviction (grace 0 in the record, killed at once locally) asks
// the API for 1 s on the Eviction and on its DELETE fallback: with no
// kubelet here, the pod object stays, terminating.
TEST(K8sEviction, ImmediateEvictionGracePeriodIsOneSecondNotAForceDeletion) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("evict-hard"));
  auto uid = cp->create_pod("evict-hard", "web", "node-a", json::object(), 30);
  ASSERT_TRUE(uid) << uid.error().message;
  auto db = cp->create_pod("evict-hard", "db-0", "node-a", json{{"app", "db"}}, 30);
  ASSERT_TRUE(db) << db.error().message;
  auto pdb = cp->create_pdb_allowing_none("evict-hard", "db", json{{"app", "db"}});
  ASSERT_TRUE(pdb) << pdb.error().message;
  auto running = cp->set_pod_running("evict-hard", "db-0");
  ASSERT_TRUE(running) << running.error().message;

  auto h = make_reporter(*cp);
  h.reporter->report_eviction(eviction_of("evict-hard", "web", *uid, 0));
  h.reporter->report_eviction(eviction_of("evict-hard", "db-0", *db, 0));
  ASSERT_TRUE(h.reporter->drain(30s));
  EXPECT_EQ(scraped(*h.metrics, "pressured_kubernetes_eviction_fallbacks_total"), 1u) << "db-0 through DELETE";
  for (const char* name : {"web", "db-0"}) {
    long st = 0;
    json pod = get_pod(*cp, "evict-hard", name, &st);
    ASSERT_EQ(st, 200) << name << ": a grace of 0 would have force-deleted the pod object";
    EXPECT_TRUE(pod["metadata"].contains("deletionTimestamp")) << pod.dump();
    EXPECT_EQ(pod["metadata"].value("deletionGracePeriodSeconds", -1), 1) << name;
  }
}

TEST(K8sEviction, PodRecreatedUnderTheSameNameIsNeverHit) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("evict-uid"));
  auto old_uid = cp->create_pod("evict-uid", "job", "node-a", json::object(), 0);
  ASSERT_TRUE(old_uid);
  auto d = cp->admin_call("DELETE", "/api/v1/namespaces/evict-uid/pods/job", json{{"gracePeriodSeconds", 0}});
  ASSERT_EQ(d.status, 200) << d.body;
  auto new_uid = cp->create_pod("evict-uid", "job", "node-a");
  ASSERT_TRUE(new_uid);
  ASSERT_NE(*old_uid, *new_uid);

  auto h = make_reporter(*cp);
  h.reporter->report_eviction(eviction_of("evict-uid", "job", *old_uid, 0));
  ASSERT_TRUE(h.reporter->drain(30s));
  EXPECT_EQ(scraped(*h.metrics, "pressured_kubernetes_evictions_skipped_total", {{"reason", "uid_changed"}}), 1u);
  // The read before the eviction sees the new uid: nothing is sent (1.20
  // would spend ~10 s retrying the failed precondition before its 409).
  EXPECT_EQ(h.outcomes->total(ApiAction::Eviction), 0);
  EXPECT_EQ(h.outcomes->total(ApiAction::Delete), 0);
  EXPECT_EQ(scraped(*h.metrics, "pressured_kubernetes_report_failures_total"), 0u);
  long st = 0;
  json pod = get_pod(*cp, "evict-uid", "job", &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(pod["metadata"]["uid"], *new_uid);
  EXPECT_FALSE(pod["metadata"].contains("deletionTimestamp")) << "the new pod was hit";
}

// The uid precondition itself, as the server enforces it when a pod is
// recreated between pressured's read and its DELETE: 409, counted, final.
TEST(K8sEviction, UidPreconditionOnTheDeleteAnswers409) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("evict-409"));
  auto uid = cp->create_pod("evict-409", "svc", "node-a");
  ASSERT_TRUE(uid);
  auto id = cp->pressured_identity();
  ASSERT_TRUE(id);
  auto stale = eviction_of("evict-409", "svc", "00000000-0000-0000-0000-000000000002", 0);
  auto r = ApiClient(*id, 10s).request("DELETE", "/api/v1/namespaces/evict-409/pods/svc", delete_body(stale));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 409) << r->body;
  long st = 0;
  json pod = get_pod(*cp, "evict-409", "svc", &st);
  EXPECT_FALSE(pod["metadata"].contains("deletionTimestamp"));
}

TEST(K8sEviction, PodAlreadyGoneIsCountedNotAnError) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("evict-gone"));
  auto h = make_reporter(*cp);
  h.reporter->report_eviction(eviction_of("evict-gone", "vanished", "00000000-0000-0000-0000-000000000001", 0));
  ASSERT_TRUE(h.reporter->drain(30s));
  EXPECT_EQ(scraped(*h.metrics, "pressured_kubernetes_evictions_skipped_total", {{"reason", "pod_gone"}}), 1u);
  EXPECT_EQ(scraped(*h.metrics, "pressured_kubernetes_report_failures_total"), 0u);
}

TEST(K8sEviction, EventIsReadableBackWithTheKubeletStyleMessage) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("evict-event"));
  auto uid = cp->create_pod("evict-event", "cache", "node-a", json::object(), 0);
  ASSERT_TRUE(uid);
  auto h = make_reporter(*cp);
  auto e = eviction_of("evict-event", "cache", *uid, 0);
  e.keys.usage = 700ull << 20;
  e.keys.over_request = true;
  e.containers = {{"app", 700ull << 20, 0}};
  e.wake_source = "psi";
  e.detection_latency_seconds = 0.0025;
  h.reporter->report_eviction(e);
  ASSERT_TRUE(h.reporter->drain(30s));
  EXPECT_EQ(api_requests(*h.metrics, "event", "success"), 1u);
  auto r = cp->admin_call("GET", "/api/v1/namespaces/evict-event/events?fieldSelector=involvedObject.name%3Dcache");
  ASSERT_EQ(r.status, 200) << r.body;
  auto items = json::parse(r.body)["items"];
  ASSERT_EQ(items.size(), 1u) << r.body;
  const auto& ev = items[0];
  EXPECT_EQ(ev["reason"], "Evicted");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["involvedObject"]["uid"], *uid);
  EXPECT_EQ(ev["source"]["component"], "pressured");
  EXPECT_EQ(ev["message"],
            "The node was low on resource: memory. Threshold quantity: 256Mi, available: 255Mi. Container app was using "
            "700Mi, request is 0, has larger consumption of memory. Evicted by pressured (eviction test-cache) for "
            "memory.available (hard threshold), woken by psi, decided 2.5 ms after the kernel's event; the only pod "
            "that could be evicted.");
}

// The kubelet's eviction manager records, on the Node, a Warning
// EvictionThresholdMet "Attempting to reclaim <resource>" before it evicts
// for a node threshold; pressured does the same, once per eviction (named by
// it), read back from the 1.20 API server as the ServiceAccount wrote it.
TEST(K8sEviction, NodeGetsTheKubeletsEvictionThresholdMetEvent) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("evict-node-event"));
  auto uid = cp->create_pod("evict-node-event", "hog", "node-a", json::object(), 0);
  ASSERT_TRUE(uid);
  auto h = make_reporter(*cp);
  auto e = eviction_of("evict-node-event", "hog", *uid, 0);
  e.id = "node-event-1";
  h.reporter->report_eviction(e);
  h.reporter->report_eviction(e);  // sent again (a restart): recorded once
  ASSERT_TRUE(h.reporter->drain(30s));
  EXPECT_EQ(api_requests(*h.metrics, "node_event", "success"), 1u);
  EXPECT_EQ(api_requests(*h.metrics, "node_event", "conflict"), 1u);
  auto r = cp->admin_call("GET", "/api/v1/namespaces/default/events?fieldSelector=reason%3DEvictionThresholdMet");
  ASSERT_EQ(r.status, 200) << r.body;
  json found;
  const json events = json::parse(r.body);  // kept: the loop runs over a part of it
  for (const auto& ev : events["items"]) {
    if (ev["metadata"]["name"] == "node-a.node-event-1") found = ev;
  }
  ASSERT_TRUE(found.is_object()) << r.body;
  EXPECT_EQ(found["type"], "Warning");
  EXPECT_EQ(found["message"], "Attempting to reclaim memory");
  EXPECT_EQ(found["involvedObject"]["kind"], "Node");
  EXPECT_EQ(found["involvedObject"]["name"], "node-a");
  EXPECT_EQ(found["involvedObject"]["uid"], "node-a") << "the kubelet's nodeRef: the node's name as its uid";
  EXPECT_EQ(scraped(*h.metrics, "pressured_kubernetes_report_failures_total"), 0u);
}

}  // namespace
}  // namespace pressured::k8s
