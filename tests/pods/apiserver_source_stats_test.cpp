// The API server pod source's own counters as an operator reads them: handed
// on through PodMetadataSource::exported_stats (as the daemon exports them)
// and scraped. The list+watch against a real API server is in
// tests/k8s/pod_source_k8s_test.cpp; here a refused connection on 127.0.0.1
// is enough to move one counter and leave the others at 0.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "metrics/exposition.hpp"
#include "pods/apiserver_source.hpp"
#include "pressured/metrics.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;

// A port on 127.0.0.1 that nothing listens on: bound, read, released.
uint16_t closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(ApiServerSourceStats, FailedListIsExportedAsAnErrorAndNoList) {
  pods::ApiServerSourceOptions o;
  o.server.server = "https://127.0.0.1:" + std::to_string(closed_port());
  o.server.token = "unused";
  o.server.insecure_skip_verify = true;
  o.node_name = "node-a";
  o.request_timeout = 2s;
  pods::ApiServerPodSource src(o);
  const PodMetadataSource& as_source = src;

  MetricsOptions mo;
  mo.node = "node-a";
  Metrics metrics(mo);
  const StatsExport handle = metrics.export_counters(as_source.exported_stats());
  ASSERT_TRUE(handle.active());
  // Every series is there from the export on, at 0.
  auto before = testing::scrape(metrics);
  for (const char* name :
       {"pressured_pod_source_api_lists_total", "pressured_pod_source_api_expired_relists_total",
        "pressured_pod_source_api_watches_total", "pressured_pod_source_api_watch_events_total",
        "pressured_pod_source_api_watch_bookmarks_total", "pressured_pod_source_api_watch_stalls_total",
        "pressured_pod_source_api_errors_total"}) {
    EXPECT_EQ(before.value(name), 0.0) << name;
    EXPECT_EQ(before.types[name], "counter") << name;
  }

  EXPECT_FALSE(src.refresh()) << "nothing listens there";
  EXPECT_EQ(testing::scraped(metrics, "pressured_pod_source_api_errors_total"), 1.0);
  EXPECT_EQ(testing::scraped(metrics, "pressured_pod_source_api_lists_total"), 0.0);
  EXPECT_EQ(src.counters().errors.load(), 1u);
}

TEST(ApiServerSourceStats, SourcesThatCountNothingExportNothing) {
  PodSourceConfig c;
  c.kind = PodSourceKind::File;
  c.path = "/nonexistent-pressured-test/pods.json";
  auto src = make_pod_metadata_source(c);
  ASSERT_TRUE(src) << src.error().message;
  EXPECT_TRUE((*src)->exported_stats().empty());
}

}  // namespace
}  // namespace pressured
