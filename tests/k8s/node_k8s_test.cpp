// pressured's node conditions and scheduling taint against a real
// kube-apiserver, as the `pressured` ServiceAccount (deploy/base/rbac.yaml).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <thread>

#include "fakes/privilege.hpp"
#include "k8s/control_plane.hpp"
#include "k8s/reporter.hpp"
#include "metrics/exposition.hpp"

namespace pressured::k8s {
namespace {

using json = nlohmann::json;
using testing::scraped;
using namespace std::chrono_literals;
using Status = std::array<bool, kConditionCount>;

// `metrics` must outlive the reporter.
std::unique_ptr<Reporter> reporter_for(const testing::ControlPlane& cp, const std::string& node, bool taints,
                                       Metrics& metrics) {
  auto id = cp.pressured_identity();
  EXPECT_TRUE(id);
  ReporterOptions o;
  o.node_name = node;
  o.initial_backoff = 50ms;
  o.taint_nodes = taints;
  auto r = std::make_unique<Reporter>(ApiClient(*id, 10s), o);
  r->attach_metrics(metrics);
  r->start();
  return r;
}

json node_of(const testing::ControlPlane& cp, const std::string& name) {
  auto r = cp.admin_call("GET", "/api/v1/nodes/" + name);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? json::parse(r.body) : json::object();
}

json condition(const json& node, const std::string& type) {
  for (const auto& c : node["status"]["conditions"]) {
    if (c["type"] == type) return c;
  }
  return json();
}

std::vector<std::string> taint_keys_of(const json& node) {
  std::vector<std::string> keys;
  if (node["spec"].contains("taints")) {
    for (const auto& t : node["spec"]["taints"]) keys.push_back(t["key"].get<std::string>() + ":" + t["effect"].get<std::string>());
  }
  return keys;
}

// The kubelet's own conditions, as a kubelet would have written them.
void set_kubelet_conditions(const testing::ControlPlane& cp, const std::string& node) {
  json conds = json::array();
  for (const char* t : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}) {
    conds.push_back({{"type", t},
                     {"status", std::string(t) == "Ready" ? "True" : "False"},
                     {"reason", std::string("Kubelet") + t},
                     {"message", "kubelet says so"},
                     {"lastHeartbeatTime", "2020-01-01T00:00:00Z"},
                     {"lastTransitionTime", "2020-01-01T00:00:00Z"}});
  }
  auto r = cp.admin_call("PATCH", "/api/v1/nodes/" + node + "/status", json{{"status", {{"conditions", conds}}}},
                         "application/strategic-merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
}

TEST(K8sNode, OwnConditionsAppearTransitionTimeMovesOnlyOnFlipKubeletTypesUntouched) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->create_node("cond-node"));
  set_kubelet_conditions(*cp, "cond-node");
  json before = node_of(*cp, "cond-node");
  Metrics metrics(MetricsOptions{.node = "node-a"});
  auto rep = reporter_for(*cp, "cond-node", false, metrics);

  rep->report_conditions(Status{false, false, false}, Status{true, true, true});
  ASSERT_TRUE(rep->drain(30s));
  json n1 = node_of(*cp, "cond-node");
  for (const char* t : {"PressuredMemoryPressure", "PressuredDiskPressure", "PressuredPIDPressure"}) {
    ASSERT_FALSE(condition(n1, t).is_null()) << t << " missing: " << n1["status"].dump();
    EXPECT_EQ(condition(n1, t)["status"], "False");
  }
  std::string t1 = condition(n1, "PressuredMemoryPressure")["lastTransitionTime"];

  std::this_thread::sleep_for(1100ms);  // the API keeps seconds
  rep->report_conditions(Status{false, false, false}, Status{false, false, false});  // heartbeat
  ASSERT_TRUE(rep->drain(30s));
  json n2 = node_of(*cp, "cond-node");
  EXPECT_EQ(condition(n2, "PressuredMemoryPressure")["lastTransitionTime"], t1) << "a heartbeat moved it";
  EXPECT_NE(condition(n2, "PressuredMemoryPressure")["lastHeartbeatTime"],
            condition(n1, "PressuredMemoryPressure")["lastHeartbeatTime"]);

  std::this_thread::sleep_for(1100ms);
  rep->report_conditions(Status{true, false, false}, Status{true, false, false});  // flip
  ASSERT_TRUE(rep->drain(30s));
  json n3 = node_of(*cp, "cond-node");
  EXPECT_EQ(condition(n3, "PressuredMemoryPressure")["status"], "True");
  EXPECT_NE(condition(n3, "PressuredMemoryPressure")["lastTransitionTime"], t1) << "a flip did not move it";
  EXPECT_EQ(condition(n3, "PressuredDiskPressure")["lastTransitionTime"],
            condition(n1, "PressuredDiskPressure")["lastTransitionTime"]);

  for (const char* t : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}) {
    EXPECT_EQ(condition(n3, t), condition(before, t)) << "kubelet-owned " << t << " changed";
  }
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_report_failures_total"), 0u);
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_node_condition_updates_total"), 3u);
}

TEST(K8sNode, NoScheduleTaintFollowsPressureAndKeepsOtherTaints) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->create_node("taint-node"));
  // Someone else's taints, before and during.
  auto r = cp->admin_call("PATCH", "/api/v1/nodes/taint-node",
                          json{{"spec", {{"taints", json::array({{{"key", "example.com/dedicated"}, {"value", "db"}, {"effect", "NoSchedule"}}})}}}},
                          "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  Metrics metrics(MetricsOptions{.node = "node-a"});
  auto rep = reporter_for(*cp, "taint-node", true, metrics);

  rep->report_conditions(Status{true, false, true}, Status{true, false, true});
  ASSERT_TRUE(rep->drain(30s));
  EXPECT_EQ(taint_keys_of(node_of(*cp, "taint-node")),
            (std::vector<std::string>{"example.com/dedicated:NoSchedule", "pressured.io/memory-pressure:NoSchedule",
                                      "pressured.io/pid-pressure:NoSchedule"}));

  // Another controller adds a taint while pressure lasts.
  json n = node_of(*cp, "taint-node");
  n["spec"]["taints"].push_back({{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}});
  r = cp->admin_call("PUT", "/api/v1/nodes/taint-node", n);
  ASSERT_EQ(r.status, 200) << r.body;

  rep->report_conditions(Status{true, false, true}, Status{false, false, false});  // heartbeat: nothing to change
  ASSERT_TRUE(rep->drain(30s));
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_node_taint_updates_total"), 1u);

  rep->report_conditions(Status{false, false, false}, Status{true, false, true});  // cleared
  ASSERT_TRUE(rep->drain(30s));
  EXPECT_EQ(taint_keys_of(node_of(*cp, "taint-node")),
            (std::vector<std::string>{"example.com/dedicated:NoSchedule", "node.kubernetes.io/unschedulable:NoSchedule"}));
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_node_taint_updates_total"), 2u);
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_report_failures_total"), 0u);
}

TEST(K8sNode, TaintUpdateRacesWithAnotherWriterWithoutLosingItsTaints) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->create_node("race-node"));
  Metrics metrics(MetricsOptions{.node = "node-a"});
  auto rep = reporter_for(*cp, "race-node", true, metrics);
  // Another writer adds 20 taints of its own, one read-modify-write (PUT with
  // the resourceVersion it read) at a time, while pressured flips its own.
  std::atomic<bool> done{false};
  int added = 0;
  std::thread other([&] {
    for (int i = 0; i < 20; ++i) {
      for (int attempt = 0; attempt < 50; ++attempt) {
        json n = node_of(*cp, "race-node");
        if (!n["spec"].contains("taints")) n["spec"]["taints"] = json::array();
        n["spec"]["taints"].push_back({{"key", "example.com/t" + std::to_string(i)}, {"effect", "PreferNoSchedule"}});
        auto r = cp->admin_call("PUT", "/api/v1/nodes/race-node", n);
        if (r.status == 200) {
          ++added;
          break;
        }
        if (r.status != 409) {
          ADD_FAILURE() << "PUT node: HTTP " << r.status << " " << r.body;
          break;
        }
      }
    }
    done = true;
  });
  bool on = true;
  while (!done) {
    rep->report_conditions(Status{on, false, false}, Status{true, false, false});
    ASSERT_TRUE(rep->drain(30s));
    on = !on;
  }
  other.join();
  rep->report_conditions(Status{true, false, false}, Status{true, false, false});
  ASSERT_TRUE(rep->drain(30s));
  EXPECT_EQ(added, 20);
  auto keys = taint_keys_of(node_of(*cp, "race-node"));
  for (int i = 0; i < 20; ++i) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), "example.com/t" + std::to_string(i) + ":PreferNoSchedule"), keys.end())
        << "taint " << i << " was clobbered";
  }
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "pressured.io/memory-pressure:NoSchedule"), 1);
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_report_failures_total"), 0u);
}

}  // namespace
}  // namespace pressured::k8s
