// The record an eviction leaves, against a real kube-apiserver 1.20, as the
// `pressured` ServiceAccount of deploy/base/rbac.yaml: the pod stays, Failed with
// reason Evicted, the kubelet's message and the DisruptionTarget condition;
// its Event carries the kubelet's annotations; a disruption budget is not
// asked. What the kubelet and the controllers then do: docs/kubernetes.md,
// "The eviction record".
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <thread>

#include "engine/eviction_words.hpp"
#include "fakes/privilege.hpp"
#include "k8s/control_plane.hpp"
#include "k8s/reporter_harness.hpp"
#include "pods/apiserver_source.hpp"
#include "pressured/policy.hpp"

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
  e.containers = {{"app", 700ull << 20, 512ull << 20}};
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
  Eviction e = eviction_of("record", "cache", *uid);
  constexpr uint64_t kMi = 1 << 20;
  e.grew = ContainerGrowth{"app", ContainerGrowth::Basis::Growth, 700 * kMi, 512 * kMi, 200 * kMi, 3.0};
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
  EXPECT_EQ(message.rfind("The node was low on resource: memory. Threshold quantity: 256Mi, available: 255Mi. "
                          "Container app was using 700Mi, request is 512Mi, has larger consumption of memory. ",
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
  EXPECT_FALSE(disruption.contains("observedGeneration"))
      << "1.20 tracks no pod generation: no observedGeneration is sent (the server-capability check)";
  bool ready_kept = false;
  for (const auto& c : pod["status"]["conditions"]) ready_kept = ready_kept || c["type"] == "Ready";
  EXPECT_TRUE(ready_kept) << "a strategic merge by type: the kubelet's conditions are left to the kubelet";

  json events = get_json(*cp, "/api/v1/namespaces/record/events?fieldSelector=involvedObject.name%3Dcache");
  ASSERT_EQ(events["items"].size(), 1u) << events.dump();
  const json& ev = events["items"][0];
  EXPECT_EQ(ev["reason"], "Evicted");
  EXPECT_EQ(ev["message"], message);
  EXPECT_EQ(ev["metadata"]["annotations"],
            (json{{"offending_containers", "app"},
                  {"offending_containers_usage", "700Mi"},
                  {"starved_resource", "memory"},
                  {"pressured.io/grown-container", "app"},
                  {"pressured.io/grown-container-detail", "container app grew by 200Mi in 3.0s to 700Mi (request 512Mi)"}}));

  // Sent again (a restart before the answer): the pod is terminal, its
  // record stays as it is, and the Event is not recorded twice. Answered as
  // a record, so that the policy watches it as one the kubelet may undo.
  std::mutex mu;
  std::vector<EvictionResult> results;
  h.reporter->set_eviction_hook([&](const std::string&, EvictionResult r) {
    std::lock_guard lk(mu);
    results.push_back(r);
  });
  h.reporter->report_eviction(e);
  ASSERT_TRUE(h.reporter->drain(30s));
  h.reporter->set_eviction_hook({});
  EXPECT_EQ(results, std::vector<EvictionResult>{EvictionResult::Recorded});
  EXPECT_EQ(api_requests(m, "pod_status", "success"), 1u);
  EXPECT_EQ(api_requests(m, "event", "conflict"), 1u);
  EXPECT_EQ(scraped(m, "pressured_kubernetes_report_failures_total"), 0u);
}

// A record naming another node's pod (a checkpoint copied from another
// node, or written by hand) is never acted on: neither path (the status
// record, the Eviction API) nor the end of an undone record writes to it, and
// no Event names it. The real server's own spec.nodeName is what decides.
TEST(K8sEvictionRecord, APodOnAnotherNodeIsNeverWrittenAbout) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("record-node"));
  auto uid = cp->create_pod("record-node", "elsewhere", "node-b", json::object(), 30);
  ASSERT_TRUE(uid) << uid.error().message;
  auto running = cp->set_pod_running("record-node", "elsewhere");
  ASSERT_TRUE(running) << running.error().message;
  for (bool mark_failed : {true, false}) {
    auto h = testing::make_reporter(*cp, mark_failed);  // node-a's
    const Eviction e = eviction_of("record-node", "elsewhere", *uid);
    h.reporter->report_eviction(e);
    h.reporter->end_pod(e, RecordUndone::ProcessesBack);
    ASSERT_TRUE(h.reporter->drain(30s));
    EXPECT_EQ(scraped(*h.metrics, "pressured_kubernetes_pod_writes_refused_total", {{"reason", "other_node"}}), 2u)
        << "mark_failed=" << mark_failed;
    for (ApiAction write : {ApiAction::PodStatus, ApiAction::Eviction, ApiAction::Delete, ApiAction::Event}) {
      EXPECT_EQ(h.outcomes->total(write), 0) << static_cast<int>(write) << " sent, mark_failed=" << mark_failed;
    }
  }
  json pod = get_json(*cp, "/api/v1/namespaces/record-node/pods/elsewhere");
  ASSERT_TRUE(pod.is_object());
  EXPECT_FALSE(pod["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(pod["status"]["phase"], "Running");
  json events = get_json(*cp, "/api/v1/namespaces/record-node/events");
  EXPECT_TRUE(events["items"].empty()) << events.dump();
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

// ---- The record the kubelet undoes. The daemon's part by hand: the
// eviction policy (what to do), the reporter (the API), the apiserver pod
// source (the phase as pressured sees it), the victim's processes (here: gone
// after the kill, back when a test says so). The kubelet is played by a
// status write as its status manager sends it: phase Running, no reason, no
// message (docs/kubernetes.md, "What the kubelet does with the record").
struct RecordLoop {
  testing::ControlPlane& cp;
  std::string ns, name, uid;
  testing::ReporterHarness h;
  std::unique_ptr<pods::ApiServerPodSource> source;
  EvictionPolicy policy{PolicyConfig{.api = true}};
  NodeSnapshot snap;
  std::mutex mu;
  std::vector<ApiAnswer> answers;  // from the reporter's worker
  std::vector<RecordUndone> ends;  // EndApi actions, in order
  bool running = false;            // the victim's processes are back
  double t = 0;

  RecordLoop(testing::ControlPlane& c, std::string n, std::string p, std::string u)
      : cp(c), ns(std::move(n)), name(std::move(p)), uid(std::move(u)), h(make_reporter(c)) {
    h.reporter->set_eviction_hook([this](const std::string& id, EvictionResult r) {
      std::lock_guard lk(mu);
      answers.push_back({id,
                         r == EvictionResult::Landed || r == EvictionResult::Recorded ? ApiAnswer::Result::Landed
                         : r == EvictionResult::NotNeeded                             ? ApiAnswer::Result::NotNeeded
                         : r == EvictionResult::GaveUp                                ? ApiAnswer::Result::GaveUp
                                                                                      : ApiAnswer::Result::Dropped,
                         r == EvictionResult::Recorded});
    });
    auto id = cp.pressured_identity();
    EXPECT_TRUE(id);
    pods::ApiServerSourceOptions o;
    o.server = *id;
    o.node_name = "node-a";
    o.request_timeout = 3s;
    o.stall_grace = 2s;
    o.initial_backoff = 100ms;
    o.max_backoff = 1s;
    source = std::make_unique<pods::ApiServerPodSource>(o);
    EXPECT_TRUE(source->refresh());
    source->start(30s);
    Pod pod;
    pod.uid = uid;
    pod.name = name;
    pod.namespace_ = ns;
    pod.metadata_known = true;
    snap.pods.push_back(pod);
  }
  ~RecordLoop() {
    h.reporter->stop();
    source->stop();
  }

  // One step of the daemon's loop, 0.25 s of the policy's time later.
  // `evict`: the engine's candidate (the first step).
  std::vector<PolicyAction> step(bool evict = false) {
    t += 0.25;
    const TimePoint now{std::chrono::milliseconds(static_cast<int64_t>(t * 1000))};
    snap.taken_at = now;
    auto meta = source->current();
    auto m = meta->find(uid);
    if (m == meta->end()) {
      snap.pods.clear();  // gone from the node's view
    } else if (!snap.pods.empty()) {
      snap.pods[0].phase = m->second.phase;
    }
    Decisions d;
    if (evict) {
      Eviction e = eviction_of(ns, name, uid);
      e.kind = ThresholdKind::Hard;
      e.metadata_known = true;
      e.decided_at = now;
      d.candidates.push_back(e);
    }
    PolicyInputs in;
    for (const Eviction& e : policy.probes(now)) (running ? in.running : in.exited).push_back(e.uid);
    {
      std::lock_guard lk(mu);
      in.api_answers = std::exchange(answers, {});
    }
    auto actions = policy.step(now, snap, d, in);
    for (const auto& a : actions) {
      if (a.kind == PolicyAction::Kind::ReportApi) h.reporter->report_eviction(a.eviction);
      if (a.kind == PolicyAction::Kind::EndApi) {
        ends.push_back(a.undone);
        h.reporter->end_pod(a.eviction, a.undone);
      }
    }
    return actions;
  }
  // Steps until `cond`, at most `timeout` of real time (the watch's pace).
  bool step_until(const std::function<bool()>& cond, std::chrono::seconds timeout = 30s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      step();
      if (cond()) return true;
      std::this_thread::sleep_for(50ms);
    }
    return cond();
  }
  const EvictionRecord* record() const {
    for (const auto& r : policy.state().records) {
      if (r.api != EvictionRecord::Api::None && r.eviction.uid == uid) return &r;
    }
    return nullptr;
  }
  // The eviction decided and killed, its record written and taken, the
  // victim's processes gone: done with, watched.
  void evict_and_record() {
    auto first = step(/*evict=*/true);
    ASSERT_FALSE(first.empty());
    ASSERT_EQ(first[0].kind, PolicyAction::Kind::Start);
    ASSERT_TRUE(h.reporter->drain(30s));
    ASSERT_TRUE(step_until([&] { return record() != nullptr && record()->status != EvictionRecord::Status::None && !policy.busy(); }))
        << "the record taken, the victim released";
  }
};

// The kubelet writes its status over the record: pressured sees the phase
// Failed, then Running again, and ends the pod through the Eviction API
// once; a disruption budget refuses it (429) and the DELETE with the same
// grace follows. Processes coming back afterwards end nothing again.
TEST(K8sEvictionRecord, ARecordTheKubeletUndoesEndsThePodThroughTheApiOnce) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("record-undone"));
  auto uid = cp->create_pod("record-undone", "worker", "node-a", json{{"app", "worker"}}, 0);
  ASSERT_TRUE(uid) << uid.error().message;
  ASSERT_TRUE(cp->create_pdb_allowing_none("record-undone", "worker", json{{"app", "worker"}}));
  ASSERT_TRUE(cp->set_pod_running("record-undone", "worker"));
  RecordLoop loop(*cp, "record-undone", "worker", *uid);
  loop.evict_and_record();
  ASSERT_TRUE(loop.step_until([&] { return loop.record()->status == EvictionRecord::Status::Seen; })) << "the source shows the pod Failed";
  EXPECT_TRUE(loop.ends.empty());

  // The kubelet's status manager: its own phase, no reason, no message.
  auto r = cp->admin_call("PATCH", "/api/v1/namespaces/record-undone/pods/worker/status",
                          json{{"status", {{"phase", "Running"}, {"reason", nullptr}, {"message", nullptr}}}},
                          "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(loop.step_until([&] { return !loop.ends.empty(); })) << "the undone record seen";
  EXPECT_EQ(loop.ends, std::vector<RecordUndone>{RecordUndone::PhaseReverted});
  ASSERT_TRUE(loop.h.reporter->drain(30s));
  const Metrics& m = *loop.h.metrics;
  EXPECT_EQ(api_requests(m, "eviction", "too_many_requests"), 1u) << "the budget asked, once";
  EXPECT_EQ(api_requests(m, "delete", "success"), 1u);
  EXPECT_EQ(scraped(m, "pressured_kubernetes_eviction_records_undone_total", {{"cause", "phase"}}), 1u);
  EXPECT_EQ(scraped(m, "pressured_kubernetes_report_failures_total"), 0u);
  // Ended with the kubelet's immediate grace, 1 s, never a force deletion: the
  // object waits, terminating, for a kubelet to confirm its containers gone
  // (this control plane has none).
  auto ending = cp->admin_call("GET", "/api/v1/namespaces/record-undone/pods/worker");
  ASSERT_EQ(ending.status, 200) << ending.body;
  const json pod = json::parse(ending.body);
  EXPECT_FALSE(pod["metadata"]["deletionTimestamp"].is_null()) << ending.body;
  EXPECT_EQ(pod["metadata"]["deletionGracePeriodSeconds"], 1) << ending.body;

  // Its processes back meanwhile, and the loop going on: no second end.
  loop.running = true;
  for (int i = 0; i < 20; ++i) loop.step();
  ASSERT_TRUE(loop.h.reporter->drain(30s));
  EXPECT_EQ(loop.ends.size(), 1u);
  EXPECT_EQ(api_requests(m, "eviction", "too_many_requests"), 1u);
  EXPECT_EQ(api_requests(m, "delete", "success"), 1u);
  EXPECT_EQ(api_requests(m, "pod_status", "success"), 1u) << "the record written once";
}

// The record holds (the kubelet keeps the phase Failed and stops the pod):
// nothing more is sent while pressured watches it.
TEST(K8sEvictionRecord, ARecordThatHoldsIsLeftAlone) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("record-holds"));
  auto uid = cp->create_pod("record-holds", "worker", "node-a", json::object(), 0);
  ASSERT_TRUE(uid) << uid.error().message;
  ASSERT_TRUE(cp->set_pod_running("record-holds", "worker"));
  RecordLoop loop(*cp, "record-holds", "worker", *uid);
  loop.evict_and_record();
  ASSERT_TRUE(loop.step_until([&] { return loop.record()->status == EvictionRecord::Status::Seen; }));
  // The kubelet's own write that keeps the phase (its "illegal phase
  // transition" guard): Failed, reason and message gone.
  auto r = cp->admin_call("PATCH", "/api/v1/namespaces/record-holds/pods/worker/status",
                          json{{"status", {{"phase", "Failed"}, {"reason", nullptr}, {"message", nullptr}}}},
                          "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  // The watch delivers that write within milliseconds; the loop goes on for
  // a few seconds of real time and 10 s of the policy's.
  for (int i = 0; i < 40; ++i) {
    loop.step();
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(loop.h.reporter->drain(30s));
  EXPECT_TRUE(loop.ends.empty());
  const Metrics& m = *loop.h.metrics;
  EXPECT_FALSE(api_requests(m, "eviction", "success").has_value());
  EXPECT_FALSE(api_requests(m, "delete", "success").has_value());
  EXPECT_EQ(scraped(m, "pressured_kubernetes_eviction_records_undone_total", {{"cause", "phase"}}), 0u);
  EXPECT_EQ(api_requests(m, "pod_status", "success"), 1u);
  json pod = get_json(*cp, "/api/v1/namespaces/record-holds/pods/worker");
  EXPECT_EQ(pod["status"]["phase"], "Failed");
  EXPECT_FALSE(pod["metadata"].contains("deletionTimestamp"));
}

}  // namespace
}  // namespace pressured::k8s
