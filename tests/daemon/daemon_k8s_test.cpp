// The daemon with Kubernetes reporting: local kill first for hard thresholds,
// then the pod's status recorded as the kubelet records its evictions; soft
// ones recorded at once (the kubelet terminates the pod; a local kill only
// after grace + margin); static pods never through the API. Against a local
// HTTP server.
#include <httplib.h>

#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/daemon.hpp"
#include "fakes/fake_observer.hpp"
#include "k8s/reporter.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
using testing::FakeObserver;
constexpr uint64_t MiB = 1 << 20;

TimePoint at(double s) { return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s))); }

struct Api {
  httplib::Server srv;
  std::thread t;
  int port = 0;
  std::mutex mu;
  std::vector<std::string> calls;  // "VERB path"
  std::vector<std::string> bodies;
  Api() {
    auto h = [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lk(mu);
      calls.push_back(req.method + " " + req.path);
      bodies.push_back(req.body);
      res.status = req.method == "POST" ? 201 : 200;
      // The pod is on the daemon's node: the reporter writes about no other.
      const bool pod_read = req.method == "GET" && req.path.find("/pods/") != std::string::npos;
      res.set_content(pod_read ? R"({"spec":{"nodeName":"n1"}})" : "{}", "application/json");
    };
    srv.Post(".*", h);
    srv.Get(".*", h);  // the reporter reads the pod before evicting it
    srv.Patch(".*", h);
    srv.Delete(".*", h);
    port = srv.bind_to_any_port("127.0.0.1");
    t = std::thread([this] { srv.listen_after_bind(); });
    for (int i = 0; i < 200 && !srv.is_running(); ++i) std::this_thread::sleep_for(5ms);
  }
  ~Api() {
    srv.stop();
    t.join();
  }
  std::vector<std::string> seen() {
    std::lock_guard lk(mu);
    return calls;
  }
};

struct Recorder final : public Evictor {
  Result<void> validate(const EvictionTarget&) const override { return {}; }
  Result<KillReport> terminate(const EvictionTarget& t) override {
    calls.push_back("terminate " + t.uid);
    return KillReport{};
  }
  Result<KillReport> kill(const EvictionTarget& t) override {
    calls.push_back("kill " + t.uid);
    gone = true;
    KillReport r;
    r.empty = true;
    return r;
  }
  Result<bool> is_empty(const EvictionTarget&) const override { return gone; }
  std::vector<std::string> calls;
  bool gone = false;
};

Pod pod(bool static_pod) {
  Pod p;
  p.uid = "u-1";
  p.name = "web";
  p.namespace_ = "shop";
  p.qos = QosClass::BestEffort;
  p.metadata_known = true;
  p.static_pod = static_pod;
  p.termination_grace_period_seconds = 3;
  p.usage.memory_working_set_bytes = 900 * MiB;
  p.cgroup_path = "/x/kubepods/besteffort/podu-1";
  return p;
}

struct K8sRig {
  Api api;
  FakeObserver obs;
  Recorder ev;
  std::unique_ptr<k8s::Reporter> rep;
  std::unique_ptr<Daemon> d;
  void make(ThresholdKind kind, bool static_pod) {
    k8s::ApiServer s;
    s.server = "http://127.0.0.1:" + std::to_string(api.port);
    s.token = "t";
    k8s::ReporterOptions ro;
    ro.node_name = "n1";
    ro.taint_nodes = false;  // tested against a real API server (tests/k8s/)
    rep = std::make_unique<k8s::Reporter>(k8s::ApiClient(s, 2s), ro);
    rep->start();
    obs.pods = {pod(static_pod)};
    Config c;
    Threshold t;
    t.signal = Signal::AllocatableMemoryAvailable;
    t.kind = kind;
    t.value.quantity = 200.0 * MiB;
    t.grace_period = kind == ThresholdKind::Soft ? 1s : 0s;
    c.eviction.thresholds = {t};
    c.eviction.max_pod_grace_period_seconds = 10;
    c.daemon.state_file = "";
    c.daemon.soft_kill_margin = 5s;
    DaemonDeps deps;
    deps.observer = &obs;
    deps.evictor = &ev;
    deps.reporter = rep.get();
    d = std::make_unique<Daemon>(c, deps);
  }
};

TEST(DaemonK8s, HardThresholdKillsLocallyFirstThenRecordsTheEvictionInThePodsStatus) {
  K8sRig r;
  r.make(ThresholdKind::Hard, false);
  r.d->evaluate(at(1), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls, std::vector<std::string>{"kill u-1"}) << "local kill inside the decision itself";
  ASSERT_TRUE(r.rep->drain(5s));
  auto seen = r.api.seen();
  EXPECT_NE(std::find(seen.begin(), seen.end(), "PATCH /api/v1/namespaces/shop/pods/web/status"), seen.end());
  EXPECT_EQ(std::find(seen.begin(), seen.end(), "POST /api/v1/namespaces/shop/pods/web/eviction"), seen.end())
      << "the pod stays, Failed, as after the kubelet's own eviction";
  EXPECT_NE(std::find(seen.begin(), seen.end(), "POST /api/v1/namespaces/shop/events"), seen.end());
  EXPECT_NE(std::find(seen.begin(), seen.end(), "PATCH /api/v1/nodes/n1/status"), seen.end());
  r.rep->stop();
}

// The kubelet starts a killed container again (restartPolicy) although the
// record says Failed: pressured kills it again, as the same eviction (no
// other victim), until the pod leaves the node, and ends the pod through the
// Eviction API, once (docs/kubernetes.md, "Ending a record the kubelet undoes").
TEST(DaemonK8s, AContainerTheKubeletRestartsAfterTheRecordIsKilledAgainAndThePodEndedThroughTheApiOnce) {
  K8sRig r;
  r.make(ThresholdKind::Hard, false);
  Pod other = pod(false);
  other.uid = "u-2";
  other.name = "db";
  other.qos = QosClass::Burstable;
  other.requests.memory_bytes = 200 * MiB;
  other.usage.memory_working_set_bytes = 100 * MiB;
  other.cgroup_path = "/x/kubepods/burstable/podu-2";
  r.obs.pods.push_back(other);
  r.d->evaluate(at(1), "test", std::nullopt);  // 1024 - 1000 < 200: u-1 killed, then evicted through the API
  ASSERT_EQ(r.ev.calls, std::vector<std::string>{"kill u-1"});
  ASSERT_TRUE(r.rep->drain(5s));  // the record taken: answered before the next evaluation
  r.obs.pods[0].usage.memory_working_set_bytes = 0;  // its memory comes back
  for (double t = 1.1; t < 4; t += 0.3) r.d->evaluate(at(t), "test", std::nullopt);
  ASSERT_FALSE(r.d->policy().busy());
  ASSERT_EQ(r.ev.calls.size(), 1u);

  // The kubelet restarts the container: processes and memory again.
  r.ev.gone = false;
  r.obs.pods[0].usage.memory_working_set_bytes = 900 * MiB;
  r.d->evaluate(at(5), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls, (std::vector<std::string>{"kill u-1", "kill u-1"})) << "killed again, not u-2";
  EXPECT_EQ(r.d->stats().restarted_victim_kills.load(), 1u);
  r.obs.pods[0].usage.memory_working_set_bytes = 0;
  r.d->evaluate(at(5.5), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls.size(), 2u) << "empty again: nothing to kill";

  // Once the API has taken the pod (it leaves the node), a pod of that name
  // is not watched any more.
  r.obs.pods.erase(r.obs.pods.begin());
  r.d->evaluate(at(7), "test", std::nullopt);
  r.obs.pods.insert(r.obs.pods.begin(), pod(false));
  r.obs.pods[0].usage.memory_working_set_bytes = 0;
  r.ev.gone = false;
  r.d->evaluate(at(9), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls.size(), 2u);

  ASSERT_TRUE(r.rep->drain(5s));
  std::size_t records = 0, ends = 0;
  for (const auto& c : r.api.seen()) {
    records += c == "PATCH /api/v1/namespaces/shop/pods/web/status";
    ends += c == "POST /api/v1/namespaces/shop/pods/web/eviction";
  }
  EXPECT_EQ(records, 1u) << "one record, however many kills";
  EXPECT_EQ(ends, 1u) << "the restart showed the record undone: the pod ended through the API, once";
  EXPECT_EQ(r.rep->stats().records_undone_restart.load(), 1u);
  r.rep->stop();
}

TEST(DaemonK8s, SoftThresholdDelegatesToTheApiAndKillsLocallyOnlyAfterGracePlusMargin) {
  K8sRig r;
  r.make(ThresholdKind::Soft, false);
  r.d->evaluate(at(0), "test", std::nullopt);
  r.d->evaluate(at(1.5), "test", std::nullopt);  // soft grace over: the pod marked Failed, grace 3 s here
  ASSERT_TRUE(r.rep->drain(5s));
  EXPECT_TRUE(r.ev.calls.empty()) << "the kubelet terminates the pod";
  bool found = false;
  {
    std::lock_guard lk(r.api.mu);
    for (std::size_t i = 0; i < r.api.calls.size(); ++i) {
      if (r.api.calls[i] == "PATCH /api/v1/namespaces/shop/pods/web/status") {
        auto b = nlohmann::json::parse(r.api.bodies[i]);
        EXPECT_EQ(b["status"]["phase"], "Failed");
        EXPECT_EQ(b["status"]["reason"], "Evicted");
        EXPECT_EQ(b["status"]["conditions"][0]["type"], "DisruptionTarget");
        found = true;
      }
    }
  }
  EXPECT_TRUE(found);
  r.d->evaluate(at(8), "test", std::nullopt);  // 1.5 + 3 + 5 = 9.5: not yet
  EXPECT_TRUE(r.ev.calls.empty());
  r.d->evaluate(at(9.6), "test", std::nullopt);
  EXPECT_EQ(r.ev.calls, std::vector<std::string>{"kill u-1"});
  r.rep->stop();
}

TEST(DaemonK8s, StaticPodsAreNeverEvicted) {
  // The engine never ranks static/mirror pods; the reporter would refuse
  // them anyway (K8sReporter.StaticPodsAreNeverEvictedThroughTheApi).
  K8sRig r;
  r.make(ThresholdKind::Hard, true);
  r.d->evaluate(at(1), "test", std::nullopt);
  ASSERT_TRUE(r.rep->drain(5s));
  EXPECT_TRUE(r.ev.calls.empty());
  for (const auto& c : r.api.seen()) EXPECT_EQ(c.find("/pods/"), std::string::npos) << c;
  r.rep->stop();
}

}  // namespace
}  // namespace pressured
