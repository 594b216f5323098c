// Crash anywhere, lose nothing. The real daemon (the built `pressured`
// binary) drives one eviction at a time in a sandbox kubepods tree under the
// memory controller, reporting to a fake API server on 127.0.0.1, and raises
// SIGKILL on itself at one named point of the eviction's life
// (PRESSURED_CRASH_AT, userspace/daemon/crash_point.hpp; "api-inflight" is the
// API server killing it while it answers the eviction's status update).
// Restarted each time, with the configuration then in force, it must finish
// the eviction exactly once: one record in the API (the pod's status marked
// Failed), one Event, the bystander untouched, the victim
// not killed again unless it runs, a v1 freezer cgroup a kill left frozen
// thawed. Root; every workload is bounded in size and time, and every wait is
// bounded: a step that does not end fails and says what it waited for.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/child_process.hpp"
#include "fakes/privilege.hpp"
#include "fakes/sandbox_cgroup.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kBinary = PRESSURED_BINARY_DIR "/pressured";

// Holds `--mib` MiB until killed (or `--seconds`), ignoring SIGTERM: only
// the local kill or the end of its time ends it. Python, so that a sanitizer
// build of pressured does not distort the sandbox's accounting.
const char* kWorkload = R"(
import signal, sys, time
mib = min(int(sys.argv[1]), 512)
seconds = min(int(sys.argv[2]), 120)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
held = bytearray(b'\x01') * (mib << 20)
time.sleep(seconds)
)";

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The API server as far as the reporter uses it: the pods (with their uid,
// phase Failed once their status recorded the eviction, a deletionTimestamp
// once evicted through the Eviction API), status updates, Evictions, DELETEs
// and Events (a second Event of the same name is a 409, as on a real server).
// Each status update, Eviction or DELETE counts as one eviction.
class FakeApi {
 public:
  explicit FakeApi(std::map<std::string, std::string> pods) : pods_(std::move(pods)) {
    srv_.Get(R"(/api/v1/namespaces/t/pods/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lk(mu_);
      auto it = pods_.find(req.matches[1]);
      if (it == pods_.end()) {
        res.status = 404;
        return;
      }
      json meta{{"name", it->first}, {"namespace", "t"}, {"uid", it->second}};
      if (deleting_.count(it->first) != 0) meta["deletionTimestamp"] = "2026-01-01T00:00:00Z";
      json status{{"phase", failed_.count(it->first) != 0 ? "Failed" : "Running"}};
      // On the daemon's node (nodeName n1): the reporter writes about no other pod.
      res.set_content(json{{"metadata", meta}, {"spec", {{"nodeName", "n1"}}}, {"status", status}}.dump(),
                      "application/json");
    });
    srv_.Patch(R"(/api/v1/namespaces/t/pods/([^/]+)/status)", [this](const httplib::Request& req, httplib::Response& res) {
      take_eviction(req.matches[1], failed_);
      res.set_content("{}", "application/json");
    });
    srv_.Post(R"(/api/v1/namespaces/t/pods/([^/]+)/eviction)", [this](const httplib::Request& req, httplib::Response& res) {
      take_eviction(req.matches[1], deleting_);
      res.status = 201;
      res.set_content("{}", "application/json");
    });
    srv_.Delete(R"(/api/v1/namespaces/t/pods/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lk(mu_);
      ++evictions_[req.matches[1]];
      deleting_.insert(req.matches[1]);
      res.set_content("{}", "application/json");
    });
    srv_.Post("/api/v1/namespaces/t/events", [this](const httplib::Request& req, httplib::Response& res) {
      json e = json::parse(req.body, nullptr, false);
      std::lock_guard lk(mu_);
      const std::string name = e.is_object() ? e["metadata"].value("name", "") : "";
      const std::string pod = e.is_object() ? e["involvedObject"].value("name", "") : "";
      if (!event_names_.insert(name).second) {
        res.status = 409;
        return;
      }
      ++events_[pod];
      res.status = 201;
      res.set_content("{}", "application/json");
    });
    srv_.Patch(".*", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    // Until it runs, stop() would not stop it (and the destructor would wait forever).
    for (auto end = std::chrono::steady_clock::now() + 30s; !srv_.is_running() && std::chrono::steady_clock::now() < end;) {
      std::this_thread::sleep_for(5ms);
    }
  }
  bool running() const { return port_ > 0 && srv_.is_running(); }
  ~FakeApi() {
    srv_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  /// The next eviction (status update or Eviction) is taken, then `pid` is
  /// killed before it hears the answer.
  void kill_on_eviction(pid_t pid) {
    std::lock_guard lk(mu_);
    kill_on_eviction_ = pid;
  }
  int evictions(const std::string& pod) {
    std::lock_guard lk(mu_);
    return evictions_[pod];
  }
  int events(const std::string& pod) {
    std::lock_guard lk(mu_);
    return events_[pod];
  }

 private:
  // Counts one eviction of `pod` and marks it in `marked` (failed_ or
  // deleting_); the daemon asked to die meanwhile is killed.
  void take_eviction(const std::string& pod, std::set<std::string>& marked) {
    pid_t victim_of_crash = 0;
    {
      std::lock_guard lk(mu_);
      ++evictions_[pod];
      marked.insert(pod);
      victim_of_crash = std::exchange(kill_on_eviction_, 0);
    }
    // Taken, but the daemon dies before it reads the answer.
    if (victim_of_crash > 0) ::kill(victim_of_crash, SIGKILL);
  }

  httplib::Server srv_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::map<std::string, std::string> pods_;  // name -> uid
  std::set<std::string> deleting_;
  std::set<std::string> failed_;
  std::set<std::string> event_names_;
  std::map<std::string, int> evictions_, events_;
  pid_t kill_on_eviction_ = 0;
};

enum class Kind { Soft, Hard, SoftLocal };  // SoftLocal: no pod source, SIGTERM here, no API

struct Case {
  Kind kind;
  std::string point;  // where the first run dies
  bool killed_before_crash;  // the victim's kill went out before the crash
};

std::string name(const Case& c) {
  return std::string(c.kind == Kind::Soft ? "soft" : c.kind == Kind::Hard ? "hard" : "soft-local") + "/" + c.point;
}

// One node: the sandbox (memory, and its mirror in the v1 freezer hierarchy),
// a victim and a bystander, the fake API, and the daemon's files.
class Node {
 public:
  Node(const std::string& tag, Kind kind)
      : mem_(testing::SandboxCgroup::find_memory_mount(), tag),
        kind_(kind),
        api_({{"victim", kVictimUid}, {"bystander", kBystanderUid}}) {
    char tmpl[] = "/tmp/pressured-crash-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    if (fs::exists("/sys/fs/cgroup/freezer/cgroup.procs")) {
      freezer_ = std::make_unique<testing::SandboxCgroup>("/sys/fs/cgroup/freezer", tag);
    }
  }
  ~Node() {
    stop();
    if (freezer_ && freezer_->ok()) freezer_->write(kVictim, "freezer.state", "THAWED");  // lets the sandbox go
    fs::remove_all(dir_);
  }
  bool ok() const { return mem_.ok(); }
  std::string error() const { return mem_.error(); }
  FakeApi& api() { return api_; }
  bool has_freezer() const { return freezer_ && freezer_->ok(); }

  bool setup() {
    if (!mem_.make("kubepods/burstable") || !mem_.make(kVictim) || !mem_.make(kBystander)) return false;
    if (!mem_.write("kubepods", "memory.limit_in_bytes", std::to_string(256ull << 20))) return false;
    if (has_freezer() && !freezer_->make(kVictim)) return false;
    const pid_t v = mem_.spawn(kVictim, {"/usr/bin/python3", "-c", kWorkload, "150", "90"});
    const pid_t b = mem_.spawn(kBystander, {"/usr/bin/python3", "-c", kWorkload, "20", "90"});
    if (v <= 0 || b <= 0) return false;
    if (has_freezer() && !freezer_->move(kVictim, v)) return false;
    // The victim's memory charged before the daemon looks (bounded).
    for (int i = 0; i < 300 && usage_mib(kVictim) < 150; ++i) std::this_thread::sleep_for(50ms);
    write_files();
    return usage_mib(kVictim) >= 150;
  }

  uint64_t usage_mib(const std::string& rel) const {
    const std::string v = mem_.read(rel, "memory.usage_in_bytes");
    return v.empty() ? 0 : std::stoull(v) >> 20;
  }
  std::size_t procs(const std::string& rel) const {
    std::istringstream in(mem_.read(rel, "cgroup.procs"));
    std::size_t n = 0;
    long x;
    while (in >> x) ++n;
    return n;
  }
  bool wait_gone(const std::string& rel, std::chrono::milliseconds limit) const {
    for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
      if (procs(rel) == 0) return true;
      std::this_thread::sleep_for(20ms);
    }
    return procs(rel) == 0;
  }
  void freeze_victim() { freezer_->write(kVictim, "freezer.state", "FROZEN"); }
  std::string victim_freezer_state() const {
    std::string s = freezer_->read(kVictim, "freezer.state");
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  /// The configuration in force for the next start.
  void write_config(std::chrono::seconds soft_kill_margin) {
    std::string yaml = kind_ == Kind::Hard
                           ? "evictionHard:\n  allocatableMemory.available: 150Mi\n"
                           : "evictionSoft:\n  allocatableMemory.available: 150Mi\n"
                             "evictionSoftGracePeriod:\n  allocatableMemory.available: 1s\n";
    yaml += "evictionMaxPodGracePeriod: 2\nevictionPressureTransitionPeriod: 1s\n"
            "events:\n  bpf: off\n"
            "daemon:\n  releaseWaitTimeout: 2s\n  softKillMargin: " +
            std::to_string(soft_kill_margin.count()) +
            "s\n"
            "kubernetes:\n  enabled: true\n  kubeconfig: " +
            dir_ + "/kubeconfig\n  nodeName: n1\n  taintNodes: false\n...\n";
    std::ofstream(dir_ + "/config.yaml") << yaml;
  }

  /// Starts the daemon; `crash_at` empty: no crash point.
  bool start(const std::string& crash_at, bool api_kills_it) {
    std::vector<std::string> argv{kBinary,          "run",
                                  "--config",       dir_ + "/config.yaml",
                                  "--cgroup-root",  "/" + fs::path(mem_.path()).filename().string(),
                                  "--cgroup-driver", "cgroupfs",
                                  "--metrics-listen", "127.0.0.1:0",
                                  "--state-file",   dir_ + "/state.json",
                                  "--safety-net-interval", "100ms"};
    // SoftLocal runs without a pod source: pods are ranked from their cgroups
    // alone and evicted here with their SIGTERM (with a source, a pod it does
    // not list is never evicted).
    if (kind_ != Kind::SoftLocal) {
      argv.insert(argv.end(), {"--pod-file", dir_ + "/pods.json"});
    }
    const std::string log = dir_ + "/daemon.log";
    running_before_ = running_lines();
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).rfind("PRESSURED_CRASH_AT=", 0) != 0) env.emplace_back(*e);
    }
    if (!crash_at.empty()) env.push_back("PRESSURED_CRASH_AT=" + crash_at);
    pid_ = testing::spawn_logged(std::move(argv), log, std::move(env));
    if (api_kills_it) api_.kill_on_eviction(pid_);
    return pid_ > 0;
  }
  /// Waits for the daemon to die of SIGKILL (its crash point).
  bool wait_crash(std::chrono::milliseconds limit) {
    const int status = testing::reap_within(pid_, limit);
    if (status == -1) return false;
    pid_ = -1;
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  }
  /// SIGTERM, then the exit status (SIGKILL after 10 s); -1 if it could not be reaped.
  int stop() {
    if (pid_ <= 0) return -1;
    const int status = testing::stop_child(pid_, 10s);
    pid_ = -1;
    return status;
  }
  std::string log() const { return slurp(dir_ + "/daemon.log"); }
  /// Waits until the daemon of the last start() logs that it runs.
  bool wait_running(std::chrono::milliseconds limit) const {
    for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
      if (running_lines() > running_before_) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  std::size_t running_lines() const {
    const std::string text = log();
    std::size_t n = 0;
    for (auto p = text.find("pressured running"); p != std::string::npos; p = text.find("pressured running", p + 1)) ++n;
    return n;
  }

  /// A counter of the running daemon's /metrics (its port is in its log); -1 if unreadable.
  double metric(const std::string& series) const {
    const std::string text = log();
    const std::string marker = "metrics at http://127.0.0.1:";
    const auto at = text.rfind(marker);
    if (at == std::string::npos) return -1;
    const int port = std::atoi(text.c_str() + at + marker.size());
    httplib::Client cli("127.0.0.1", port);
    cli.set_connection_timeout(10);
    cli.set_read_timeout(10);
    cli.set_write_timeout(10);
    auto r = cli.Get("/metrics");
    if (!r || r->status != 200) return -1;
    std::istringstream in(r->body);
    std::string line;
    while (std::getline(in, line)) {
      // "name value" or "name{labels} value"
      if (line.rfind(series, 0) != 0 || line.size() <= series.size()) continue;
      if (line[series.size()] != ' ' && line[series.size()] != '{') continue;
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    // Declared but without a sample yet: nothing counted.
    return r->body.find("# TYPE " + series + " ") != std::string::npos ? 0 : -1;
  }

  static constexpr const char* kVictim = "kubepods/besteffort/pod11111111-0000-4000-8000-00000000c001";
  static constexpr const char* kBystander = "kubepods/burstable/pod11111111-0000-4000-8000-00000000c002";
  static constexpr const char* kVictimUid = "11111111-0000-4000-8000-00000000c001";
  static constexpr const char* kBystanderUid = "11111111-0000-4000-8000-00000000c002";

 private:
  void write_files() {
    std::string items;
    auto pod = [](const std::string& name, const std::string& uid, const std::string& qos, const std::string& res) {
      return R"({"metadata":{"name":")" + name + R"(","namespace":"t","uid":")" + uid +
             R"("},"spec":{"terminationGracePeriodSeconds":2,"containers":[{"name":"c","resources":)" + res +
             R"(}]},"status":{"phase":"Running","qosClass":")" + qos + R"("}})";
    };
    items += pod("victim", kVictimUid, "BestEffort", "{}") + ",";
    items += pod("bystander", kBystanderUid, "Burstable", R"({"requests":{"memory":"64Mi"}})");
    std::ofstream(dir_ + "/pods.json") << R"({"apiVersion":"v1","kind":"PodList","items":[)" << items << "]}";
    std::ofstream(dir_ + "/kubeconfig") << "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                                        << "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                                        << "clusters:\n- name: k\n  cluster: {server: 'http://127.0.0.1:"
                                        << api_.port() << "'}\nusers:\n- name: u\n  user: {token: t}\n";
  }

  testing::SandboxCgroup mem_;
  std::unique_ptr<testing::SandboxCgroup> freezer_;
  Kind kind_;
  FakeApi api_;
  std::string dir_;
  pid_t pid_ = -1;
  std::size_t running_before_ = 0;
};

// Every point of an eviction's life, for the kind of eviction that passes it.
const std::vector<Case> kCases = {
    {Kind::Soft, "decision", false},    {Kind::Soft, "checkpoint", false}, {Kind::Soft, "api-queued", false},
    {Kind::Soft, "api-inflight", false}, {Kind::Soft, "api-landed", false}, {Kind::Soft, "grace", false},
    {Kind::Soft, "kill", true},         {Kind::Hard, "decision", false},   {Kind::Hard, "checkpoint", false},
    {Kind::Hard, "kill", true},         {Kind::Hard, "api-queued", true},  {Kind::Hard, "api-inflight", true},
    {Kind::Hard, "api-landed", true},   {Kind::SoftLocal, "signal", false},
};

TEST(CrashConsistency, EveryEvictionCompletesExactlyOnceWhereverTheDaemonDies) {
  PRESSURED_REQUIRE_ROOT();
  PRESSURED_REQUIRE(fs::exists("/usr/bin/python3"), "/usr/bin/python3 (the pods' workload)");
  PRESSURED_REQUIRE(fs::exists(kBinary), "the pressured binary " + kBinary);
  PRESSURED_REQUIRE(testing::SandboxCgroup::find_memory_mount() == "/sys/fs/cgroup/memory",
                    "the cgroup v1 memory controller (this test's sandbox is v1)");
  int n = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    Node node("crash" + std::to_string(n++), c.kind);
    ASSERT_TRUE(node.ok()) << node.error();
    ASSERT_TRUE(node.api().running()) << "the fake API server did not start listening within 30 s";
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(node.setup()) << "setup: waited 15 s for the victim's 150 MiB to be charged, at "
                              << node.usage_mib(Node::kVictim) << " MiB (" << node.error() << ")";

    // The first run dies at the point. Its soft kill margin is long: only the
    // configuration of the second run (1 s) lets the resumed eviction end
    // soon (except where the first run must reach the kill itself).
    const bool api_kills = c.point == "api-inflight";
    node.write_config(c.kind == Kind::Hard || c.point == "kill" ? 1s : 300s);
    ASSERT_TRUE(node.start(api_kills ? "" : c.point, api_kills)) << "fork: " << std::strerror(errno);
    ASSERT_TRUE(node.wait_crash(60s)) << "first run: waited 60 s for the daemon to die of SIGKILL at '" << c.point
                                      << "'\n" << node.log();
    const double crashed = seconds_since(t0);

    if (c.killed_before_crash) {
      ASSERT_TRUE(node.wait_gone(Node::kVictim, 10s))
          << "after the crash: waited 10 s for the victim the first run killed to be gone\n" << node.log();
    } else {
      ASSERT_GT(node.procs(Node::kVictim), 0u) << "died before any kill\n" << node.log();
    }
    const bool running_at_restart = node.procs(Node::kVictim) > 0;
    // A crash between the freeze and the thaw of a v1 kill leaves the victim frozen.
    const bool frozen = node.has_freezer() && running_at_restart && c.kind == Kind::Hard;
    if (frozen) node.freeze_victim();

    node.write_config(1s);
    ASSERT_TRUE(node.start("", false)) << "fork: " << std::strerror(errno);
    // The restore and the first decision are behind "pressured running".
    ASSERT_TRUE(node.wait_running(60s)) << "second run: waited 60 s for 'pressured running' in its log\n"
                                        << node.log();
    const double restarted = seconds_since(t0);
    const bool api = c.kind != Kind::SoftLocal;
    bool done = false;
    for (auto end = std::chrono::steady_clock::now() + 60s; !done && std::chrono::steady_clock::now() < end;) {
      done = node.procs(Node::kVictim) == 0 &&
             (!api || (node.api().evictions("victim") >= 1 && node.api().events("victim") >= 1));
      if (!done) std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(done) << "second run: waited 60 s for the resumed eviction to complete: victim procs "
                      << node.procs(Node::kVictim) << ", API evictions " << node.api().evictions("victim")
                      << ", Events " << node.api().events("victim") << "\n" << node.log();
    // Where the time of a case went (no bound on it: a loaded machine is slow),
    // so a slow run can be told from a stuck one.
    std::printf("[ case     ] %-22s crashed at %.1f s, running again at %.1f s, completed at %.1f s\n",
                name(c).c_str(), crashed, restarted, seconds_since(t0));
    if (frozen) {
      EXPECT_EQ(node.victim_freezer_state(), "THAWED");
    }
    const double kills = node.metric("pressured_eviction_sigkills_total");
    ASSERT_GE(kills, 0) << "no /metrics\n" << node.log();
    if (running_at_restart) {
      EXPECT_GE(kills, 1) << node.log();
    } else {
      EXPECT_EQ(kills, 0) << "killed before the crash, empty since: not killed again\n" << node.log();
    }
    // Its reporter drains: a duplicate would show now.
    EXPECT_EQ(node.stop(), 0) << "second run's exit after SIGTERM (10 s, then SIGKILL)\n" << node.log();

    EXPECT_EQ(node.api().evictions("victim"), api ? 1 : 0) << node.log();
    EXPECT_EQ(node.api().events("victim"), api ? 1 : 0) << node.log();
    EXPECT_EQ(node.api().evictions("bystander"), 0);
    EXPECT_EQ(node.api().events("bystander"), 0);
    EXPECT_GT(node.procs(Node::kBystander), 0u) << "outside the decision\n" << node.log();
    if (::testing::Test::HasFailure()) break;  // one case's log is enough to read
  }
}

}  // namespace
}  // namespace pressured
