// The real daemon (the built `pressured` binary, as a subprocess) against a
// sandbox kubepods tree under the memory controller, with a memory limit on
// the sandbox only. Root; every workload is bounded in size and time.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "daemon/child_process.hpp"
#include "fakes/privilege.hpp"
#include "fakes/sandbox_cgroup.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kBinary = PRESSURED_BINARY_DIR "/pressured";

// The pods' workload: the same flags as `pressured __workload`, in Python, so
// that a sanitizer build of pressured (large binary, shadow memory) does not
// distort the sandbox's memory accounting. Bounded in size and time.
const char* kWorkload = R"(
import argparse, os, signal, time
p = argparse.ArgumentParser()
p.add_argument('--start-mib', type=int, default=16)
p.add_argument('--step-mib', type=int, default=0)
p.add_argument('--interval-ms', type=int, default=100)
p.add_argument('--max-mib', type=int, default=64)
p.add_argument('--duration-s', type=int, default=60)
p.add_argument('--ignore-sigterm', action='store_true')
p.add_argument('--fork-child', action='store_true')
a = p.parse_args()
a.max_mib = min(max(a.max_mib, a.start_mib), 1024)
a.duration_s = min(max(a.duration_s, 1), 120)
if a.ignore_sigterm:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
end = time.time() + a.duration_s
if a.fork_child and os.fork() == 0:
    while time.time() < end:
        time.sleep(0.05)
    os._exit(0)
held = [bytearray(b'\x01') * (a.start_mib << 20)]
total = a.start_mib
while time.time() < end:
    time.sleep(a.interval_ms / 1000.0)
    if a.step_mib and total < a.max_mib:
        step = min(a.step_mib, a.max_mib - total)
        held.append(bytearray(b'\x01') * (step << 20))
        total += step
)";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

struct PodDef {
  std::string uid, name, qos;  // qos: Guaranteed|Burstable|BestEffort
  std::vector<std::string> workload;  // __workload arguments
  int grace = 1;
  std::string spec_extra;  // more pod spec fields, each followed by a comma (e.g. "volumes":[...],)
};

class HostNode {
 public:
  explicit HostNode(const std::string& tag)
      : mount_(testing::SandboxCgroup::find_memory_mount()), sb_(mount_, tag), tag_(tag) {
    char tmpl[] = "/tmp/pressured-host-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~HostNode() {
    stop_daemon();
    fs::remove_all(dir_);
  }
  bool ok() const { return sb_.ok() && !mount_.empty(); }
  std::string error() const { return mount_.empty() ? "no memory controller" : sb_.error(); }
  bool v2() const { return mount_ == "/sys/fs/cgroup"; }

  bool setup(uint64_t limit_mib) {
    if (!sb_.make("kubepods/burstable") || !sb_.make("kubepods/besteffort")) return false;
    if (v2()) {
      sb_.write("", "cgroup.subtree_control", "+memory");
      sb_.write("kubepods", "cgroup.subtree_control", "+memory");
      sb_.write("kubepods/burstable", "cgroup.subtree_control", "+memory");
      sb_.write("kubepods/besteffort", "cgroup.subtree_control", "+memory");
    }
    return sb_.write("kubepods", v2() ? "memory.max" : "memory.limit_in_bytes", std::to_string(limit_mib << 20));
  }

  std::string rel(const PodDef& p) const {
    std::string tier = p.qos == "Guaranteed" ? "" : p.qos == "Burstable" ? "burstable/" : "besteffort/";
    return "kubepods/" + tier + "pod" + p.uid;
  }

  bool start(const PodDef& p) {
    if (!sb_.make(rel(p))) return false;
    std::vector<std::string> argv{"/usr/bin/python3", "-c", kWorkload};
    argv.insert(argv.end(), p.workload.begin(), p.workload.end());
    pods_.push_back(p);
    return sb_.spawn(rel(p), argv) > 0;
  }

  std::size_t procs(const PodDef& p) const {
    std::istringstream in(sb_.read(rel(p), "cgroup.procs"));
    std::size_t n = 0;
    long x;
    while (in >> x) ++n;
    return n;
  }

  /// The pod cgroup's charged memory, in MiB.
  uint64_t usage_mib(const PodDef& p) const {
    const std::string v = sb_.read(rel(p), v2() ? "memory.current" : "memory.usage_in_bytes");
    return v.empty() ? 0 : std::stoull(v) >> 20;
  }
  bool wait_usage(const PodDef& p, uint64_t mib, std::chrono::milliseconds limit) const {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (usage_mib(p) >= mib) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  // Kernel OOM kills below kubepods. v2's memory.events of kubepods counts its
  // whole tree; v1 counts a kill only in the victim task's own memcg (a pod's
  // cgroup, even when the kubepods limit was hit), so v1 sums the tree.
  uint64_t oom_kills() const {
    auto count = [](const std::string& text) -> uint64_t {
      std::istringstream in(text);
      std::string k;
      uint64_t v;
      while (in >> k >> v) {
        if (k == "oom_kill") return v;
      }
      return 0;
    };
    if (v2()) return count(sb_.read("kubepods", "memory.events"));
    uint64_t total = count(sb_.read("kubepods", "memory.oom_control"));
    std::error_code ec;
    for (std::filesystem::recursive_directory_iterator it(sb_.path("kubepods"), ec), end; !ec && it != end;
         it.increment(ec)) {
      if (!it->is_directory(ec)) continue;
      std::ifstream f(it->path() / "memory.oom_control");
      std::stringstream text;
      text << f.rdbuf();
      total += count(text.str());
    }
    return total;
  }

  void write_config(const std::string& yaml) {
    std::ofstream(dir_ + "/config.yaml.tmp") << yaml;
    fs::rename(dir_ + "/config.yaml.tmp", dir_ + "/config.yaml");
  }

  void write_pods() {
    std::string list = R"({"apiVersion":"v1","kind":"PodList","items":[)";
    bool first = true;
    for (const auto& p : pods_) {
      list += std::string(first ? "" : ",") + R"({"metadata":{"name":")" + p.name + R"(","namespace":"t","uid":")" +
              p.uid + R"("},"spec":{)" + p.spec_extra + R"("terminationGracePeriodSeconds":)" + std::to_string(p.grace) +
              R"(,"containers":[{"name":"c","resources":)" +
              (p.qos == "BestEffort" ? std::string("{}")
                                     : std::string(R"({"requests":{"memory":"32Mi"})") +
                                           (p.qos == "Guaranteed" ? R"(,"limits":{"memory":"32Mi"}})" : "}")) +
              R"(}]},"status":{"phase":"Running","qosClass":")" + p.qos + R"("}})";
      first = false;
    }
    list += "]}";
    std::ofstream(dir_ + "/pods.json") << list;
  }

  /// A pod whose processes the test starts itself (spawn), e.g. in a container cgroup below it.
  bool add(const PodDef& p) {
    pods_.push_back(p);
    return sb_.make(rel(p));
  }
  testing::SandboxCgroup& sandbox() { return sb_; }

  /// The daemon's /metrics on a free port of 127.0.0.1 (chosen at the first call).
  uint16_t metrics_port() {
    if (metrics_port_ == 0) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof a;
      if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
        metrics_port_ = ntohs(a.sin_port);
      }
      ::close(fd);
    }
    return metrics_port_;
  }
  /// The /metrics text; empty when it cannot be read (the daemon paused: 3 s timeout).
  std::string scrape() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{3, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(metrics_port());
    std::string out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
      if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
        char buf[65536];
        for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
      }
    }
    ::close(fd);
    return out;
  }
  /// A series summed over the samples whose labels contain `labels` (e.g. qos_class="BestEffort");
  /// nullopt when /metrics could not be read or has no such sample.
  std::optional<double> metric(const std::string& name, const std::string& labels = "") {
    const std::string text = scrape();
    std::istringstream in(text);
    std::optional<double> sum;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(name, 0) != 0 || (line.size() > name.size() && line[name.size()] != '{' && line[name.size()] != ' ')) {
        continue;
      }
      if (!labels.empty() && line.find(labels) == std::string::npos) continue;
      sum = sum.value_or(0) + std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }

  /// The test's own directory (removed with the node): a sandbox nodefs and log root go below it.
  const std::string& dir() const { return dir_; }
  std::string config_path() const { return dir_ + "/config.yaml"; }
  std::string state_path() const { return dir_ + "/state.json"; }
  std::string log() const { return slurp(dir_ + "/daemon.log"); }

  /// `env`: variables added to the test's own environment for the daemon.
  bool start_daemon(std::vector<std::string> extra = {}, const std::vector<std::string>& env = {}) {
    write_pods();
    std::vector<std::string> argv{kBinary,          "run",
                                  "--config",       config_path(),
                                  "--cgroup-root",  "/" + fs::path(sb_.path()).filename().string(),
                                  "--cgroup-driver", "cgroupfs",
                                  "--pod-file",     dir_ + "/pods.json",
                                  "--metrics-listen", metrics_listen(),
                                  "--state-file",   state_path(),
                                  "--safety-net-interval", "100ms"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::size_t before = count(log(), "pressured running");
    std::optional<std::vector<std::string>> environment;
    if (!env.empty()) {
      environment.emplace();
      for (char** e = environ; *e != nullptr; ++e) environment->push_back(*e);
      environment->insert(environment->end(), env.begin(), env.end());
    }
    daemon_ = testing::spawn_logged(std::move(argv), dir_ + "/daemon.log", std::move(environment));
    // Start-up loads and verifies every BPF program; on a loaded 2-core CI
    // machine under ASan that took over 10 s once. A bound, not a speed check.
    return wait_log("pressured running", 60s, before + 1);
  }

  bool wait_log(const std::string& needle, std::chrono::milliseconds limit, std::size_t times = 1) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (count(log(), needle) >= times) return true;
      if (daemon_ > 0 && ::waitpid(daemon_, &status_, WNOHANG) == daemon_) {
        daemon_ = -1;
        return count(log(), needle) >= times;
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  bool running() {
    if (daemon_ <= 0) return false;
    if (::waitpid(daemon_, &status_, WNOHANG) == daemon_) {
      daemon_ = -1;
      return false;
    }
    return true;
  }
  void signal(int sig) {
    if (daemon_ > 0) ::kill(daemon_, sig);
  }
  /// SIGTERM, then the exit status (SIGKILL after 5 s); -1 if it could not be reaped.
  int stop_daemon() {
    if (daemon_ <= 0) return status_;
    status_ = testing::stop_child(daemon_, 5s);
    daemon_ = -1;
    return status_;
  }

  bool wait_gone(const PodDef& p, std::chrono::milliseconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (procs(p) == 0) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

 private:
  std::string mount_;
  testing::SandboxCgroup sb_;
  std::string tag_, dir_;
  std::vector<PodDef> pods_;
  uint16_t metrics_port_ = 0;
  std::string metrics_listen() const {
    std::string a = "127.0.0.1:";
    a += std::to_string(metrics_port_);
    return a;
  }
  pid_t daemon_ = -1;
  int status_ = 0;
};

// The memory a pod's workload holds once started (its --start-mib).
uint64_t mib_of(const PodDef& p) {
  for (std::size_t i = 0; i + 1 < p.workload.size(); ++i) {
    if (p.workload[i] == "--start-mib") return std::stoull(p.workload[i + 1]);
  }
  return 0;
}

// Starts the pods, then waits (30 s at most each) until each holds its start-up memory.
::testing::AssertionResult start_charged(HostNode& n, std::initializer_list<PodDef> pods) {
  for (const auto& p : pods) {
    if (!n.start(p)) return ::testing::AssertionFailure() << p.name << " did not start";
  }
  for (const auto& p : pods) {
    if (!n.wait_usage(p, mib_of(p), 30s)) return ::testing::AssertionFailure() << p.name << ": " << n.usage_mib(p) << " MiB";
  }
  return ::testing::AssertionSuccess();
}

std::vector<std::string> steady(int mib, int seconds = 40) {
  return {"--start-mib", std::to_string(mib), "--duration-s", std::to_string(seconds)};
}

#define REQUIRE_HOST(node)                                                   \
  PRESSURED_REQUIRE_ROOT();                                                  \
  PRESSURED_REQUIRE(fs::exists("/usr/bin/python3"), "/usr/bin/python3 (the pods' workload)"); \
  PRESSURED_REQUIRE(fs::exists(kBinary), "the pressured binary " + kBinary); \
  PRESSURED_REQUIRE((node).ok(), "a memory cgroup sandbox: " + (node).error()); \
  ASSERT_TRUE((node).setup(256))

TEST(DaemonHost, EvictsTheRightPodBeforeAKernelOomKillAndOnlyOne) {
  HostNode n("daemon-evict");
  REQUIRE_HOST(n);
  PodDef web{"11111111-0000-4000-8000-000000000001", "web", "Burstable", steady(40)};
  PodDef batch{"11111111-0000-4000-8000-000000000002", "batch", "BestEffort", steady(20)};
  PodDef leaky{"11111111-0000-4000-8000-000000000003", "leaky", "BestEffort",
               {"--start-mib", "10", "--step-mib", "8", "--interval-ms", "100", "--max-mib", "400", "--duration-s", "40"}};
  for (const auto& p : {web, batch, leaky}) ASSERT_TRUE(n.start(p));
  n.write_config("evictionHard:\n  allocatableMemory.available: 64Mi\nevictionPressureTransitionPeriod: 2s\n");
  ASSERT_TRUE(n.start_daemon()) << n.log();
  ASSERT_TRUE(n.wait_gone(leaky, 30s)) << n.log();
  EXPECT_EQ(n.oom_kills(), 0u) << "evicted before the kernel OOM killer fired";
  std::this_thread::sleep_for(2s);  // the first eviction freed enough: no second one
  EXPECT_GT(n.procs(web), 0u);
  EXPECT_GT(n.procs(batch), 0u);
  std::string log = n.log();
  EXPECT_EQ(count(log, "qos=BestEffort signal=allocatableMemory.available"), 1u) << log;
  EXPECT_NE(log.find(leaky.uid), std::string::npos);
  EXPECT_NE(log.find("done (memory released)"), std::string::npos) << log;
  EXPECT_EQ(n.stop_daemon(), 0);
  EXPECT_NE(n.log().find("pressured stopped"), std::string::npos);
}

TEST(DaemonHost, DryRunKillsNothing) {
  HostNode n("daemon-dry");
  REQUIRE_HOST(n);
  PodDef be{"22222222-0000-4000-8000-000000000001", "be", "BestEffort", steady(120)};
  PodDef bu{"22222222-0000-4000-8000-000000000002", "bu", "Burstable", steady(40)};
  ASSERT_TRUE(start_charged(n, {be, bu}));
  n.write_config("evictionHard:\n  allocatableMemory.available: 128Mi\ndaemon:\n  releaseWaitTimeout: 500ms\n");
  ASSERT_TRUE(n.start_daemon({"--dry-run"})) << n.log();
  ASSERT_TRUE(n.wait_log("[dry-run] eviction", 10s, 2)) << n.log();
  EXPECT_GT(n.procs(be), 0u);
  EXPECT_GT(n.procs(bu), 0u);
}

// Under a service manager (deploy/pressured.service: Type=notify,
// WatchdogSec): READY=1 once running, WATCHDOG=1 while the loop turns (at a
// quarter of the interval), STOPPING=1 on the way out, each one datagram to
// $NOTIFY_SOCKET.
TEST(DaemonHost, TellsTheServiceManagerItIsReadyAliveAndStopping) {
  HostNode n("daemon-notify");
  REQUIRE_HOST(n);
  n.write_config("evictionHard:\n  allocatableMemory.available: 1Mi\n");
  const std::string socket_path = n.dir() + "/notify";
  const int manager = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(manager, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof sa.sun_path);
  std::memcpy(sa.sun_path, socket_path.c_str(), socket_path.size() + 1);
  ASSERT_EQ(::bind(manager, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
  // Everything received within `limit`, up to the first datagram holding `needle`.
  std::vector<std::string> got;
  auto receive_until = [&](const std::string& needle, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      char buf[512];
      const ssize_t r = ::recv(manager, buf, sizeof buf, MSG_DONTWAIT);
      if (r > 0) {
        got.emplace_back(buf, static_cast<std::size_t>(r));
        if (got.back().find(needle) != std::string::npos) return true;
        continue;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  };
  ASSERT_TRUE(n.start_daemon({"--dry-run"}, {"NOTIFY_SOCKET=" + socket_path, "WATCHDOG_USEC=2000000"})) << n.log();
  ASSERT_TRUE(receive_until("READY=1", 5s)) << n.log();
  EXPECT_NE(got.back().find("STATUS=running: 1 thresholds"), std::string::npos) << got.back();
  ASSERT_TRUE(receive_until("WATCHDOG=1", 5s)) << "no watchdog ping within 5 s of a 2 s WatchdogSec";
  EXPECT_EQ(got.back(), "WATCHDOG=1");
  EXPECT_EQ(n.stop_daemon(), 0);
  EXPECT_TRUE(receive_until("STOPPING=1", 2s));
  ::close(manager);
}

TEST(DaemonHost, SighupReloadsAndRejectsAnInvalidConfig) {
  HostNode n("daemon-hup");
  REQUIRE_HOST(n);
  PodDef be{"33333333-0000-4000-8000-000000000001", "be", "BestEffort", steady(100)};
  PodDef bu{"33333333-0000-4000-8000-000000000002", "bu", "Burstable", steady(40)};
  ASSERT_TRUE(start_charged(n, {be, bu}));
  n.write_config("evictionHard:\n  allocatableMemory.available: 16Mi\n");
  ASSERT_TRUE(n.start_daemon()) << n.log();
  n.write_config("evictionHard:\n  allocatableMemory.available: banana\n...\n");
  n.signal(SIGHUP);
  ASSERT_TRUE(n.wait_log("config reload rejected", 5s)) << n.log();
  std::this_thread::sleep_for(300ms);  // a window for a wrong reload to act in: nothing must happen
  EXPECT_TRUE(n.running());
  EXPECT_GT(n.procs(be), 0u);
  // Valid but without the end marker: possibly cut mid-write, so refused.
  n.write_config("evictionHard:\n  allocatableMemory.available: 160Mi\n");
  n.signal(SIGHUP);
  ASSERT_TRUE(n.wait_log("may be truncated", 5s)) << n.log();
  std::this_thread::sleep_for(300ms);  // a window for a wrong reload to act in: nothing must happen
  EXPECT_GT(n.procs(be), 0u);
  n.write_config("evictionHard:\n  allocatableMemory.available: 160Mi\n...\n");
  n.signal(SIGHUP);
  ASSERT_TRUE(n.wait_log("config reloaded", 5s)) << n.log();
  EXPECT_TRUE(n.wait_gone(be, 5s)) << n.log();
  EXPECT_GT(n.procs(bu), 0u);
}

TEST(DaemonHost, SoftThresholdWaitsForGraceThenKillsAProcessIgnoringSigterm) {
  HostNode n("daemon-soft");
  REQUIRE_HOST(n);
  PodDef be{"44444444-0000-4000-8000-000000000001", "stubborn", "BestEffort",
            {"--start-mib", "100", "--duration-s", "40", "--ignore-sigterm", "--fork-child"}, 30};
  ASSERT_TRUE(start_charged(n, {be}));
  n.write_config(
      "evictionSoft:\n  allocatableMemory.available: 200Mi\nevictionSoftGracePeriod:\n  allocatableMemory.available: 2s\n"
      "evictionMaxPodGracePeriod: 1\n");
  ASSERT_TRUE(n.start_daemon()) << n.log();
  ASSERT_TRUE(n.wait_gone(be, 60s)) << n.log();
  // The threshold's own grace is timed in DaemonLogic on synthetic time; here
  // the real process: a soft eviction with the pod's (capped) grace, SIGTERM
  // ignored, then killed once that grace is over.
  const std::string log = n.log();
  const auto evicted = log.find("(soft) grace=1s");
  ASSERT_NE(evicted, std::string::npos) << log;
  EXPECT_NE(log.find("grace period over, killing", evicted), std::string::npos) << log;
}

// kubernetes#123872 on a sandbox node with 1 GiB for pods: a soft-evicted
// BestEffort pod ignoring SIGTERM (grace 120 s) must not hold back the hard
// threshold when a Burstable pod spikes by 420 MiB at ~400 MiB/s.
TEST(DaemonHost, HardThresholdKillsASoftVictimInsteadOfWaitingForItsGrace) {
  HostNode n("daemon-escalate");
  PRESSURED_REQUIRE_ROOT();
  PRESSURED_REQUIRE(fs::exists("/usr/bin/python3"), "/usr/bin/python3 (the pods' workload)");
  PRESSURED_REQUIRE(fs::exists(kBinary), "the pressured binary " + kBinary);
  PRESSURED_REQUIRE(n.ok(), "a memory cgroup sandbox: " + n.error());
  ASSERT_TRUE(n.setup(1024));
  PodDef be{"55555555-0000-4000-8000-000000000001", "batch", "BestEffort",
            {"--start-mib", "680", "--max-mib", "680", "--duration-s", "60", "--ignore-sigterm"}, 120};
  PodDef bu{"55555555-0000-4000-8000-000000000002", "web", "Burstable",
            {"--start-mib", "16", "--step-mib", "40", "--interval-ms", "100", "--max-mib", "436", "--duration-s", "30"}};
  ASSERT_TRUE(n.start(be));
  ASSERT_TRUE(n.wait_usage(be, 680, 60s)) << n.usage_mib(be) << " MiB";
  n.write_config(
      "evictionSoft:\n  allocatableMemory.available: 400Mi\nevictionSoftGracePeriod:\n  allocatableMemory.available: 1s\n"
      "evictionHard:\n  allocatableMemory.available: 150Mi\nevictionMaxPodGracePeriod: 0\n"
      "evictionPressureTransitionPeriod: 2s\n");
  ASSERT_TRUE(n.start_daemon()) << n.log();
  ASSERT_TRUE(n.wait_log("(soft) grace=120s", 30s)) << n.usage_mib(be) << " MiB\n" << n.log();
  EXPECT_GT(n.procs(be), 0u) << "it ignores SIGTERM";
  auto spike = std::chrono::steady_clock::now();
  ASSERT_TRUE(n.start(bu));
  // Well inside the victim's 120 s grace: only the escalation kills it this early.
  ASSERT_TRUE(n.wait_gone(be, 60s)) << n.log();
  ::testing::Test::RecordProperty(
      "spike_start_to_victim_gone_ms",
      static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - spike).count()));
  EXPECT_TRUE(n.wait_usage(bu, 436, 60s)) << "the spike completes: " << n.usage_mib(bu) << " MiB\n" << n.log();
  EXPECT_EQ(n.oom_kills(), 0u) << n.log();
  EXPECT_GT(n.procs(bu), 0u) << "the spiking pod fits once the soft victim is gone\n" << n.log();
  const std::string log = n.log();
  EXPECT_EQ(count(log, "killing it now"), 1u) << log;
  EXPECT_EQ(count(log, "kernel OOM kill"), 0u) << log;
  EXPECT_EQ(count(log, "signal=allocatableMemory.available"), 1u) << "one eviction, escalated\n" << log;
}

TEST(DaemonHost, RestartRestoresSoftThresholdTiming) {
  HostNode n("daemon-restart");
  REQUIRE_HOST(n);
  PodDef be{"55555555-0000-4000-8000-000000000001", "be", "BestEffort", steady(100, 60)};
  ASSERT_TRUE(start_charged(n, {be}));
  n.write_config(
      "evictionSoft:\n  allocatableMemory.available: 200Mi\nevictionSoftGracePeriod:\n  allocatableMemory.available: 12s\n"
      "evictionMaxPodGracePeriod: 0\n");
  ASSERT_TRUE(n.start_daemon()) << n.log();
  // Stop once the soft threshold's first observation is checkpointed; how
  // much of the grace is left after the restart is DaemonLogic's to check on
  // synthetic time.
  bool checkpointed = false;
  for (auto end = std::chrono::steady_clock::now() + 30s; !checkpointed && std::chrono::steady_clock::now() < end;) {
    checkpointed = slurp(n.state_path()).find("threshold_first_observed_ns") != std::string::npos;
    if (!checkpointed) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(checkpointed) << slurp(n.state_path()) << n.log();
  EXPECT_EQ(n.stop_daemon(), 0);
  EXPECT_GT(n.procs(be), 0u) << "within its 12 s grace";
  ASSERT_TRUE(n.start_daemon()) << n.log();
  EXPECT_NE(n.log().find("restored (1 soft thresholds timing"), std::string::npos) << n.log();
  ASSERT_TRUE(n.wait_gone(be, 60s)) << n.log();
  EXPECT_NE(n.log().find("(soft) grace="), std::string::npos) << n.log();
}

TEST(DaemonHost, CorruptCheckpointIsReportedAndIgnored) {
  HostNode n("daemon-corrupt");
  REQUIRE_HOST(n);
  n.write_config("evictionHard:\n  allocatableMemory.available: 16Mi\n");
  std::ofstream(n.state_path()) << "{\"version\": 1, \"boot";
  ASSERT_TRUE(n.start_daemon()) << n.log();
  EXPECT_NE(n.log().find("checkpoint ignored (corrupt)"), std::string::npos) << n.log();
  EXPECT_TRUE(n.running());
}

// Writes `mib` MiB of real (non-sparse) data to `path`, creating its parents.
bool write_file_mib(const std::string& path, std::size_t mib) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  const std::string chunk(1 << 20, 'x');
  for (std::size_t i = 0; i < mib; ++i) out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  out.close();
  return out.good();
}

// The kubelet's emptyDir sizeLimit on a real directory, without any node
// pressure: the pod that wrote 8 MiB into its 4 MiB emptyDir is evicted at
// once (grace 0) with the reason emptydirfs.limit; the pod with 2 MiB in its
// 16 MiB emptyDir stays. The sandbox nodefs (pods/<uid>/volumes/...) and log
// root are below the node's temporary directory, removed also on failure.
TEST(DaemonHost, EvictsAPodOverItsEmptyDirSizeLimitAndOnlyIt) {
  HostNode n("daemon-emptydir");
  REQUIRE_HOST(n);
  PodDef spill{"66666666-0000-4000-8000-000000000001", "spill", "Burstable", steady(8)};
  spill.spec_extra = R"("volumes":[{"name":"cache","emptyDir":{"sizeLimit":"4Mi"}}],)";
  PodDef tidy{"66666666-0000-4000-8000-000000000002", "tidy", "Burstable", steady(8)};
  tidy.spec_extra = R"("volumes":[{"name":"cache","emptyDir":{"sizeLimit":"16Mi"}}],)";
  const std::string nodefs = n.dir() + "/nodefs";
  auto volume = [&](const PodDef& p) { return nodefs + "/pods/" + p.uid + "/volumes/kubernetes.io~empty-dir/cache"; };
  ASSERT_TRUE(write_file_mib(volume(spill) + "/data", 8));
  ASSERT_TRUE(write_file_mib(volume(tidy) + "/data", 2));
  fs::create_directories(n.dir() + "/logs");
  ASSERT_TRUE(n.start(spill));
  ASSERT_TRUE(n.start(tidy));
  n.write_config("evictionHard:\n  allocatableMemory.available: 16Mi\ncgroup:\n  nodefsPath: " + nodefs +
                 "\n  imagefsPath: " + n.dir() + "/imagefs\n  podLogsPath: " + n.dir() +
                 "/logs\n  diskWalkInterval: 200ms\n");
  ASSERT_TRUE(n.start_daemon()) << n.log();
  ASSERT_TRUE(n.wait_gone(spill, 30s)) << n.log();
  std::this_thread::sleep_for(2s);  // walks and decisions go on: the pod within its limit stays
  EXPECT_GT(n.procs(tidy), 0u) << n.log();
  EXPECT_EQ(n.oom_kills(), 0u);
  const std::string log = n.log();
  EXPECT_EQ(count(log, "signal=emptydirfs.limit"), 1u) << "one eviction, never twice\n" << log;
  EXPECT_EQ(count(log, "signal="), 1u) << "nothing else evicted\n" << log;
  EXPECT_NE(log.find("t/spill (" + spill.uid + ") qos=Burstable signal=emptydirfs.limit"), std::string::npos) << log;
  EXPECT_NE(log.find("grace=0s"), std::string::npos) << log;
  EXPECT_NE(log.find(R"(Usage of EmptyDir volume "cache" exceeds the limit "4Mi".)"), std::string::npos) << log;
  EXPECT_EQ(log.find("t/tidy (" + tidy.uid + ") qos"), std::string::npos) << log;
  EXPECT_EQ(n.stop_daemon(), 0);
}

// The daemon paused (SIGSTOP: a stalled node, a debugger) while the kernel
// OOM-kills a process in a pod's container and page-cache reclaim in another
// memcg of the sandbox floods the BPF ring buffer: the kill's event is lost
// with the overflow. After SIGCONT the kill is still counted, once, under the
// pod's QoS class: the resync reads the kernel's counters (v1: the
// container's own memory.oom_control). A second kill while the daemon runs
// is seen by its event and by the counters, and counted once too.
TEST(DaemonHost, AKernelOomKillWhileTheDaemonIsPausedIsCountedOnce) {
  HostNode n("daemon-oompause");
  REQUIRE_HOST(n);
  PodDef victim{"77777777-0000-4000-8000-000000000001", "victim", "BestEffort", {}};
  ASSERT_TRUE(n.add(victim));
  const std::string pod = n.rel(victim), ctr = pod + "/c1";
  auto& sb = n.sandbox();
  ASSERT_TRUE(sb.make(ctr));
  ASSERT_TRUE(sb.set_memory_max(pod, 48 << 20));
  ASSERT_TRUE(sb.make("flood"));  // beside kubepods, inside the sandbox
  ASSERT_TRUE(sb.set_memory_max("flood", 16 << 20));
  const std::string data = n.dir() + "/flood.data";
  ASSERT_TRUE(write_file_mib(data, 64));
  // A 4 KiB ring overflows in the first moments of the flood; full
  // observations every 300 ms let the test see the counters read again.
  n.write_config("evictionHard:\n  allocatableMemory.available: 1Mi\nevents:\n  ringBufferBytes: 4Ki\n"
                 "  fullObservationInterval: 300ms\n...\n");
  n.metrics_port();
  ASSERT_TRUE(n.start_daemon()) << n.log();
  const std::string kills = "pressured_kernel_oom_kills_total", full = "pressured_evaluations_total";
  ASSERT_EQ(n.metric(kills, "qos_class=\"BestEffort\""), 0.0) << n.log();
  // Full observations after `from`, so both sources had their chance.
  auto wait_full = [&](double from, double more) {
    for (auto end = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < end;) {
      if (n.metric(full, "observation=\"full\"").value_or(0) >= from + more) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  };
  auto hog = [&] {  // 200 MiB in a container of a pod limited to 48 MiB: the kernel kills it
    pid_t pid = sb.spawn(ctr, {"/usr/bin/python3", "-c", "import time\nb = [bytearray(1 << 20) for _ in range(200)]\n"
                                                         "time.sleep(5)\n"});
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  };

  n.signal(SIGSTOP);
  {
    // Out of the page cache (written back first: dirty pages stay), so that
    // the flood reads it into its own memcg and reclaims there.
    int fd = ::open(data.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fdatasync(fd), 0);
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    ::close(fd);
  }
  std::string loop = "end=$(($(date +%s) + 3)); while [ $(date +%s) -lt $end ]; do cat ";
  loop += data;
  loop += " > /dev/null; done";
  pid_t flood = sb.spawn("flood", {"/bin/sh", "-c", loop});
  ASSERT_GT(flood, 0);
  std::this_thread::sleep_for(1s);  // the ring fills before the kill
  const bool killed = hog();
  int status = 0;
  ::waitpid(flood, &status, 0);
  n.signal(SIGCONT);
  ASSERT_TRUE(killed) << "the hog was not OOM-killed";
  ASSERT_EQ(sb.read_key(ctr, "memory.oom_control", "oom_kill"), 1) << "the kernel counts it in the container's memcg";
  ASSERT_TRUE(wait_full(0, 1)) << n.log();
  const double after_resume = n.metric(full, "observation=\"full\"").value_or(0);
  ASSERT_TRUE(wait_full(after_resume, 3)) << n.log();
  ASSERT_GT(n.metric("pressured_ring_buffer_dropped_events_total").value_or(0), 0.0)
      << "the ring did not overflow: nothing here tests a lost event";
  // Only this class: the BPF hook sees the whole host's OOM kills, other
  // tests' included (qos_class="none", not in one of this node's pods).
  const std::string be = "qos_class=\"BestEffort\"";
  EXPECT_EQ(n.metric(kills, be), 1.0) << "labelled by the pod the container is in\n" << n.scrape() << n.log();
  // The pod's limit was reached (v1: its memory.failcnt moved under a set limit): the workload's own kill.
  const std::string be_limit = "qos_class=\"BestEffort\",scope=\"cgroup\"";
  EXPECT_EQ(n.metric(kills, be_limit), 1.0) << n.scrape() << n.log();

  ASSERT_TRUE(hog()) << "the second hog was not OOM-killed";
  ASSERT_EQ(sb.read_key(ctr, "memory.oom_control", "oom_kill"), 2);
  const double after_second = n.metric(full, "observation=\"full\"").value_or(0);
  ASSERT_TRUE(wait_full(after_second, 3)) << n.log();
  EXPECT_EQ(n.metric(kills, be), 2.0) << n.scrape() << n.log();
  EXPECT_EQ(n.metric(kills, be_limit), 2.0) << "its event counted with the next full observation\n" << n.scrape();
  EXPECT_EQ(n.stop_daemon(), 0);
}

TEST(DaemonCli, InvalidConfigAtStartupIsAClearErrorNotACrash) {
  PRESSURED_REQUIRE(fs::exists(kBinary), "the pressured binary " + kBinary);
  char tmpl[] = "/tmp/pressured-badcfg-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::ofstream(dir + "/bad.yaml") << "evictionHard:\n  memory.available: lots\n";
  std::string cmd = kBinary + " run --config " + dir + "/bad.yaml 2>" + dir + "/err";
  int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  EXPECT_NE(slurp(dir + "/err").find("invalid configuration"), std::string::npos) << slurp(dir + "/err");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pressured
