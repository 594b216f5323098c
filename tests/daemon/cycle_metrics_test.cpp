// publish_pods: each tracked pod's and scope's reclaim activity reaches its
// series, from one batch read of every tracked cgroup where the alarms have
// one, else from one read per cgroup; an untracked pod has no activity series.
#include "daemon/cycle_metrics.hpp"

#include <algorithm>
#include <cerrno>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace pressured {
namespace {

class FakeActivity final : public KernelAlarms {
 public:
  Result<WatchId> set_watch(const std::string&, uint64_t) override { return Error{ENOTSUP, "fake: no watches"}; }
  Result<void> clear_watch(WatchId) override { return Error{ENOTSUP, "fake: no watches"}; }
  std::optional<MemcgActivity> memcg_activity(uint64_t id) const override {
    ++single_reads;
    auto it = values.find(id);
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
  bool memcg_activities(std::vector<std::pair<uint64_t, MemcgActivity>>& out) const override {
    ++batch_reads;
    out.clear();
    if (!batch) return false;
    out.assign(values.begin(), values.end());  // a std::map: sorted by id
    return true;
  }

  std::map<uint64_t, MemcgActivity> values;
  bool batch = true;
  mutable int single_reads = 0;
  mutable int batch_reads = 0;
};

MemcgActivity scanned(uint64_t pages) {
  MemcgActivity a;
  a.pgscan = pages;
  a.pgsteal = pages / 2;
  return a;
}

Pod pod(const std::string& uid, uint64_t cgroup_id) {
  Pod p;
  p.uid = uid;
  p.name = uid;
  p.namespace_ = "default";
  p.cgroup_id = cgroup_id;
  return p;
}

// The value of the first series of `family` whose labels contain `label`.
std::string series(const std::string& text, const std::string& family, const std::string& label) {
  std::size_t at = 0;
  while ((at = text.find(family + "{", at)) != std::string::npos) {
    const std::size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    if (line.find(label) != std::string::npos) return line.substr(line.rfind(' ') + 1);
    at = end;
  }
  return "";
}

struct Published {
  std::string text;
  int single_reads = 0;
  int batch_reads = 0;
};

Published publish(bool batch) {
  FakeActivity alarms;
  alarms.batch = batch;
  alarms.values = {{11, scanned(400)}, {12, scanned(600)}, {13, scanned(800)}, {7001, scanned(1000)}};
  NodeSnapshot snap;
  snap.pods = {pod("pod-a", 11), pod("pod-b", 12), pod("pod-c", 13), pod("pod-untracked", 14)};
  const std::map<uint64_t, std::string> tracked{{11, "pod-a"}, {12, "pod-b"}, {13, "pod-c"}};
  const std::map<uint64_t, std::string> scopes{{7001, "kubepods"}};
  Metrics m(MetricsOptions{.node = "test"});
  publish_pods(m, snap, tracked, scopes, &alarms);
  return {m.render(), alarms.single_reads, alarms.batch_reads};
}

void expect_activity(const std::string& text) {
  EXPECT_EQ(series(text, "pressured_pod_reclaim_scanned_pages_total", "uid=\"pod-a\""), "400") << text;
  EXPECT_EQ(series(text, "pressured_pod_reclaim_scanned_pages_total", "uid=\"pod-b\""), "600");
  EXPECT_EQ(series(text, "pressured_pod_reclaim_stolen_pages_total", "uid=\"pod-c\""), "400");
  EXPECT_EQ(series(text, "pressured_pod_reclaim_scanned_pages_total", "uid=\"pod-untracked\""), "")
      << "an untracked pod has no activity series";
  EXPECT_EQ(series(text, "pressured_kubepods_reclaim_scanned_pages_total", "kubepods"), "1000");
}

TEST(CycleMetrics, EveryTrackedCgroupsActivityComesFromOneBatchRead) {
  const Published p = publish(true);
  expect_activity(p.text);
  EXPECT_EQ(p.batch_reads, 1);
  EXPECT_EQ(p.single_reads, 0) << "a read per cgroup beside the batch";
}

TEST(CycleMetrics, WithoutABatchReadEachTrackedCgroupIsReadAlone) {
  const Published p = publish(false);
  expect_activity(p.text);
  EXPECT_EQ(p.single_reads, 4) << "three tracked pods and the kubepods scope";
}

}  // namespace
}  // namespace pressured
