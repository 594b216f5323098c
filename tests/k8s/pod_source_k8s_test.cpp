// Pod metadata from a real kube-apiserver (pods.kind: apiserver): list +
// watch by spec.nodeName as the `pressured` ServiceAccount; the apiserver
// killed and restarted, and paused (SIGSTOP: a real stalled stream).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <thread>

#include "fakes/privilege.hpp"
#include "k8s/control_plane.hpp"
#include "metrics/exposition.hpp"
#include "pods/apiserver_source.hpp"

namespace pressured::pods {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::unique_ptr<ApiServerPodSource> source_for(const testing::ControlPlane& cp, const std::string& node,
                                               Duration watch_timeout = 60s) {
  auto id = cp.pressured_identity();
  EXPECT_TRUE(id);
  ApiServerSourceOptions o;
  o.server = *id;
  o.node_name = node;
  o.request_timeout = 3s;
  o.watch_timeout = watch_timeout;
  o.stall_grace = 2s;
  o.initial_backoff = 100ms;
  o.max_backoff = 1s;
  return std::make_unique<ApiServerPodSource>(o);
}

bool eventually(const std::function<bool()>& cond, Duration timeout = 30s) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return cond();
}

bool has(const ApiServerPodSource& s, const std::string& uid) { return s.current()->count(uid) == 1; }

TEST(K8sPodSource, CreatedUpdatedDeletedPodsOfThisNodeOnly) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("src-basic"));
  auto mine = cp->create_pod("src-basic", "before", "node-src");
  auto other = cp->create_pod("src-basic", "elsewhere", "node-other");
  ASSERT_TRUE(mine && other);
  auto src = source_for(*cp, "node-src");
  ASSERT_TRUE(src->refresh());
  EXPECT_TRUE(has(*src, *mine));
  EXPECT_FALSE(has(*src, *other)) << "a pod of another node";
  src->start(30s);

  auto added = cp->create_pod("src-basic", "after", "node-src", json{{"tier", "web"}}, 45);
  ASSERT_TRUE(added);
  ASSERT_TRUE(eventually([&] { return has(*src, *added); }));
  EXPECT_EQ(src->current()->at(*added).name, "after");
  EXPECT_EQ(src->current()->at(*added).termination_grace_period_seconds, 45);

  // An update (a label and the priority class's number are not mutable; the
  // phase is: status), seen through MODIFIED.
  auto r = cp->admin_call("PATCH", "/api/v1/namespaces/src-basic/pods/after/status",
                          json{{"status", {{"phase", "Running"}, {"qosClass", "Burstable"}}}},
                          "application/merge-patch+json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(eventually([&] { return src->current()->at(*added).phase == "Running"; }));

  r = cp->admin_call("DELETE", "/api/v1/namespaces/src-basic/pods/before", json{{"gracePeriodSeconds", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(eventually([&] { return !has(*src, *mine); }));
  EXPECT_GE(src->counters().events.load(), 3u);
  EXPECT_EQ(src->counters().errors.load(), 0u) << src->stats().last_error;
  // As an operator reads them.
  EXPECT_GE(testing::exported(src->counters(), "pressured_pod_source_api_watch_events_total").value_or(0), 3);
  EXPECT_GE(testing::exported(src->counters(), "pressured_pod_source_api_lists_total").value_or(0), 1);
  src->stop();
}

TEST(K8sPodSource, WatchResumesAfterItsTimeoutFromTheResourceVersion) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("src-expire"));
  auto src = source_for(*cp, "node-expire", 2s);  // the server ends every watch after 2 s
  src->start(30s);
  ASSERT_TRUE(eventually([&] { return src->counters().lists.load() == 1; }));
  ASSERT_TRUE(eventually([&] { return src->counters().watches.load() >= 3; }, 20s));
  auto uid = cp->create_pod("src-expire", "late", "node-expire");
  ASSERT_TRUE(uid);
  EXPECT_TRUE(eventually([&] { return has(*src, *uid); }));
  EXPECT_EQ(src->counters().lists.load(), 1u) << "an expired watch must resume, not relist";
  EXPECT_EQ(src->counters().errors.load(), 0u) << src->stats().last_error;
}

TEST(K8sPodSource, ApiServerKilledAndRestartedNoPodLost) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("src-restart"));
  std::vector<std::string> uids;
  for (int i = 0; i < 5; ++i) {
    auto u = cp->create_pod("src-restart", fmt::format("p{}", i), "node-restart");
    ASSERT_TRUE(u);
    uids.push_back(*u);
  }
  auto src = source_for(*cp, "node-restart");
  src->start(30s);
  ASSERT_TRUE(eventually([&] { return src->current()->size() == 5; }));

  cp->kill_apiserver();
  ASSERT_TRUE(eventually([&] { return src->counters().errors.load() > 0; }));
  EXPECT_EQ(src->current()->size(), 5u) << "the map survives an unreachable server";
  auto restarted = cp->restart_apiserver();
  ASSERT_TRUE(restarted) << restarted.error().message;

  auto after = cp->create_pod("src-restart", "after-restart", "node-restart");
  ASSERT_TRUE(after);
  auto r = cp->admin_call("DELETE", "/api/v1/namespaces/src-restart/pods/p0", json{{"gracePeriodSeconds", 0}});
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(eventually([&] { return has(*src, *after) && !has(*src, uids[0]); }, 60s))
      << src->stats().last_error;
  for (int i = 1; i < 5; ++i) EXPECT_TRUE(has(*src, uids[i])) << "pod p" << i << " lost";
  EXPECT_EQ(src->current()->size(), 5u);
}

TEST(K8sPodSource, StalledWatchIsDetectedAndRestarted) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("src-stall"));
  auto src = source_for(*cp, "node-stall", 3s);
  src->start(30s);
  ASSERT_TRUE(eventually([&] { return src->counters().watches.load() >= 1; }));
  std::this_thread::sleep_for(300ms);
  // A real stall: the apiserver frozen with the watch open; nothing arrives
  // and the server's own timeout never fires.
  cp->pause_apiserver();
  bool detected = eventually([&] { return src->counters().stalls.load() >= 1; }, 20s);
  cp->resume_apiserver();
  ASSERT_TRUE(detected) << "a frozen watch was not detected";
  auto uid = cp->create_pod("src-stall", "after-stall", "node-stall");
  ASSERT_TRUE(uid);
  EXPECT_TRUE(eventually([&] { return has(*src, *uid); }, 30s)) << src->stats().last_error;
}

TEST(K8sPodSource, TooOldResourceVersionRelists) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("src-gone"));
  auto src = source_for(*cp, "node-gone", 3s);
  ASSERT_TRUE(src->refresh());
  // Compaction moves past the version the watch would resume from.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cp->create_pod("src-gone", fmt::format("g{}", i), "node-elsewhere"));
  auto compacted = cp->compact_etcd();
  ASSERT_TRUE(compacted) << compacted.error().message;
  auto restarted = cp->restart_apiserver();  // an empty watch cache: only etcd's history remains
  ASSERT_TRUE(restarted) << restarted.error().message;
  src->start(30s);
  ASSERT_TRUE(eventually([&] { return src->counters().relists_gone.load() >= 1; }, 30s))
      << "watches " << src->counters().watches.load() << ", errors " << src->counters().errors.load() << ": "
      << src->stats().last_error;
  EXPECT_TRUE(eventually([&] { return src->counters().lists.load() >= 2; }));
  auto uid = cp->create_pod("src-gone", "mine", "node-gone");
  ASSERT_TRUE(uid);
  EXPECT_TRUE(eventually([&] { return has(*src, *uid); }));
}

// A node whose pods do not fit one answer: tenants' large annotations (the
// API server stores them unchanged). The watch cache answers in one page
// whatever the limit, so the LIST falls back to etcd in pages, and every pod
// arrives with no page over the bound.
TEST(K8sPodSource, PodListOverThePageBoundIsPagedFromEtcd) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  ASSERT_TRUE(cp->ensure_namespace("src-paged"));
  constexpr int kPods = 24;
  std::vector<std::string> uids;
  for (int i = 0; i < kPods; ++i) {
    json pod{{"apiVersion", "v1"},
             {"kind", "Pod"},
             {"metadata",
              {{"name", fmt::format("big{}", i)},
               {"namespace", "src-paged"},
               {"annotations", {{"tenant.example/blob", std::string(60 * 1024, 'a' + i % 26)}}}}},
             {"spec",
              {{"nodeName", "node-paged"},
               {"automountServiceAccountToken", false},
               {"containers", json::array({{{"name", "app"}, {"image", "registry.invalid/app:1"}}})}}}};
    auto r = cp->admin_call("POST", "/api/v1/namespaces/src-paged/pods", pod);
    ASSERT_EQ(r.status, 201) << r.body;
    uids.push_back(json::parse(r.body)["metadata"]["uid"].get<std::string>());
  }
  auto id = cp->pressured_identity();
  ASSERT_TRUE(id);
  ApiServerSourceOptions o;
  o.server = *id;
  o.node_name = "node-paged";
  o.request_timeout = 10s;
  o.max_page_bytes = 256 * 1024;  // the node's ~1.5 MB of pods: a few a page
  ApiServerPodSource src(o);
  auto r = src.refresh();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(src.current()->size(), static_cast<std::size_t>(kPods));
  for (const auto& u : uids) EXPECT_TRUE(has(src, u)) << u;
  EXPECT_GE(src.counters().list_pages.load(), 6u);
  EXPECT_FALSE(src.resource_version().empty());
  // The watch resumes from the paged LIST's snapshot.
  src.start(30s);
  auto late = cp->create_pod("src-paged", "late", "node-paged");
  ASSERT_TRUE(late);
  EXPECT_TRUE(eventually([&] { return has(src, *late); }));
  EXPECT_EQ(src.counters().errors.load(), 0u) << src.stats().last_error;
  src.stop();
}

}  // namespace
}  // namespace pressured::pods
