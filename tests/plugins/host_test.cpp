// Plugins over real Unix sockets: the gRPC transport module (dlopen'd as
// pressured does), the host's inotify registration and worker, and the
// daemon's cycle with a fake observer and a recording evictor. The plugins
// are real processes: the C++ example (pressured-plugin-protect) and a
// Python fixture that misbehaves on purpose (tests/plugins/fixture_plugin.py).
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "daemon/child_process.hpp"
#include "daemon/daemon.hpp"
#include "engine/eviction_words.hpp"
#include "fakes/fake_observer.hpp"
#include "metrics/exposition.hpp"
#include "plugins/host.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
using testing::FakeObserver;
constexpr uint64_t MiB = 1 << 20;

TimePoint at(double s) { return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s))); }

// Polls `done` every 20 ms for at most `limit`.
bool wait_until(const std::function<bool()>& done, std::chrono::seconds limit = 60s) {
  for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

struct Plugins : ::testing::Test {
  std::string dir;
  std::string log;
  std::vector<pid_t> children;

  void SetUp() override {
    const std::string module = PRESSURED_BINARY_DIR "/userspace/plugins/libpressured_plugin_grpc.so";
    if (!std::filesystem::exists(module)) {
      // Built wherever gRPC is installed (scripts/setup): a missing module is a broken build here.
      FAIL() << module << " is missing: install libgrpc++-dev and protobuf-compiler-grpc (scripts/setup)";
    }
    char tmpl[] = "/tmp/pressured-plugins-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = std::string(tmpl) + "/sockets";
    log = std::string(tmpl) + "/plugins.log";
    ::setenv("PRESSURED_PLUGIN_STUBS", PRESSURED_BINARY_DIR "/generated/plugin_proto", 1);
  }
  void TearDown() override {
    for (pid_t p : children) {
      if (p > 0) testing::stop_child(p, 5s);
    }
    std::error_code ec;
    if (!dir.empty()) {
      if (::testing::Test::HasFailure()) {
        std::ifstream in(log);
        std::cerr << "--- plugin log ---\n" << in.rdbuf() << "\n";
      }
      std::filesystem::remove_all(std::filesystem::path(dir).parent_path(), ec);
    }
  }

  pid_t start_protect(const std::string& rule) { return start_protect_cpp({"--protect", rule}); }
  // The C++ example with its rules.
  pid_t start_protect_cpp(const std::vector<std::string>& rules) {
    std::vector<std::string> argv{PRESSURED_BINARY_DIR "/userspace/plugins/pressured-plugin-protect", "--socket",
                                  dir + "/protect.sock", "--name", "protect"};
    argv.insert(argv.end(), rules.begin(), rules.end());
    pid_t p = testing::spawn_logged(argv, log);
    children.push_back(p);
    return p;
  }
  // The Python example with its rules.
  pid_t start_protect_py(const std::vector<std::string>& rules) {
    std::vector<std::string> argv{"/usr/bin/python3", PRESSURED_SOURCE_DIR "/userspace/plugins/examples/protect.py",
                                  "--socket", dir + "/protect.sock", "--name", "protect"};
    argv.insert(argv.end(), rules.begin(), rules.end());
    pid_t p = testing::spawn_logged(argv, log);
    children.push_back(p);
    return p;
  }
  pid_t start_fixture(const std::string& name, const std::string& mode, std::vector<std::string> uids = {},
                      const std::string& marker = "") {
    std::vector<std::string> argv{"/usr/bin/python3", PRESSURED_SOURCE_DIR "/tests/plugins/fixture_plugin.py",
                                  "--socket", dir + "/" + name + ".sock", "--name", name, "--mode", mode};
    for (auto& u : uids) argv.insert(argv.end(), {"--uid", u});
    if (!marker.empty()) argv.insert(argv.end(), {"--marker", marker});
    pid_t p = testing::spawn_logged(argv, log);
    children.push_back(p);
    return p;
  }

  std::unique_ptr<plugins::PluginHost> host(Duration call_timeout = 500ms) {
    auto connector = plugins::load_grpc_connector("");
    EXPECT_TRUE(connector) << connector.error().message;
    if (!connector) return nullptr;
    plugins::HostOptions o;
    o.directory = dir;  // created 0700 by start()
    o.call_timeout = call_timeout;
    o.backoff_initial = 50ms;
    o.backoff_max = 200ms;
    auto h = std::make_unique<plugins::PluginHost>(o, std::move(*connector));
    auto started = h->start();
    EXPECT_TRUE(started) << started.error().message;
    return h;
  }
};

// The daemon's side: a fake node, a recorder for kills, the host given in.
struct Node {
  Metrics metrics{MetricsOptions{.node = "test"}};
  FakeObserver obs;
  RecordingEvictor ev;
  std::unique_ptr<Daemon> d;
  explicit Node(plugins::PluginHost* host) {
    obs.add("a", QosClass::BestEffort, 100 * MiB);  // pressured's ranking: a first
    obs.add("b", QosClass::Burstable, 300 * MiB, 100 * MiB);
    Config c;
    Threshold t;
    t.signal = Signal::AllocatableMemoryAvailable;
    t.kind = ThresholdKind::Hard;
    t.value.quantity = static_cast<double>(200 * MiB);
    c.eviction.thresholds = {t};
    c.daemon.state_file = "";
    DaemonDeps deps;
    deps.observer = &obs;
    deps.evictor = &ev;
    deps.metrics = &metrics;
    deps.boot_id = "test-boot";
    deps.plugins = host;
    d = std::make_unique<Daemon>(std::move(c), deps);
  }
  void pressure() { obs.find("b")->usage.memory_working_set_bytes = 800 * MiB; }  // 1024 - 900 < 200
  std::vector<std::string> killed() const {
    std::vector<std::string> out;
    for (const auto& c : ev.calls()) {
      if (c.step == "kill") out.push_back(c.target.uid);
    }
    return out;
  }
};

bool has_answers(const plugins::PluginHost& h, const std::string& plugin) {
  for (const auto& a : h.answers()) {
    if (a.plugin == plugin) return true;
  }
  return false;
}

TEST_F(Plugins, AProtectingPluginChangesTheVictim) {
  auto h = host();
  ASSERT_TRUE(h);
  start_protect("ns/a");  // the C++ example: protects pod a of namespace ns
  ASSERT_TRUE(wait_until([&] { return h->registrations() == 1; })) << "the plugin never registered";
  Node n(h.get());
  // No pressure: the decision asks the plugins about the ranking's head.
  n.d->evaluate(at(1), "test", std::nullopt);
  ASSERT_TRUE(wait_until([&] { return has_answers(*h, "protect"); })) << "no answer from the plugin";
  n.pressure();
  n.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(n.killed(), std::vector<std::string>{"b"}) << "without the plugin, a goes first";
  ASSERT_NE(n.d->policy().in_flight(Lane::Memory), nullptr);
  const Eviction& e = n.d->policy().in_flight(Lane::Memory)->eviction;
  ASSERT_EQ(e.plugin_notes.size(), 1u);
  EXPECT_EQ(e.plugin_notes[0].plugin, "protect");
  EXPECT_EQ(e.plugin_notes[0].reason, "protected: ns/a*");
  EXPECT_NE(explain_choice(e).find("protect protect ns/a"), std::string::npos) << explain_choice(e);
  EXPECT_EQ(testing::scraped(n.metrics, "pressured_plugin_vetoes_total", {{"plugin", "protect"}}), 1.0);
  EXPECT_GE(testing::scraped(n.metrics, "pressured_plugin_calls_total", {{"plugin", "protect"}}).value_or(0), 1.0);
}

std::shared_ptr<const PodLabels> labels(std::vector<std::pair<std::string, std::string>> entries,
                                        bool incomplete = false) {
  return std::make_shared<const PodLabels>(PodLabels{std::move(entries), incomplete});
}

// Both examples protect and demote by label selector, from the labels
// pressured sends: a {app=db} protected, b {app=db, tier=canary} not (the
// selector's `!=`), c with incomplete labels lacking `app` protected all the
// same, d {batch} demoted. Under pressure b goes, where pressured's own
// ranking takes a.
void expect_protection_by_labels(Plugins& t, const std::function<void()>& start_plugin) {
  auto h = t.host();
  ASSERT_TRUE(h);
  start_plugin();
  ASSERT_TRUE(wait_until([&] { return h->registrations() == 1; })) << "the plugin never registered";
  Node n(h.get());
  n.obs.find("a")->labels = labels({{"app", "db"}});
  n.obs.find("b")->labels = labels({{"app", "db"}, {"tier", "canary"}});
  n.obs.add("c", QosClass::BestEffort, 10 * MiB).labels = labels({{"team", "x"}}, true);
  n.obs.add("d", QosClass::BestEffort, 10 * MiB).labels = labels({{"batch", ""}});
  n.d->evaluate(at(1), "test", std::nullopt);
  ASSERT_TRUE(wait_until([&] { return has_answers(*h, "protect"); })) << "no answer from the plugin";
  std::map<std::string, std::string> said;  // uid -> action: reason
  for (const auto& a : h->answers()) {
    for (const auto& adj : a.adjustments[static_cast<std::size_t>(Lane::Memory)]) {
      said[adj.uid] = std::string(plugins::name(adj.action)) + ": " + adj.reason;
    }
  }
  EXPECT_EQ(said, (std::map<std::string, std::string>{
                      {"a", "protect: protected: labels app=db,tier!=canary"},
                      {"c", "protect: protected: labels app=db,tier!=canary (labels incomplete)"},
                      {"d", "demote: evicted last: labels batch"}}));
  n.pressure();
  n.d->evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(n.killed(), std::vector<std::string>{"b"}) << "without the plugin, a goes first";
}

TEST_F(Plugins, TheCppExampleProtectsByLabelSelector) {
  expect_protection_by_labels(*this, [&] {
    start_protect_cpp({"--protect-selector=app=db,tier!=canary", "--demote-selector", "batch"});
  });
}

TEST_F(Plugins, ThePythonExampleProtectsByLabelSelector) {
  expect_protection_by_labels(*this, [&] {
    start_protect_py({"--protect-selector=app=db,tier!=canary", "--demote-selector", "batch"});
  });
}

TEST_F(Plugins, AHangingPluginDoesNotDelayAHardEvictionAndCountsATimeout) {
  auto h = host(1s);  // a long deadline: the decision comes while the call hangs
  ASSERT_TRUE(h);
  const std::string marker = dir + "/../hanging";
  start_fixture("hang", "hang", {}, marker);
  ASSERT_TRUE(wait_until([&] { return h->registrations() == 1; }));
  Node n(h.get());
  n.d->evaluate(at(1), "test", std::nullopt);  // asks: the plugin hangs in RankCandidates
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(marker); }));
  n.pressure();
  n.d->evaluate(at(2), "test", std::nullopt);
  // Decided on pressured's own ranking, while the plugin's call was outstanding.
  EXPECT_EQ(n.killed(), std::vector<std::string>{"a"});
  EXPECT_EQ(h->counts()["hang"].timeouts, 0u) << "the decision waited for the plugin's deadline";
  ASSERT_TRUE(wait_until([&] { return h->counts()["hang"].timeouts == 1; }));
  n.d->evaluate(at(3), "test", std::nullopt);  // exports what the host counted
  EXPECT_EQ(testing::scraped(n.metrics, "pressured_plugin_timeouts_total", {{"plugin", "hang"}}), 1.0);
}

TEST_F(Plugins, ACrashingPluginIsDroppedAndRegisteredAgainWhenItComesBack) {
  auto h = host();
  ASSERT_TRUE(h);
  const pid_t first = start_fixture("crashy", "protect", {"a"});
  ASSERT_TRUE(wait_until([&] { return h->registrations() == 1; }));
  plugins::LaneQuestion q;
  q.candidates.push_back(plugins::CandidatePod{.uid = "a"});
  h->ask({q});
  ASSERT_TRUE(wait_until([&] { return has_answers(*h, "crashy"); }));
  ::kill(first, SIGKILL);  // a crash: the socket file stays behind
  testing::reap_within(first, 10s);
  std::erase(children, first);  // reaped: not stopped again at the end
  // Asked again: unreachable, so dropped (and its answers with it).
  ASSERT_TRUE(wait_until([&] {
    h->ask({q});
    const auto st = h->status();
    return !st.empty() && !st[0].registered;
  }));
  EXPECT_FALSE(has_answers(*h, "crashy"));
  EXPECT_GE(h->counts()["crashy"].errors, 1u);
  start_fixture("crashy", "protect", {"a"});  // back: it re-creates its socket
  ASSERT_TRUE(wait_until([&] { return h->registrations() == 2; })) << "not registered again";
  ASSERT_TRUE(wait_until([&] {
    h->ask({q});
    return has_answers(*h, "crashy");
  }));
}

TEST_F(Plugins, AHostilePluginChangesNothingItMayNot) {
  auto h = host();
  ASSERT_TRUE(h);
  start_fixture("hostile", "hostile", {"crit"});  // protects everything, proposes the critical pod
  start_fixture("huge", "huge");                  // answers over the size limit
  ASSERT_TRUE(wait_until([&] { return h->registrations() == 2; }));
  Node n(h.get());
  Pod& crit = n.obs.add("crit", QosClass::BestEffort, 50 * MiB);
  crit.critical = true;
  n.d->evaluate(at(1), "test", std::nullopt);
  ASSERT_TRUE(wait_until([&] { return has_answers(*h, "hostile") && h->counts()["huge"].errors >= 1; }));
  EXPECT_FALSE(has_answers(*h, "huge")) << "an answer over the limit is an error, not advice";
  EXPECT_GE(h->counts()["hostile"].dropped_entries, 1u) << "entries over the limit are dropped";
  n.pressure();
  n.d->evaluate(at(2), "test", std::nullopt);
  // Every candidate protected under a hard threshold: pressured's own head goes.
  EXPECT_EQ(n.killed(), std::vector<std::string>{"a"});
  ASSERT_NE(n.d->policy().in_flight(Lane::Memory), nullptr);
  const Eviction& e = n.d->policy().in_flight(Lane::Memory)->eviction;
  ASSERT_FALSE(e.plugin_notes.empty());
  EXPECT_EQ(e.plugin_notes[0].action, "protect-overridden");
  EXPECT_EQ(testing::scraped(n.metrics, "pressured_plugin_vetoes_total", {{"plugin", "hostile"}}), 0.0);
}

// Footprint: without plugins.directory the daemon maps nothing of gRPC. The
// binary itself needs no gRPC or protobuf library (the transport is a module
// it dlopens only when plugins are configured).
TEST(PluginsFootprint, NothingOfGrpcIsLinkedIntoTheDaemon) {
  const std::string binary = PRESSURED_BINARY_DIR "/pressured";
  ASSERT_TRUE(std::filesystem::exists(binary)) << binary;
  FILE* p = ::popen(("ldd " + binary + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  ASSERT_EQ(::pclose(p), 0) << out;
  ASSERT_NE(out.find("libc.so"), std::string::npos) << out;  // ldd read it
  EXPECT_EQ(out.find("grpc"), std::string::npos) << out;
  EXPECT_EQ(out.find("protobuf"), std::string::npos) << out;
  EXPECT_EQ(out.find("absl"), std::string::npos) << out;
}

}  // namespace
}  // namespace pressured
