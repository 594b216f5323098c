// The reactor's dispatch latency (EventStats, filled on every event) as an
// operator scrapes it from /metrics.
#include "daemon/reactor_metrics.hpp"

#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <gtest/gtest.h>

#include "metrics/exposition.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
using testing::Exposition;
using testing::parse_exposition;

Exposition scrape(uint16_t port) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(5, 0);
  auto res = cli.Get("/metrics");
  EXPECT_TRUE(res) << "no answer from /metrics";
  if (!res) return {};
  EXPECT_EQ(res->status, 200);
  auto e = parse_exposition(res->body);
  EXPECT_TRUE(e.errors.empty()) << "unparsable line: " << (e.errors.empty() ? "" : e.errors.front());
  return e;
}

TEST(ReactorMetrics, DispatchLatencyIsServedAsAHistogram) {
  EventStats stats;
  MetricsOptions o;
  o.node = "node-1";
  Metrics metrics(o);
  export_reactor_latency(stats, metrics);
  auto server = MetricsServer::start(metrics, "127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.error().message;
  const uint16_t port = (*server)->port();

  stats.record_latency(Duration(20us));
  stats.record_latency(Duration(3ms));
  stats.record_latency(Duration(2s));  // beyond the last bound: +Inf only

  auto e = scrape(port);
  EXPECT_EQ(e.types["pressured_reactor_dispatch_latency_seconds"], "histogram");
  auto buckets = e.find("pressured_reactor_dispatch_latency_seconds_bucket");
  ASSERT_EQ(buckets.size(), kLatencyBucketsUs.size() + 1);  // 10 us .. 1 s, and +Inf
  std::vector<double> les;
  for (const auto& b : buckets) les.push_back(std::strtod(b.labels.at("le").c_str(), nullptr));
  std::sort(les.begin(), les.end());
  EXPECT_DOUBLE_EQ(les.front(), 1e-5);
  EXPECT_DOUBLE_EQ(les[les.size() - 2], 1);
  EXPECT_TRUE(std::isinf(les.back()));
  for (const auto& b : buckets) {
    const double le = std::strtod(b.labels.at("le").c_str(), nullptr);
    const double want = le >= 2 ? 3 : (le >= 0.003 ? 2 : (le >= 0.00002 ? 1 : 0));
    EXPECT_EQ(b.value, want) << "le=" << b.labels.at("le");
  }
  EXPECT_EQ(e.value("pressured_reactor_dispatch_latency_seconds_count"), 3);
  EXPECT_NEAR(*e.value("pressured_reactor_dispatch_latency_seconds_sum"), 2.00302, 1e-9);

  // A later scrape adds only what is new: nothing counted twice.
  e = scrape(port);
  EXPECT_EQ(e.value("pressured_reactor_dispatch_latency_seconds_count"), 3);
  stats.record_latency(Duration(5us));
  e = scrape(port);
  EXPECT_EQ(e.value("pressured_reactor_dispatch_latency_seconds_count"), 4);
  EXPECT_EQ(e.value("pressured_reactor_dispatch_latency_seconds_bucket", {{"le", "1e-05"}}), 1);
  EXPECT_NEAR(*e.value("pressured_reactor_dispatch_latency_seconds_sum"), 2.003025, 1e-9);
  (*server)->stop();
}

}  // namespace
}  // namespace pressured
