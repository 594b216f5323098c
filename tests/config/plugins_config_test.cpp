// The plugins section: off by default, parsing, and the errors an operator sees.
#include <gtest/gtest.h>

#include "config/config_errors.hpp"
#include "config/load.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;

using testing::error_of;

TEST(PluginsConfig, OffByDefaultWithDeadlinesOfTensOfMilliseconds) {
  auto r = parse_config_yaml("{}\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->plugins.directory.empty());
  EXPECT_FALSE(r->observe.pods.keep_labels) << "labels only advise plugins: none configured, none kept";
  EXPECT_EQ(r->plugins.call_timeout, 50ms);
  EXPECT_EQ(r->plugins.answer_max_age, 30s);
  EXPECT_EQ(r->plugins.proposal_interval, 60s);
  EXPECT_EQ(r->plugins.max_candidates, 32u);
}

TEST(PluginsConfig, ParsesEveryKey) {
  auto r = parse_config_yaml(
      "plugins:\n  directory: /run/pressured/plugins\n  callTimeout: 20ms\n  answerMaxAge: 10s\n"
      "  proposalInterval: 5m\n  backoffInitial: 100ms\n  backoffMax: 10s\n  maxCandidates: 8\n  maxPlugins: 4\n"
      "  module: /opt/pressured/libpressured_plugin_grpc.so\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->plugins.directory, "/run/pressured/plugins");
  EXPECT_TRUE(r->observe.pods.keep_labels) << "plugins' selectors read the pods' labels";
  EXPECT_EQ(r->plugins.call_timeout, 20ms);
  EXPECT_EQ(r->plugins.answer_max_age, 10s);
  EXPECT_EQ(r->plugins.proposal_interval, 5min);
  EXPECT_EQ(r->plugins.backoff_initial, 100ms);
  EXPECT_EQ(r->plugins.backoff_max, 10s);
  EXPECT_EQ(r->plugins.max_candidates, 8u);
  EXPECT_EQ(r->plugins.max_plugins, 4u);
  EXPECT_EQ(r->plugins.module, "/opt/pressured/libpressured_plugin_grpc.so");
}

TEST(PluginsConfig, RejectsBadValuesNamingTheKey) {
  EXPECT_HAS(error_of("plugins:\n  directory: run/plugins\n"), "plugins.directory: 'run/plugins' is not an absolute path");
  EXPECT_HAS(error_of("plugins:\n  callTimeout: 5s\n"), "plugins.callTimeout: '5s' is not between 1ms and 1s");
  EXPECT_HAS(error_of("plugins:\n  callTimeout: 0s\n"), "plugins.callTimeout");
  EXPECT_HAS(error_of("plugins:\n  answerMaxAge: 1h\n"), "plugins.answerMaxAge");
  EXPECT_HAS(error_of("plugins:\n  proposalInterval: 100ms\n"), "plugins.proposalInterval: '100ms' is under 1s");
  EXPECT_HAS(error_of("plugins:\n  backoffInitial: 2s\n  backoffMax: 1s\n"), "plugins.backoffMax");
  EXPECT_HAS(error_of("plugins:\n  maxCandidates: 0\n"), "plugins.maxCandidates: '0' is not between 1 and 1000");
  EXPECT_HAS(error_of("plugins:\n  maxPlugins: 100\n"), "plugins.maxPlugins");
  EXPECT_HAS(error_of("plugins:\n  module: lib.so\n"), "plugins.module");
  EXPECT_HAS(error_of("plugins:\n  dir: /x\n"), "plugins.dir: unknown key");
}

}  // namespace
}  // namespace pressured
