// `pressured demo`: a sandbox "node" inside this machine, a pod that leaks
// memory, and the daemon evicting it before the kernel's OOM killer fires.
// Everything happens below <memory mount>/pressured-demo-<pid>, which the
// demo creates and removes (also on Ctrl-C and on failure). See docs/daemon.md.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "commands.hpp"
#include "daemon/sandbox_node.hpp"
#include "daemon/workload.hpp"
#include "kernel/fd.hpp"

namespace pressured::cli {

namespace {

volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

struct DemoOptions {
  uint64_t limit_mib = 1024;
  uint64_t threshold_mib = 0;  // 0: a quarter of the limit
  uint64_t timeout_s = 60;
  uint64_t growth_mib_per_s = 120;
  bool keep_logs_quiet = false;
  std::string daemon_log_level = "info";
};

uint16_t free_port() {
  kernel::Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (s && ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  return port;
}

// Minimal HTTP GET on loopback, bounded (the demo prints the daemon's metrics).
std::string http_get(uint16_t port, const std::string& path) {
  kernel::Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) return {};
  timeval tv{2, 0};
  ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(s.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(s.get(), req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[8192];
      ssize_t n;
      while ((n = ::read(s.get(), buf, sizeof buf)) > 0 && out.size() < (4u << 20)) out.append(buf, static_cast<std::size_t>(n));
    }
  }
  s.reset();
  auto body = out.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : out.substr(body + 4);
}

std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%4.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return b;
}

std::string pod_json(const SandboxPod& p, uint64_t request_mib, uint64_t limit_mib) {
  std::string res = "{}";
  if (request_mib > 0 || limit_mib > 0) {
    res = "{";
    if (request_mib > 0) res += "\"requests\":{\"memory\":\"" + std::to_string(request_mib) + "Mi\"}";
    if (limit_mib > 0) {
      res += std::string(request_mib > 0 ? "," : "") + "\"limits\":{\"memory\":\"" + std::to_string(limit_mib) + "Mi\"}";
    }
    res += "}";
  }
  return "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" + p.name +
         "\",\"namespace\":\"demo\",\"uid\":\"" + p.uid + "\"},\"spec\":{\"terminationGracePeriodSeconds\":1," +
         "\"containers\":[{\"name\":\"app\",\"resources\":" + res + "}]},\"status\":{\"phase\":\"Running\",\"qosClass\":\"" +
         std::string(pressured::name(p.qos)) + "\"}}";
}

int run_demo(const DemoOptions& o) {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "pressured demo: needs root (it creates a sandbox cgroup with a memory limit)\n");
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  const uint64_t limit = o.limit_mib << 20;
  const uint64_t threshold_mib = o.threshold_mib ? o.threshold_mib : o.limit_mib / 4;
  const std::string sandbox_name = "pressured-demo-" + std::to_string(::getpid());
  auto node = SandboxNode::create(sandbox_name, limit);
  if (!node) {
    std::fprintf(stderr, "pressured demo: %s\n", node.error().message.c_str());
    return 1;
  }
  auto& sb = **node;
  std::printf("== sandbox node: %s/%s (cgroup %s), kubepods memory limit %s\n", sb.memory_mount().c_str(),
              sandbox_name.c_str(), sb.v2() ? "v2" : "v1", mib(limit).c_str());

  std::string self = "/proc/self/exe";
  char exe[4096] = {};
  if (ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1); n > 0) self = std::string(exe, n);
  const std::string dur = std::to_string(o.timeout_s + 10);
  auto steady = [&](uint64_t m) {
    return std::vector<std::string>{self, "__workload", "--start-mib", std::to_string(m), "--duration-s", dur};
  };
  // Steady pods use 30% of the limit in total; the leaky one grows past it.
  uint64_t unit = std::max<uint64_t>(o.limit_mib / 20, 8);
  struct Spec {
    const char* uid;
    const char* name;
    QosClass qos;
    uint64_t use, request, lim;
    bool leaky;
  };
  const Spec specs[] = {
      {"d0000000-0000-4000-8000-00000000a001", "database", QosClass::Guaranteed, unit * 2, unit * 3, unit * 3, false},
      {"d0000000-0000-4000-8000-00000000b001", "web-1", QosClass::Burstable, unit, unit, 0, false},
      {"d0000000-0000-4000-8000-00000000b002", "web-2", QosClass::Burstable, unit, unit, 0, false},
      {"d0000000-0000-4000-8000-00000000e001", "batch-report", QosClass::BestEffort, unit, 0, 0, false},
      {"d0000000-0000-4000-8000-00000000e002", "leaky-cache", QosClass::BestEffort, unit / 2, 0, 0, true},
  };
  std::vector<SandboxPod> pods;
  std::string pod_file = "/tmp/" + sandbox_name + "-pods.json";
  std::string list = "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":[";
  for (const auto& s : specs) {
    auto argv = steady(s.use);
    if (s.leaky) {
      uint64_t step = std::max<uint64_t>(o.growth_mib_per_s / 10, 1);
      argv = {self, "__workload", "--start-mib", std::to_string(s.use), "--step-mib", std::to_string(step),
              "--interval-ms", "100", "--max-mib", std::to_string(o.limit_mib + 256), "--duration-s", dur};
    }
    auto p = sb.start_pod(s.uid, s.name, s.qos, argv);
    if (!p) {
      std::fprintf(stderr, "pressured demo: %s\n", p.error().message.c_str());
      return 1;
    }
    list += std::string(pods.empty() ? "" : ",") + pod_json(*p, s.request, s.lim);
    std::printf("   pod demo/%-13s %-10s %s%s\n", s.name, std::string(pressured::name(s.qos)).c_str(),
                s.leaky ? "grows " : "steady ", s.leaky ? (std::to_string(o.growth_mib_per_s) + " MiB/s until evicted").c_str()
                                                        : mib(s.use << 20).c_str());
    pods.push_back(*p);
  }
  list += "]}";
  std::ofstream(pod_file) << list;

  uint16_t port = free_port();
  std::string state = "/tmp/" + sandbox_name + "-state.json";
  std::vector<std::string> dargv = {self, "run",
                                    "--cgroup-root", sb.cgroup_root(),
                                    "--kubepods-name", "kubepods",
                                    "--cgroup-driver", "cgroupfs",
                                    "--pod-file", pod_file,
                                    "--eviction-hard", "allocatableMemory.available<" + std::to_string(threshold_mib) + "Mi",
                                    "--eviction-pressure-transition-period", "5s",
                                    "--safety-net-interval", "100ms",
                                    "--metrics-listen", "127.0.0.1:" + std::to_string(port),
                                    "--state-file", state,
                                    "--log-level", o.daemon_log_level};
  std::printf("== daemon: allocatableMemory.available<%lluMi (hard), metrics at http://127.0.0.1:%u/metrics\n",
              static_cast<unsigned long long>(threshold_mib), port);
  std::fflush(stdout);
  pid_t daemon = ::fork();
  if (daemon == 0) {
    std::vector<char*> args;
    for (auto& a : dargv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }

  auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  int rc = 1;
  bool evicted = false, daemon_exited = false;
  double evicted_at = 0;
  const SandboxPod& leaky = pods.back();
  while (!g_interrupted && elapsed() < static_cast<double>(o.timeout_s)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    sb.reap();
    int st = 0;
    if (::waitpid(daemon, &st, WNOHANG) == daemon) {
      daemon_exited = true;
      if (!g_interrupted) std::fprintf(stderr, "pressured demo: the daemon exited early (status %d)\n", st);
      break;
    }
    uint64_t used = sb.usage("kubepods");
    uint64_t avail = used < limit ? limit - used : 0;
    std::string bar(static_cast<std::size_t>(40.0 * static_cast<double>(used) / static_cast<double>(limit)), '#');
    std::printf("t=%5.1fs kubepods [%-40s] used %s, available %s (threshold %llu MiB)  leaky-cache %s%s\n", elapsed(),
                bar.substr(0, 40).c_str(), mib(used).c_str(), mib(avail).c_str(),
                static_cast<unsigned long long>(threshold_mib), mib(sb.usage(leaky.rel)).c_str(),
                sb.processes(leaky) == 0 ? " (evicted)" : "");
    std::fflush(stdout);
    if (!evicted && sb.processes(leaky) == 0) {
      evicted = true;
      evicted_at = elapsed();
    }
    if (evicted && elapsed() - evicted_at > 3.0) break;
  }

  std::string metrics = daemon_exited ? "" : http_get(port, "/metrics");
  std::printf("\n== result\n");
  std::size_t survivors = 0;
  for (const auto& p : pods) {
    bool alive = sb.processes(p) > 0;
    if (alive) ++survivors;
    std::printf("   demo/%-13s %-10s %s\n", p.name.c_str(), std::string(pressured::name(p.qos)).c_str(),
                alive ? "running" : "EVICTED");
  }
  uint64_t ooms = sb.oom_kills();
  std::printf("   kernel OOM kills in the sandbox: %llu\n", static_cast<unsigned long long>(ooms));
  std::istringstream ms(metrics);
  std::string line;
  while (std::getline(ms, line)) {
    if (line.rfind("pressured_evictions_total", 0) == 0 || line.rfind("pressured_eviction_latency_seconds_count", 0) == 0 ||
        line.rfind("pressured_detection_latency_seconds_count", 0) == 0 ||
        line.rfind("pressured_detection_latency_seconds_sum", 0) == 0 ||
        line.rfind("pressured_eviction_latency_seconds_sum", 0) == 0 || line.rfind("pressured_kernel_oom_kills_total", 0) == 0) {
      std::printf("   %s\n", line.c_str());
    }
  }
  if (g_interrupted) {
    std::printf("   interrupted: cleaning up\n");
    rc = 130;
  } else if (evicted && ooms == 0 && survivors == pods.size() - 1) {
    std::printf("   OK: the leaky BestEffort pod was evicted before the kernel OOM killer fired; the others run on\n");
    rc = 0;
  } else {
    std::printf("   FAILED: expected only demo/leaky-cache evicted and no kernel OOM kill\n");
  }
  if (!daemon_exited) {
    ::kill(daemon, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(daemon, nullptr, WNOHANG) == daemon) {
        daemon_exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    if (!daemon_exited) {
      ::kill(daemon, SIGKILL);
      ::waitpid(daemon, nullptr, 0);
    }
  }
  sb.destroy();
  ::unlink(pod_file.c_str());
  ::unlink(state.c_str());
  std::printf("== sandbox removed\n");
  return rc;
}

}  // namespace

Command add_demo(CLI::App& app) {
  add_workload_subcommand(app);
  auto o = std::make_shared<DemoOptions>();
  Command c;
  c.sub = app.add_subcommand("demo", "Sandbox demo: a leaking pod evicted before the kernel OOM killer fires");
  c.sub->add_option("--limit-mib", o->limit_mib, "memory limit of the sandbox kubepods cgroup")->check(CLI::Range(128, 16384));
  c.sub->add_option("--threshold-mib", o->threshold_mib, "hard allocatableMemory.available threshold (default: limit/4)");
  c.sub->add_option("--growth-mib-per-s", o->growth_mib_per_s, "how fast the leaky pod grows")->check(CLI::Range(10, 1000));
  c.sub->add_option("--timeout-s", o->timeout_s, "stop after this long whatever happens")->check(CLI::Range(5, 600));
  c.sub->add_option("--daemon-log-level", o->daemon_log_level,
                    "the daemon's log level (debug shows each decision's detection latency)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  c.run = [o] { return run_demo(*o); };
  return c;
}

}  // namespace pressured::cli
