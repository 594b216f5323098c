// What a plugin costs per decision (docs/plugins.md, "Footprint"; the table
// bench/plugins_footprint.py prints).
//
//   BM_PluginMerge/<pods>        on the daemon's loop thread, per decision
//                                with plugins: apply_answers() of one
//                                plugin's answers (8 protections) to the
//                                engine's decision under a hard memory
//                                threshold, then lane_questions() for the
//                                next round (the ranking's 32 first pods,
//                                with their labels). Without plugins neither
//                                runs.
//   BM_PluginRoundTrip/<example> on the plugin host's thread, per decision
//                                and plugin: one RankCandidates call of 32
//                                candidates with 5 labels each over the
//                                Unix socket through the gRPC transport
//                                module (dlopen'd as pressured does), to the
//                                C++ example (0) or the Python one (1),
//                                which protects by label selector.
//
//   bench_plugins --build-dir build/release [benchmark flags]
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_helpers.hpp"
#include "plugins/host.hpp"
#include "plugins/merge.hpp"

namespace pressured {
namespace {

using namespace pressured::testing;
using namespace std::chrono_literals;

std::string g_build_dir = "build/release";
std::string g_source_dir = PRESSURED_SOURCE_DIR;

std::shared_ptr<const PodLabels> typical_labels(int i) {
  // What a Deployment's pod carries: app, the recommended app.kubernetes.io
  // labels and the ReplicaSet's pod-template-hash.
  return std::make_shared<const PodLabels>(PodLabels{{
      {"app", fmt::format("svc-{}", i % 40)},
      {"app.kubernetes.io/instance", fmt::format("release-{}", i % 40)},
      {"app.kubernetes.io/name", fmt::format("svc-{}", i % 40)},
      {"pod-template-hash", fmt::format("7d9f8c6b5{}", i % 10)},
      {"tier", i % 5 == 0 ? "db" : "web"},
  }});
}

NodeSnapshot node(int pods) {
  Snap s;
  s.mem(50 * kMi, 64 * kGi);
  for (int i = 0; i < pods; ++i) {
    Pod p = pod(fmt::format("uid-{}", i), static_cast<QosClass>(i % 3), (100 + i % 97) * kMi, 64 * kMi);
    p.labels = typical_labels(i);
    s.add(std::move(p));
  }
  return s.s;
}

void BM_PluginMerge(benchmark::State& state) {
  const NodeSnapshot snap = node(static_cast<int>(state.range(0)));
  EvictionConfig cfg = config({hard(Signal::MemoryAvailable, qty(100 * kMi))});
  Engine engine(cfg);
  const Decisions decided = engine.evaluate(snap, at(100));
  const auto ranked = plugins::ranked_candidates(snap, Signal::MemoryAvailable, cfg, {});
  plugins::Answers a;
  a.plugin = "protect";
  for (std::size_t i = 0; i < 8 && i < ranked.size(); ++i) {
    a.adjustments[0].push_back(plugins::Adjustment{ranked[i]->uid, plugins::Action::Protect, "protected: labels tier=db"});
  }
  const std::vector<plugins::Answers> answers{a};
  plugins::MergeState st;
  for (auto _ : state) {
    Decisions d = decided;
    auto report = plugins::apply_answers(d, snap, cfg, {}, {}, answers, at(100), plugins::MergeOptions{}, st);
    auto qs = plugins::lane_questions(d, snap, cfg, {}, answers, 32);
    benchmark::DoNotOptimize(report);
    benchmark::DoNotOptimize(qs);
  }
}
BENCHMARK(BM_PluginMerge)->Arg(110)->Arg(1000)->Unit(benchmark::kMicrosecond);

pid_t spawn(const std::vector<std::string>& argv) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::perror(args[0]);
    ::_exit(127);
  }
  return pid;
}

void BM_PluginRoundTrip(benchmark::State& state) {
  char tmpl[] = "/tmp/pressured-plugin-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    state.SkipWithError("mkdtemp");
    return;
  }
  const std::string dir = tmpl, sock = dir + "/protect.sock";
  const std::string stubs = g_build_dir + "/generated/plugin_proto";
  ::setenv("PRESSURED_PLUGIN_STUBS", stubs.c_str(), 1);
  const bool python = state.range(0) == 1;
  const std::vector<std::string> argv =
      python ? std::vector<std::string>{"/usr/bin/python3", g_source_dir + "/userspace/plugins/examples/protect.py",
                                        "--socket", sock, "--protect-selector", "tier=db"}
             : std::vector<std::string>{g_build_dir + "/userspace/plugins/pressured-plugin-protect", "--socket", sock,
                                        "--protect-selector", "tier=db"};
  const pid_t child = spawn(argv);
  auto stop = [&] {
    ::kill(child, SIGTERM);
    ::waitpid(child, nullptr, 0);
    std::filesystem::remove_all(dir);
  };
  for (int i = 0; i < 300 && !std::filesystem::exists(sock); ++i) std::this_thread::sleep_for(50ms);
  auto connector = plugins::load_grpc_connector(g_build_dir + "/userspace/plugins/libpressured_plugin_grpc.so");
  if (!connector || !std::filesystem::exists(sock)) {
    state.SkipWithError(connector ? "the plugin made no socket" : connector.error().message.c_str());
    stop();
    return;
  }
  auto client = (*connector)->connect(sock, plugins::AnswerLimits{});
  plugins::LaneQuestion q;
  q.hard = true;
  q.signals_met = {"memory.available"};
  for (int i = 0; i < 32; ++i) {
    q.candidates.push_back(plugins::CandidatePod{fmt::format("uid-{}", i), fmt::format("pod-{}", i), "default",
                                                 QosClass::Burstable, 0, 100 << 20, 64 << 20, false,
                                                 typical_labels(i)});
  }
  (void)client->identify(5s);
  std::size_t protected_pods = 0;
  for (auto _ : state) {
    auto r = client->rank(q, 5s);
    if (auto* adj = std::get_if<std::vector<plugins::Adjustment>>(&r)) {
      protected_pods = adj->size();
    } else {
      state.SkipWithError(std::get<plugins::PluginClient::Failure>(r).message.c_str());
      break;
    }
  }
  state.counters["protected"] = static_cast<double>(protected_pods);  // tier=db: every fifth of 32
  client.reset();
  stop();
}
BENCHMARK(BM_PluginRoundTrip)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace pressured

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.starts_with("--build-dir=")) {
      pressured::g_build_dir = a.substr(12);
    } else {
      rest.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
