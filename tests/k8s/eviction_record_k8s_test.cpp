// The record an eviction leaves, against a real kube-apiserver 1.20, as the
// `pressured` ServiceAccount of deploy/rbac.yaml: the pod stays, Failed with
// reason Evicted, the kubelet's message and the DisruptionTarget condition;
// its Event carries the kubelet's annotations; a disruption budget is not
// asked. What the kubelet and the controllers then do: docs/kubernetes.md,
// "The eviction record".
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fakes/privilege.hpp"
#include "k8s/control_plane.hpp"
#include "k8s/reporter_harness.hpp"

namespace pressured::k8s {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::api_requests;
using testing::scraped;

// The status path: mark_failed, the default.
testing::ReporterHarness make_reporter(const testing::ControlPlane& cp) {
  return testing::make_reporter(cp, /*mark_failed=*/true);
}

// An eviction with the ranking keys and the wake source its message reports.
Eviction eviction_of(const std::string& ns, const std::string& name, const std::string& uid) {
  Eviction e = testing::eviction_of(ns, name, uid);
  e.keys.usage = 700ull << 20;
  e.keys.request = 512ull << 20;
  e.keys.over_request = true;
  e.wake_source = "psi";
  return e;
}

json get_json(const testing::ControlPlane& cp, const std::string& path) {
  auto r = cp.admin_call("GET", path);
  EXPECT_EQ(r.status, 200) << path << ": " << r.body;
  return r.status == 200 ? json::parse(r.body) : json();
}

TEST(K8sEvictionRecord, PodStaysFailedEvictedWithTheMessageAndDisruptionTargetAndTheEventHasTheAnnotations) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("record"));
  auto uid = cp->create_pod("record", "cache", "node-a", json::object(), 0);
  ASSERT_TRUE(uid) << uid.error().message;
  auto running = cp->set_pod_running("record", "cache");
  ASSERT_TRUE(running) << running.error().message;
  auto h = make_reporter(*cp);
  const Eviction e = eviction_of("record", "cache", *uid);
  h.reporter->report_eviction(e);
  ASSERT_TRUE(h.reporter->drain(30s));
  const Metrics& m = *h.metrics;
  EXPECT_EQ(api_requests(m, "pod_status", "success"), 1u);
  EXPECT_FALSE(api_requests(m, "eviction", "success").has_value()) << "no Eviction: the pod must stay";
  EXPECT_EQ(scraped(m, "pressured_kubernetes_report_failures_total"), 0u);

  json pod = get_json(*cp, "/api/v1/namespaces/record/pods/cache");
  ASSERT_TRUE(pod.is_object());
  EXPECT_FALSE(pod["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(pod["status"]["phase"], "Failed");
  EXPECT_EQ(pod["status"]["reason"], "Evicted");
  const std::string message = eviction_message(e);
  EXPECT_EQ(pod["status"]["message"], message);
  EXPECT_EQ(message.rfind("The node was low on resource: memory. Threshold quantity: 256Mi, available: 255Mi. Pod "
                          "cache was using 700Mi, request is 512Mi, has larger consumption of memory. ",
                          0),
            0u)
      << message;
  json disruption;
  for (const auto& c : pod["status"]["conditions"]) {
    if (c["type"] == "DisruptionTarget") disruption = c;
  }
  ASSERT_TRUE(disruption.is_object()) << pod["status"].dump();
  EXPECT_EQ(disruption["status"], "True");
  EXPECT_EQ(disruption["reason"], "TerminationByKubelet");
  EXPECT_EQ(disruption["message"], message);
  EXPECT_TRUE(disruption.contains("lastTransitionTime"));
  bool ready_kept = false;
  for (const auto& c : pod["status"]["conditions"]) ready_kept = ready_kept || c["type"] == "Ready";
  EXPECT_TRUE(ready_kept) << "a strategic merge by type: the kubelet's conditions are left to the kubelet";

  json events = get_json(*cp, "/api/v1/namespaces/record/events?fieldSelector=involvedObject.name%3Dcache");
  ASSERT_EQ(events["items"].size(), 1u) << events.dump();
  const json& ev = events["items"][0];
  EXPECT_EQ(ev["reason"], "Evicted");
  EXPECT_EQ(ev["message"], message);
  EXPECT_EQ(ev["metadata"]["annotations"],
            (json{{"offending_containers", ""},
                  {"offending_containers_usage", ""},
                  {"offending_pod", "cache"},
                  {"offending_pod_usage", "700Mi"},
                  {"starved_resource", "memory"}}));

  // Sent again (a restart before the answer): the pod is terminal, its
  // record stays as it is, and the Event is not recorded twice.
  h.reporter->report_eviction(e);
  ASSERT_TRUE(h.reporter->drain(30s));
  EXPECT_EQ(api_requests(m, "pod_status", "success"), 1u);
  EXPECT_EQ(api_requests(m, "event", "conflict"), 1u);
  EXPECT_EQ(scraped(m, "pressured_kubernetes_report_failures_total"), 0u);
}

TEST(K8sEvictionRecord, ADisruptionBudgetIsNotAsked) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("record-pdb"));
  auto uid = cp->create_pod("record-pdb", "db-0", "node-a", json{{"app", "db"}}, 30);
  ASSERT_TRUE(uid) << uid.error().message;
  auto pdb = cp->create_pdb_allowing_none("record-pdb", "db", json{{"app", "db"}});
  ASSERT_TRUE(pdb) << pdb.error().message;
  auto running = cp->set_pod_running("record-pdb", "db-0");
  ASSERT_TRUE(running) << running.error().message;
  // The budget refuses a voluntary disruption: the Eviction API answers 429.
  auto r = cp->admin_call("POST", "/api/v1/namespaces/record-pdb/pods/db-0/eviction",
                          json::parse(eviction_body(eviction_of("record-pdb", "db-0", *uid), "policy/v1beta1")));
  ASSERT_EQ(r.status, 429) << r.body;

  auto h = make_reporter(*cp);
  h.reporter->report_eviction(eviction_of("record-pdb", "db-0", *uid));
  ASSERT_TRUE(h.reporter->drain(30s));
  EXPECT_EQ(api_requests(*h.metrics, "pod_status", "success"), 1u);
  EXPECT_FALSE(api_requests(*h.metrics, "eviction", "too_many_requests").has_value());
  json pod = get_json(*cp, "/api/v1/namespaces/record-pdb/pods/db-0");
  EXPECT_EQ(pod["status"]["phase"], "Failed");
  EXPECT_EQ(pod["status"]["reason"], "Evicted");
}

// The uid in the status patch: a pod recreated under the name between
// pressured's read and its patch is never marked Failed.
TEST(K8sEvictionRecord, TheStatusPatchOfAnotherUidIsRefused) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("record-uid"));
  auto uid = cp->create_pod("record-uid", "web", "node-a", json::object(), 0);
  ASSERT_TRUE(uid) << uid.error().message;
  auto id = cp->pressured_identity();
  ASSERT_TRUE(id) << id.error().message;
  ApiClient client(*id, 10s);
  auto r = client.request("PATCH", "/api/v1/namespaces/record-uid/pods/web/status",
                          pod_status_patch(eviction_of("record-uid", "web", "not-" + *uid), rfc3339_now()),
                          "application/strategic-merge-patch+json");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->status == 409 || (r->status == 422 && r->body.find("metadata.uid") != std::string::npos))
      << r->status << " " << r->body;
  json pod = get_json(*cp, "/api/v1/namespaces/record-uid/pods/web");
  EXPECT_NE(pod["status"].value("phase", ""), "Failed");
}

}  // namespace
}  // namespace pressured::k8s
