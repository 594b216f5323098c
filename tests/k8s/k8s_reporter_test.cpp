// The Kubernetes reporter against a local HTTP server (cpp-httplib on
// 127.0.0.1, ephemeral port) that checks paths, verbs, bodies and the auth
// header, and can fail, stall, or answer 429/500.
//
// Everything a real API server can be made to do is tested against one
// (tests/k8s/, kube-apiserver 1.20 + etcd). The fake stays for what a real
// server cannot do on demand; each test says which part that is.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "k8s/api_client.hpp"
#include "k8s/reporter.hpp"
#include "metrics/exposition.hpp"

namespace pressured::k8s {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using pressured::testing::scraped;

// Attempts of one API action with one outcome, as exported.
std::optional<double> api_requests(const Metrics& m, const char* action, const char* result) {
  return scraped(m, "pressured_kubernetes_api_requests_total", {{"action", action}, {"result", result}});
}

struct Seen {
  std::string method, path, body, auth, content_type;
};

class FakeApiServer {
 public:
  FakeApiServer() {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lk(mu);
        seen.push_back({req.method, req.path, req.body, req.get_header_value("Authorization"),
                        req.get_header_value("Content-Type")});
      }
      if (req.get_header_value("Authorization") != "Bearer s3cret") {
        res.status = 401;
        return;
      }
      if (stall_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms.load()));
      int status = 200;
      {
        std::lock_guard lk(mu);
        auto it = script.find(req.method + " " + req.path);
        if (it != script.end() && !it->second.empty()) {
          status = it->second.front();
          it->second.erase(it->second.begin());
        } else if (req.method == "POST") {
          status = 201;
        }
      }
      res.status = status;
      if (status == 429) res.set_header("Retry-After", "0");
      // A pod is on this reporter's node (fast_options) unless a test says otherwise.
      std::string answer = req.method == "GET" && req.path.find("/pods/") != std::string::npos
                               ? R"({"spec":{"nodeName":"node-1"}})"
                               : "{}";
      {
        std::lock_guard lk(mu);
        auto it = bodies.find(req.method + " " + req.path);
        if (it != bodies.end()) answer = it->second;
      }
      res.set_content(answer, "application/json");
    };
    srv.Post(".*", handler);
    srv.Delete(".*", handler);
    srv.Patch(".*", handler);
    srv.Get(".*", handler);
    port = srv.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { srv.listen_after_bind(); });
    for (int i = 0; i < 200 && !srv.is_running(); ++i) std::this_thread::sleep_for(5ms);
  }
  ~FakeApiServer() {
    srv.stop();
    thread.join();
  }
  // The writes. The reporter's GET of the pod before an eviction is left
  // out (it answers a pod on node-1 without a uid here: nothing to compare);
  // its uses are tested against a real API server in tests/k8s/.
  std::vector<Seen> requests() {
    std::lock_guard lk(mu);
    std::vector<Seen> writes;
    for (const auto& s : seen) {
      if (s.method != "GET") writes.push_back(s);
    }
    return writes;
  }
  ApiServer endpoint() const {
    ApiServer s;
    s.server = "http://127.0.0.1:" + std::to_string(port);
    s.token = "s3cret";
    return s;
  }

  httplib::Server srv;
  int port = 0;
  std::thread thread;
  std::mutex mu;
  std::vector<Seen> seen;
  std::map<std::string, std::vector<int>> script;  // "VERB path" -> statuses to return in order
  std::map<std::string, std::string> bodies;        // "VERB path" -> the answer's body (default "{}")
  std::atomic<int> stall_ms{0};
};

Eviction victim() {
  Eviction e;
  e.id = "ev-7";
  e.uid = "1234-uid";
  e.name = "web";
  e.namespace_ = "shop";
  e.grace_period_seconds = 0;
  e.signal = Signal::AllocatableMemoryAvailable;
  e.observed = 50.0 * 1024 * 1024;
  e.threshold_value = 100.0 * 1024 * 1024;
  return e;
}

// The reporter's answers to report_eviction() and end_pod() as its eviction
// hook gives them (on its worker, or at once on the caller's thread), in
// order. Declared before the Reporter, so that it outlives the hook.
class Answers {
 public:
  using List = std::vector<std::pair<std::string, EvictionResult>>;
  void attach(Reporter& r) {
    r.set_eviction_hook([this](const std::string& id, EvictionResult res) {
      std::lock_guard lk(mu_);
      list_.emplace_back(id, res);
    });
  }
  List list() const {
    std::lock_guard lk(mu_);
    return list_;
  }
  std::vector<EvictionResult> results() const {
    std::vector<EvictionResult> out;
    for (const auto& a : list()) out.push_back(a.second);
    return out;
  }

 private:
  mutable std::mutex mu_;
  List list_;
};

ReporterOptions fast_options() {
  ReporterOptions o;
  o.node_name = "node-1";
  o.initial_backoff = 10ms;
  o.max_backoff = 50ms;
  o.max_attempts = 3;
  // The taint's read-modify-write of the Node is tested against a real
  // kube-apiserver (tests/k8s/node_k8s_test.cpp).
  o.taint_nodes = false;
  // The node's EvictionThresholdMet Event: its body in eviction_message_test,
  // the request against a real kube-apiserver (eviction_k8s_test.cpp).
  o.threshold_met_events = false;
  // The Eviction API path; the status path has its own tests below.
  o.mark_failed = false;
  return o;
}

// Fake: a real API server never answers these shapes; a proxy or a broken
// server can. A field of the wrong type is no value, never an exception that
// ends the reporter's thread (and the daemon); a pod whose node cannot be
// read from the answer is not written about at all.
TEST(K8sReporter, MalformedPodAndNodeAnswersAreErrorsNotCrashes) {
  for (const std::string& pod : {std::string(R"({"metadata":{"uid":5}})"), std::string(R"({"metadata":7})"),
                                 std::string(R"({"spec":{"nodeName":7}})"), std::string("[1,2]"),
                                 std::string(200000, '[') + std::string(200000, ']')}) {
    FakeApiServer api;
    api.bodies["GET /api/v1/namespaces/shop/pods/web"] = pod;
    Metrics metrics(MetricsOptions{.node = "node-1"});
    Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
    r.attach_metrics(metrics);
    r.start();
    r.report_eviction(victim());
    ASSERT_TRUE(r.drain(5s)) << pod.substr(0, 40);
    EXPECT_TRUE(api.requests().empty()) << pod.substr(0, 40) << ": the pod's node is unknown";
    EXPECT_EQ(scraped(metrics, "pressured_kubernetes_pod_writes_refused_total", {{"reason", "node_unknown"}}), 1u)
        << pod.substr(0, 40);
    r.stop();
  }
  const std::vector<std::pair<std::string, uint64_t>> nodes = {
      {R"({"metadata":{"resourceVersion":7}})", 1},
      {R"({"metadata":"x"})", 1},
      {std::string(200000, '[') + std::string(200000, ']'), 1},
      {R"({"metadata":{"resourceVersion":"3"},"spec":{"taints":[{"key":5,"effect":"NoSchedule"},7]}})", 0},
  };
  for (const auto& [node, failures] : nodes) {
    FakeApiServer api;
    api.bodies["GET /api/v1/nodes/node-1"] = node;
    ReporterOptions o = fast_options();
    o.taint_nodes = true;
    Reporter r(ApiClient(api.endpoint(), 2s), o);
    r.start();
    std::array<bool, kConditionCount> status{};
    status[0] = true;
    r.report_conditions(status, status);
    ASSERT_TRUE(r.drain(5s)) << node.substr(0, 40);
    EXPECT_EQ(r.stats().failures.load(), failures) << node.substr(0, 40);
    r.stop();
  }
}

// Fake: a server that accepts policy/v1 (1.22+); the real tier runs 1.20,
// which serves only policy/v1beta1.
TEST(K8sReporter, EvictionUsesThePolicyV1SubresourceWithUidPreconditionAndRecordsAnEvent) {
  FakeApiServer api;
  Metrics metrics(MetricsOptions{.node = "node-1"});
  Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
  r.attach_metrics(metrics);
  std::vector<std::pair<ApiAction, ApiOutcome>> outcomes;
  std::mutex omu;
  r.set_outcome_hook([&](ApiAction a, ApiOutcome o) {
    std::lock_guard lk(omu);
    outcomes.emplace_back(a, o);
  });
  r.start();
  r.report_eviction(victim());
  ASSERT_TRUE(r.drain(5s));
  auto seen = api.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].path, "/api/v1/namespaces/shop/pods/web/eviction");
  EXPECT_EQ(seen[0].auth, "Bearer s3cret");
  auto body = json::parse(seen[0].body);
  EXPECT_EQ(body["apiVersion"], "policy/v1");
  EXPECT_EQ(body["kind"], "Eviction");
  EXPECT_EQ(body["metadata"]["name"], "web");
  EXPECT_EQ(body["deleteOptions"]["preconditions"]["uid"], "1234-uid");
  EXPECT_EQ(body["deleteOptions"]["gracePeriodSeconds"], 1)
      << "a hard eviction (grace 0, killed at once locally) asks the API for the kubelet's immediate 1 s";
  EXPECT_EQ(seen[1].path, "/api/v1/namespaces/shop/events");
  auto ev = json::parse(seen[1].body);
  EXPECT_EQ(ev["metadata"]["name"], "web.ev-7") << "named by the eviction, so a retry cannot record it twice";
  EXPECT_FALSE(ev["metadata"].contains("generateName"));
  EXPECT_EQ(ev["reason"], "Evicted");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["involvedObject"]["uid"], "1234-uid");
  EXPECT_EQ(ev["source"]["host"], "node-1");
  std::string msg = ev["message"];
  EXPECT_NE(msg.find("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi."),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("allocatableMemory.available"), std::string::npos);
  EXPECT_EQ(api_requests(metrics, "eviction", "success"), 1u);
  EXPECT_EQ(api_requests(metrics, "event", "success"), 1u);
  std::lock_guard lk(omu);
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[0].first, ApiAction::ListPods);  // the pod's current uid
  EXPECT_EQ(outcomes[1].first, ApiAction::Eviction);
  EXPECT_EQ(outcomes[1].second, ApiOutcome::Success);
  r.stop();
}

// Fake: a 500 from the Eviction subresource on demand (the real tier covers
// the 429 of a disruption budget).
TEST(K8sReporter, RefusedEvictionFallsBackToDeleteWithTheSameGracePeriod) {
  for (int refusal : {429, 500}) {
    FakeApiServer api;
    api.script["POST /api/v1/namespaces/shop/pods/web/eviction"] = {refusal};
    Metrics metrics(MetricsOptions{.node = "node-1"});
    Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
    r.attach_metrics(metrics);
    r.start();
    auto e = victim();
    e.grace_period_seconds = 17;
    r.report_eviction(e);
    ASSERT_TRUE(r.drain(5s));
    auto seen = api.requests();
    ASSERT_GE(seen.size(), 2u);
    EXPECT_EQ(seen[0].path, "/api/v1/namespaces/shop/pods/web/eviction");
    EXPECT_EQ(seen[1].method, "DELETE") << refusal;
    EXPECT_EQ(seen[1].path, "/api/v1/namespaces/shop/pods/web");
    auto del = json::parse(seen[1].body);
    EXPECT_EQ(del["gracePeriodSeconds"], 17);
    EXPECT_EQ(del["preconditions"]["uid"], "1234-uid");
    EXPECT_EQ(scraped(metrics, "pressured_kubernetes_eviction_fallbacks_total"), 1u);
    EXPECT_EQ(api_requests(metrics, "delete", "success"), 1u);
    r.stop();
  }
}

// Fake: a server that refuses the status update (403 as under an RBAC
// without pods/status, 422) on demand: the Eviction API stops the kubelet
// restarting the pod instead. A pod recreated since the read (409, or 422 on
// metadata.uid) is not evicted at all.
TEST(K8sReporter, RefusedStatusUpdateFallsBackToTheEvictionApi) {
  struct Case {
    int status;
    std::string body;
    bool falls_back;
  };
  for (const auto& c : {Case{403, R"({"reason":"Forbidden"})", true}, Case{422, R"({"reason":"Invalid"})", true},
                        Case{409, "{}", false},
                        Case{422, R"({"message":"metadata.uid: Invalid value: field is immutable"})", false}}) {
    FakeApiServer api;
    api.script["PATCH /api/v1/namespaces/shop/pods/web/status"] = {c.status};
    api.bodies["PATCH /api/v1/namespaces/shop/pods/web/status"] = c.body;
    Metrics metrics(MetricsOptions{.node = "node-1"});
    ReporterOptions o = fast_options();
    o.mark_failed = true;
    Answers answers;
    Reporter r(ApiClient(api.endpoint(), 2s), o);
    r.attach_metrics(metrics);
    answers.attach(r);
    r.start();
    r.report_eviction(victim());
    ASSERT_TRUE(r.drain(5s));
    auto seen = api.requests();
    ASSERT_GE(seen.size(), 2u) << c.status;
    EXPECT_EQ(seen[0].method, "PATCH");
    EXPECT_EQ(seen[0].path, "/api/v1/namespaces/shop/pods/web/status");
    EXPECT_EQ(seen[0].content_type, "application/strategic-merge-patch+json");
    EXPECT_EQ(json::parse(seen[0].body)["metadata"]["uid"], "1234-uid");
    if (c.falls_back) {
      EXPECT_EQ(seen[1].path, "/api/v1/namespaces/shop/pods/web/eviction") << c.status << " " << c.body;
      EXPECT_EQ(scraped(metrics, "pressured_kubernetes_pod_status_refusals_total"), 1u);
      EXPECT_EQ(answers.results(), std::vector<EvictionResult>{EvictionResult::Landed});
    } else {
      EXPECT_EQ(seen[1].path, "/api/v1/namespaces/shop/events") << c.status << " " << c.body;
      EXPECT_EQ(scraped(metrics, "pressured_kubernetes_evictions_skipped_total", {{"reason", "uid_changed"}}), 1u);
      EXPECT_EQ(answers.results(), std::vector<EvictionResult>{EvictionResult::NotNeeded});
    }
    r.stop();
  }
}

// The kubelet's DisruptionTarget carries observedGeneration, the pod's
// metadata.generation (1.34+, PodObservedGenerationTracking). pressured sets
// it only where the server tracks the pod's generation (its read of the pod
// shows metadata.generation): a server that does not (1.20) gets no field it
// would drop or refuse.
TEST(K8sReporter, DisruptionTargetCarriesObservedGenerationOnlyWhereTheServerTracksIt) {
  for (bool tracked : {true, false}) {
    FakeApiServer api;
    api.bodies["GET /api/v1/namespaces/shop/pods/web"] =
        tracked ? R"({"metadata":{"uid":"1234-uid","generation":3},"spec":{"nodeName":"node-1"},"status":{"phase":"Running"}})"
                : R"({"metadata":{"uid":"1234-uid"},"spec":{"nodeName":"node-1"},"status":{"phase":"Running"}})";
    ReporterOptions o = fast_options();
    o.mark_failed = true;
    Reporter r(ApiClient(api.endpoint(), 2s), o);
    r.start();
    r.report_eviction(victim());
    ASSERT_TRUE(r.drain(5s));
    auto seen = api.requests();
    auto patch = std::find_if(seen.begin(), seen.end(), [](const auto& q) { return q.method == "PATCH"; });
    ASSERT_NE(patch, seen.end());
    const json condition = json::parse(patch->body)["status"]["conditions"][0];
    EXPECT_EQ(condition["type"], "DisruptionTarget");
    if (tracked) {
      EXPECT_EQ(condition["observedGeneration"], 3);
    } else {
      EXPECT_FALSE(condition.contains("observedGeneration")) << condition.dump();
    }
    r.stop();
  }
}

// Fake: a pod already terminal (the run before a restart recorded it; or it
// ended on its own): its status is left as it is, nothing else is sent but
// the Event. One Failed with reason Evicted is answered as a record (the
// policy then watches it as one the kubelet may undo); any other as not needed.
TEST(K8sReporter, APodAlreadyTerminalKeepsItsStatus) {
  for (const char* phase : {"Failed", "Succeeded"}) {
    FakeApiServer api;
    api.bodies["GET /api/v1/namespaces/shop/pods/web"] =
        fmt::format(R"({{"metadata":{{"uid":"1234-uid"}},"spec":{{"nodeName":"node-1"}},)"
                    R"("status":{{"phase":"{}","reason":"Evicted"}}}})",
                    phase);
    ReporterOptions o = fast_options();
    o.mark_failed = true;
    Answers answers;
    Reporter r(ApiClient(api.endpoint(), 2s), o);
    answers.attach(r);
    r.start();
    r.report_eviction(victim());
    ASSERT_TRUE(r.drain(5s));
    auto seen = api.requests();
    ASSERT_EQ(seen.size(), 1u) << phase;
    EXPECT_EQ(seen[0].path, "/api/v1/namespaces/shop/events");
    EXPECT_EQ(answers.results(),
              std::vector<EvictionResult>{std::string_view(phase) == "Failed" ? EvictionResult::Recorded
                                                                              : EvictionResult::NotNeeded})
        << phase;
    r.stop();
  }
}

// Fake: the server already holds the eviction's Event (an earlier attempt
// stored it and its answer was lost; or the run before a restart did).
TEST(K8sReporter, AnEventTheServerAlreadyHoldsIsNotRecordedTwiceNorAFailure) {
  FakeApiServer api;
  api.script["POST /api/v1/namespaces/shop/events"] = {409};
  Metrics metrics(MetricsOptions{.node = "node-1"});
  Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
  r.attach_metrics(metrics);
  r.start();
  r.report_eviction(victim());
  ASSERT_TRUE(r.drain(5s));
  std::size_t posts = 0;
  for (const auto& q : api.requests()) posts += q.path == "/api/v1/namespaces/shop/events";
  EXPECT_EQ(posts, 1u) << "a 409 is final: no retry";
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_report_failures_total"), 0u);
  r.stop();
}

// A pod name at the length limit still gives a valid Event name.
TEST(K8sReporter, EventNameOfALongPodNameStaysADnsSubdomain) {
  FakeApiServer api;
  Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
  r.start();
  auto e = victim();
  e.name = std::string(247, 'a') + "-" + std::string(5, 'b');  // 253 characters
  r.report_eviction(e);
  ASSERT_TRUE(r.drain(5s));
  std::string name;
  for (const auto& q : api.requests()) {
    if (q.path == "/api/v1/namespaces/shop/events") name = json::parse(q.body)["metadata"]["name"];
  }
  EXPECT_EQ(name, std::string(247, 'a') + ".ev-7") << "cut to fit 253, without a dangling '-'";
  r.stop();
}

// Fake: 503s on demand.
TEST(K8sReporter, ServerErrorsAreRetriedWithBackoffThenGivenUp) {
  FakeApiServer api;
  api.script["DELETE /api/v1/namespaces/shop/pods/web"] = {503, 503, 200};
  api.script["POST /api/v1/namespaces/shop/pods/web/eviction"] = {429};
  api.script["POST /api/v1/namespaces/shop/events"] = {503, 503, 503, 503};
  Metrics metrics(MetricsOptions{.node = "node-1"});
  Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
  r.attach_metrics(metrics);
  r.start();
  r.report_eviction(victim());
  ASSERT_TRUE(r.drain(5s));
  EXPECT_EQ(api_requests(metrics, "delete", "success"), 1u);
  EXPECT_GE(scraped(metrics, "pressured_kubernetes_api_retries_total"), 2u);
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_report_failures_total"), 1u) << "the event gave up after 3 attempts";
  r.stop();
}

// Fake: a server that accepts and then answers nothing for 1.5 s per request.
TEST(K8sReporter, StalledServerTimesOutAndNeverPilesUp) {
  FakeApiServer api;
  api.stall_ms = 1500;
  auto o = fast_options();
  o.queue_capacity = 4;
  o.max_attempts = 1;
  Metrics metrics(MetricsOptions{.node = "node-1"});
  Reporter r(ApiClient(api.endpoint(), 200ms), o);
  r.attach_metrics(metrics);
  r.start();
  // Neither reporting nor stopping waits for the server: if either did, the
  // test would hang on the stalled server until CTest's timeout fails it.
  for (int i = 0; i < 20; ++i) {
    auto e = victim();
    e.name = fmt::format("p{}", i);
    r.report_eviction(e);
  }
  // 40 requests (an eviction and an Event each) against a queue of 4 and a
  // worker taking one at a time from a server that answers after 1.5 s.
  EXPECT_GT(scraped(metrics, "pressured_kubernetes_reports_dropped_total"), 0u);
  r.stop();  // the request in flight times out (200 ms); the rest are dropped
  api.stall_ms = 0;
}

// Evictions queued behind an Event go first: each is a pod already killed,
// which the kubelet restarts until the API marks it evicted. (Queued before
// the worker starts, so that the order does not depend on how fast it takes
// the first one.)
TEST(K8sReporter, EvictionsGoAheadOfQueuedEvents) {
  FakeApiServer api;
  Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
  for (int i = 0; i < 3; ++i) {
    auto e = victim();
    e.name = fmt::format("p{}", i);
    e.id = fmt::format("ev-{}", i);
    r.report_eviction(e);
  }
  r.start();
  ASSERT_TRUE(r.drain(10s));
  std::vector<std::string> order;
  for (const auto& q : api.requests()) {
    if (q.method != "POST") continue;
    if (q.path.ends_with("/eviction")) order.push_back("evict " + json::parse(q.body)["metadata"]["name"].get<std::string>());
    if (q.path.ends_with("/events")) order.push_back("event " + json::parse(q.body)["involvedObject"]["name"].get<std::string>());
  }
  EXPECT_EQ(order, (std::vector<std::string>{"evict p0", "evict p1", "evict p2", "event p0", "event p1", "event p2"}));
  r.stop();
}

// A full queue drops Events before evictions.
TEST(K8sReporter, AFullQueueDropsEventsBeforeEvictions) {
  FakeApiServer api;
  auto o = fast_options();
  o.queue_capacity = 4;
  Metrics metrics(MetricsOptions{.node = "node-1"});
  Reporter r(ApiClient(api.endpoint(), 2s), o);
  r.attach_metrics(metrics);
  for (int i = 0; i < 3; ++i) {
    auto e = victim();
    e.name = fmt::format("p{}", i);
    e.id = fmt::format("ev-{}", i);
    r.report_eviction(e);  // six requests into a queue of four
  }
  r.start();
  ASSERT_TRUE(r.drain(10s));
  std::size_t evictions = 0;
  for (const auto& q : api.requests()) evictions += q.method == "POST" && q.path.ends_with("/eviction");
  EXPECT_EQ(evictions, 3u) << "the Events made room";
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_reports_dropped_total"), 2u);
  r.stop();
}

// Fake: the queue's order before the worker starts. An eviction is one job:
// whichever of its steps the full queue drops, it is answered once, and
// "dropped" (so that the daemon sends it whole again) only once its other
// step is done with; a job that kept both steps is answered with its fate.
TEST(K8sReporter, AnEvictionIsAnsweredOnceWhicheverOfItsStepsIsDropped) {
  FakeApiServer api;
  auto o = fast_options();
  o.queue_capacity = 4;
  Answers answers;
  Reporter r(ApiClient(api.endpoint(), 2s), o);
  answers.attach(r);
  for (int i = 0; i < 3; ++i) {
    auto e = victim();
    e.name = fmt::format("p{}", i);
    e.id = fmt::format("ev-{}", i);
    r.report_eviction(e);  // the Events of p0 and p1 make room
  }
  EXPECT_TRUE(answers.list().empty()) << "no answer before the Eviction of a job whose Event was dropped ran";
  auto static_pod = victim();
  static_pod.name = "mirror";
  static_pod.id = "ev-static";
  static_pod.static_pod = true;
  r.report_eviction(static_pod);  // its Event only: it drops p2's Event, the oldest non-eviction
  r.start();
  ASSERT_TRUE(r.drain(10s));
  auto list = answers.list();
  std::sort(list.begin(), list.end());
  EXPECT_EQ(list, (Answers::List{{"ev-0", EvictionResult::Dropped},
                                 {"ev-1", EvictionResult::Dropped},
                                 {"ev-2", EvictionResult::Dropped},
                                 {"ev-static", EvictionResult::NotNeeded}}));
  std::size_t evictions = 0, events = 0;
  for (const auto& q : api.requests()) {
    evictions += q.method == "POST" && q.path.ends_with("/eviction");
    events += q.method == "POST" && q.path.ends_with("/events");
  }
  EXPECT_EQ(evictions, 3u);
  EXPECT_EQ(events, 1u) << "the static pod's Event";
  r.stop();
}

TEST(K8sReporter, UnreachableServerIsAnErrorNotAHang) {
  ApiServer s;
  s.server = "http://127.0.0.1:1";  // nothing listens
  s.token = "x";
  ApiClient c(s, 500ms);
  auto r = c.request("GET", "/api");
  EXPECT_FALSE(r.ok());
}

// Fake: records that no request names the pod at all (a real server cannot
// show a request that was never made).
// An API server's (or a proxy's) error body goes into log lines: it must not
// be able to forge a line or send terminal escapes.
TEST(K8sLogText, ErrorBodiesAreEscapedAndCut) {
  EXPECT_EQ(printable_excerpt("forbidden: nodes \"n1\""), "forbidden: nodes \"n1\"");
  EXPECT_EQ(printable_excerpt("bad\nlevel=info msg=forged\x1b[2J\x7f\xc3"),
            "bad\\x0alevel=info msg=forged\\x1b[2J\\x7f\\xc3");
  EXPECT_EQ(printable_excerpt(std::string(250, 'a'), 200), std::string(200, 'a') + " ... (50 more bytes)");
  EXPECT_EQ(printable_excerpt(""), "");
}

// pressured writes only about pods on its node, whatever asked for the write
// (a checkpoint record naming another node's pod included): the pod's read
// must show this node's name in spec.nodeName. Fake: the node names of the
// answers on demand (the real-server test is in eviction_record_k8s_test.cpp).
TEST(K8sReporter, APodOnAnotherNodeIsNeverWrittenAbout) {
  for (bool mark_failed : {true, false}) {
    FakeApiServer api;
    api.bodies["GET /api/v1/namespaces/shop/pods/web"] = R"({"metadata":{"uid":"1234-uid"},"spec":{"nodeName":"node-2"}})";
    ReporterOptions o = fast_options();
    o.mark_failed = mark_failed;
    Answers answers;
    Reporter r(ApiClient(api.endpoint(), 2s), o);
    Metrics metrics(MetricsOptions{.node = "node-1"});
    r.attach_metrics(metrics);
    answers.attach(r);
    r.start();
    r.report_eviction(victim());
    r.end_pod(victim(), RecordUndone::PhaseReverted);
    Eviction s = victim();
    s.id = "ev-static";
    s.static_pod = true;
    r.report_eviction(s);  // only its Event would be sent
    ASSERT_TRUE(r.drain(5s));
    for (const auto& w : api.requests()) ADD_FAILURE() << "mark_failed=" << mark_failed << ": " << w.method << " " << w.path;
    EXPECT_EQ(scraped(metrics, "pressured_kubernetes_pod_writes_refused_total", {{"reason", "other_node"}}), 3u);
    auto got = answers.results();
    ASSERT_EQ(got.size(), 3u);
    for (auto res : got) EXPECT_EQ(res, EvictionResult::NotNeeded);
    r.stop();
  }
}

// When the pod's node cannot be read (the API unreachable for the GET, an
// answer without spec.nodeName), nothing is written: the pod may be another
// node's. A pod the API no longer has gets no Event either.
TEST(K8sReporter, APodWhoseNodeCannotBeReadIsNotWrittenAbout) {
  {
    FakeApiServer api;
    api.script["GET /api/v1/namespaces/shop/pods/web"] = {503, 503, 503};
    Answers answers;
    Metrics metrics(MetricsOptions{.node = "node-1"});
    Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
    r.attach_metrics(metrics);
    answers.attach(r);
    r.start();
    r.report_eviction(victim());
    ASSERT_TRUE(r.drain(5s));
    EXPECT_TRUE(api.requests().empty());
    EXPECT_EQ(answers.results(), std::vector<EvictionResult>{EvictionResult::GaveUp});
    EXPECT_EQ(scraped(metrics, "pressured_kubernetes_pod_writes_refused_total", {{"reason", "node_unknown"}}), 1u);
    r.stop();
  }
  for (const char* body : {R"({"metadata":{"uid":"1234-uid"}})", R"({"metadata":{"uid":"1234-uid"},"spec":{"nodeName":""}})"}) {
    FakeApiServer api;
    api.bodies["GET /api/v1/namespaces/shop/pods/web"] = body;
    Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
    r.start();
    r.report_eviction(victim());
    ASSERT_TRUE(r.drain(5s));
    EXPECT_TRUE(api.requests().empty()) << body;
    r.stop();
  }
  FakeApiServer api;
  api.script["GET /api/v1/namespaces/shop/pods/web"] = {404, 404};
  Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
  r.start();
  r.report_eviction(victim());
  ASSERT_TRUE(r.drain(5s));
  EXPECT_TRUE(api.requests().empty()) << "an Event about a pod the API no longer has";
  r.stop();
}

TEST(K8sReporter, StaticPodsAreNeverEvictedThroughTheApi) {
  FakeApiServer api;
  Metrics metrics(MetricsOptions{.node = "node-1"});
  Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
  r.attach_metrics(metrics);
  r.start();
  auto e = victim();
  e.static_pod = true;
  r.report_eviction(e);
  ASSERT_TRUE(r.drain(5s));
  for (const auto& s : api.requests()) EXPECT_EQ(s.path.find("/pods/"), std::string::npos) << s.path;
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_static_pod_evictions_total"), 1u);
  r.stop();
}

// Ending a pod whose record the kubelet undid: the Eviction API, its DELETE
// fallback on a 429 with the same grace and uid, no second Event, counted by
// cause. Fake: a 429 for this one pod on demand (the real-server test in
// eviction_record_k8s_test.cpp has a budget answer it; here the count).
TEST(K8sReporter, AnUndoneRecordIsEndedThroughTheApiWithItsFallbackAndNoSecondEvent) {
  FakeApiServer api;
  api.script["POST /api/v1/namespaces/shop/pods/web/eviction"] = {429};
  ReporterOptions o = fast_options();
  o.mark_failed = true;
  Answers answers;
  Reporter r(ApiClient(api.endpoint(), 2s), o);
  Metrics metrics(MetricsOptions{.node = "node-1"});
  r.attach_metrics(metrics);
  answers.attach(r);
  r.start();
  r.end_pod(victim(), RecordUndone::ProcessesBack);
  ASSERT_TRUE(r.drain(5s));
  auto seen = api.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].path, "/api/v1/namespaces/shop/pods/web/eviction");
  EXPECT_EQ(seen[1].method, "DELETE");
  EXPECT_EQ(seen[1].path, "/api/v1/namespaces/shop/pods/web");
  EXPECT_EQ(json::parse(seen[1].body)["gracePeriodSeconds"], 1) << "never a force deletion";
  EXPECT_EQ(json::parse(seen[1].body)["preconditions"]["uid"], "1234-uid");
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_eviction_records_undone_total", {{"cause", "restart"}}), 1u);
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_eviction_records_undone_total", {{"cause", "phase"}}), 0u);
  EXPECT_EQ(answers.list(), (Answers::List{{"ev-7", EvictionResult::Landed}}));
  // A pod already terminating (ended by the run before a restart) is left alone and not counted.
  api.bodies["GET /api/v1/namespaces/shop/pods/web"] =
      R"({"metadata":{"name":"web","uid":"1234-uid","deletionTimestamp":"2026-01-01T00:00:00Z"},)"
      R"("spec":{"nodeName":"node-1"}})";
  r.end_pod(victim(), RecordUndone::PhaseReverted);
  ASSERT_TRUE(r.drain(5s));
  EXPECT_EQ(api.requests().size(), 2u);
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_eviction_records_undone_total", {{"cause", "phase"}}), 0u);
  ASSERT_EQ(answers.list().size(), 2u);
  EXPECT_EQ(answers.list()[1].second, EvictionResult::NotNeeded);
  r.stop();
}

// The daemon resends an API eviction whose answer it did not see before a
// restart: a pod already terminating (the first one landed) is not evicted
// again. Every report_eviction() is answered once through the hook, which
// the daemon's policy takes as an input. A terminating pod on demand is
// what the fake is for here.
TEST(K8sReporter, APodAlreadyTerminatingIsNotEvictedAgainAndEveryEvictionIsAnswered) {
  FakeApiServer api;
  Answers answers;
  Reporter r(ApiClient(api.endpoint(), 2s), fast_options());
  answers.attach(r);
  r.start();
  Eviction e = victim();
  r.report_eviction(e);
  ASSERT_TRUE(r.drain(5s));
  {
    std::lock_guard lk(api.mu);
    api.bodies["GET /api/v1/namespaces/shop/pods/web"] =
        R"({"metadata":{"name":"web","uid":")" + e.uid + R"(","deletionTimestamp":"2026-01-01T00:00:00Z"},)"
        R"("spec":{"nodeName":"node-1"}})";
  }
  r.report_eviction(e);  // resent after a restart
  e.static_pod = true;
  e.id = "ev-static";
  r.report_eviction(e);
  ASSERT_TRUE(r.drain(5s));
  std::size_t evictions = 0;
  for (const auto& s : api.requests()) evictions += s.path.ends_with("/eviction");
  EXPECT_EQ(evictions, 1u);
  const Answers::List got = answers.list();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], std::pair(std::string(victim().id), EvictionResult::Landed));
  // The static pod is answered at once, on the caller's thread; the resend on the worker.
  Answers::List rest(got.begin() + 1, got.end());
  std::sort(rest.begin(), rest.end());
  EXPECT_EQ(rest[0], std::pair(std::string("ev-7"), EvictionResult::NotNeeded)) << "already terminating";
  EXPECT_EQ(rest[1], std::pair(std::string("ev-static"), EvictionResult::NotNeeded)) << "static: the Event only";
  r.stop();
}

// Node conditions (own types, lastTransitionTime only on flips, kubelet
// types untouched) are tested against a real kube-apiserver:
// tests/k8s/node_k8s_test.cpp.

TEST(K8sConfig, KubeconfigAndInClusterConfigAreRead) {
  char tmpl[] = "/tmp/pressured-kcfg-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::ofstream(dir + "/kubeconfig") << R"(apiVersion: v1
kind: Config
current-context: ctx
contexts:
- name: other
  context: {cluster: nope, user: nope}
- name: ctx
  context: {cluster: c1, user: u1}
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: ca.pem
users:
- name: u1
  user:
    token: abc
    client-certificate-data: aGVsbG8=
)";
  auto k = load_kubeconfig(dir + "/kubeconfig");
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_EQ(k->server, "https://10.0.0.1:6443");
  EXPECT_EQ(k->ca_file, dir + "/ca.pem");
  EXPECT_EQ(k->token, "abc");
  EXPECT_EQ(k->client_cert_data, "hello");
  EXPECT_FALSE(load_kubeconfig(dir + "/missing").ok());
  std::ofstream(dir + "/bad") << "current-context: x\ncontexts: []\n";
  EXPECT_FALSE(load_kubeconfig(dir + "/bad").ok());

  std::filesystem::create_directories(dir + "/sa");
  std::ofstream(dir + "/sa/token") << "tok\n";
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto ic = in_cluster_config(dir + "/sa");
  ASSERT_TRUE(ic.ok()) << ic.error().message;
  EXPECT_EQ(ic->server, "https://10.96.0.1:443");
  EXPECT_EQ(ic->ca_file, dir + "/sa/ca.crt");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_FALSE(in_cluster_config(dir + "/sa").ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pressured::k8s

namespace pressured::k8s {
namespace {

// The taint list computation (pure); the read-modify-write itself runs
// against a real kube-apiserver in tests/k8s/node_k8s_test.cpp.
TEST(K8sTaints, OwnNoScheduleTaintsFollowTheConditionsOthersAreKept) {
  json others = json::array({{{"key", "a"}, {"effect", "NoExecute"}},
                             {{"key", "pressured.io/memory-pressure"}, {"effect", "PreferNoSchedule"}}});
  auto add = updated_taints(others, "pressured.io/", {true, false, true}, "2026-01-01T00:00:00Z");
  ASSERT_TRUE(add);
  ASSERT_EQ(add->size(), 4u);
  EXPECT_EQ((*add)[0], others[0]);
  EXPECT_EQ((*add)[1], others[1]) << "same key, other effect: not pressured's";
  EXPECT_EQ((*add)[2]["key"], "pressured.io/memory-pressure");
  EXPECT_EQ((*add)[2]["effect"], "NoSchedule");
  EXPECT_EQ((*add)[3]["key"], "pressured.io/pid-pressure");
  EXPECT_FALSE(updated_taints(*add, "pressured.io/", {true, false, true}, "later")) << "already right: no write";
  auto cleared = updated_taints(*add, "pressured.io/", {false, false, false}, "later");
  ASSERT_TRUE(cleared);
  EXPECT_EQ(*cleared, others);
  EXPECT_FALSE(updated_taints(json(), "pressured.io/", {false, false, false}, "t")) << "no taints at all";
  auto dup = json::array({{{"key", "x/disk-pressure"}, {"effect", "NoSchedule"}},
                          {{"key", "x/disk-pressure"}, {"effect", "NoSchedule"}}});
  auto dedup = updated_taints(dup, "x/", {false, true, false}, "t");
  ASSERT_TRUE(dedup);
  EXPECT_EQ(dedup->size(), 1u);
}

TEST(K8sEvictionVersion, OnlyTheUnregisteredKindAnswerMeansV1IsNotServed) {
  HttpResponse r;
  r.status = 400;
  r.body = R"({"kind":"Status","message":"no kind \"Eviction\" is registered for version \"policy/v1\" in scheme \"pkg/api/legacyscheme/scheme.go:30\"","code":400})";
  EXPECT_TRUE(eviction_version_not_served(r));
  r.body = R"({"kind":"Status","message":"pods \"x\" not found","code":404})";
  r.status = 404;
  EXPECT_FALSE(eviction_version_not_served(r));
  r.status = 400;
  r.body = R"({"message":"bad request"})";
  EXPECT_FALSE(eviction_version_not_served(r));
  auto body = json::parse(eviction_body(Eviction{}, "policy/v1beta1"));
  EXPECT_EQ(body["apiVersion"], "policy/v1beta1");
}

// The kubelet's immediateEvictionGracePeriodSeconds (1, eviction_manager.go,
// 1.33-1.36; 1.35+ for a pod's own local-storage limits too): the API never
// gets a grace of 0 (a force deletion) from pressured; a longer grace is
// passed as it is.
TEST(K8sReporter, ImmediateEvictionGracePeriodIsOneSecondInEveryApiBody) {
  Eviction e = victim();
  e.grace_period_seconds = 0;
  EXPECT_EQ(api_grace_period_seconds(e), 1);
  EXPECT_EQ(json::parse(eviction_body(e))["deleteOptions"]["gracePeriodSeconds"], 1);
  EXPECT_EQ(json::parse(eviction_body(e, "policy/v1beta1"))["deleteOptions"]["gracePeriodSeconds"], 1);
  EXPECT_EQ(json::parse(delete_body(e))["gracePeriodSeconds"], 1);
  e.local_storage_rule = "emptydirfs.limit";
  EXPECT_EQ(json::parse(eviction_body(e))["deleteOptions"]["gracePeriodSeconds"], 1);
  e.grace_period_seconds = 17;
  EXPECT_EQ(json::parse(eviction_body(e))["deleteOptions"]["gracePeriodSeconds"], 17);
  EXPECT_EQ(json::parse(delete_body(e))["gracePeriodSeconds"], 17);
}

}  // namespace
}  // namespace pressured::k8s
