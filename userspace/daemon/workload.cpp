#include "daemon/workload.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace pressured {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_term(int) { g_stop = 1; }

void* touch_alloc(uint64_t mib) {
  std::size_t bytes = static_cast<std::size_t>(mib) << 20;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* c = static_cast<volatile char*>(p);
  for (std::size_t off = 0; off < bytes; off += 4096) c[off] = static_cast<char>(off >> 12 | 1);
  return p;
}

}  // namespace

int run_workload(const WorkloadOptions& in) {
  WorkloadOptions o = in;
  o.max_mib = std::min<uint64_t>(std::max(o.max_mib, o.start_mib), 4096);  // the cap covers the start
  o.start_mib = std::min(o.start_mib, o.max_mib);
  o.duration_s = std::clamp<uint64_t>(o.duration_s, 1, 600);
  o.interval_ms = std::clamp<uint64_t>(o.interval_ms, 10, 10000);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the demo/test that started us
  if (o.ignore_sigterm) {
    ::signal(SIGTERM, SIG_IGN);
  } else {
    struct sigaction sa {};
    sa.sa_handler = on_term;
    ::sigaction(SIGTERM, &sa, nullptr);
  }
  if (o.fork_child) {
    pid_t c = ::fork();
    if (c == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (o.ignore_sigterm) ::signal(SIGTERM, SIG_IGN);
      auto end = std::chrono::steady_clock::now() + std::chrono::seconds(o.duration_s);
      while (std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ::_exit(0);
    }
  }
  uint64_t held = 0;
  if (o.start_mib > 0 && touch_alloc(o.start_mib) != nullptr) held = o.start_mib;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(o.duration_s);
  while (!g_stop && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
    if (o.step_mib > 0 && held < o.max_mib) {
      uint64_t step = std::min(o.step_mib, o.max_mib - held);
      if (touch_alloc(step) != nullptr) held += step;
    }
  }
  return 0;
}

void add_workload_subcommand(CLI::App& app) {
  auto o = std::make_shared<WorkloadOptions>();
  auto* sub = app.add_subcommand("__workload", "bounded memory workload (demo and tests)");
  sub->group("");  // hidden
  sub->add_option("--start-mib", o->start_mib);
  sub->add_option("--step-mib", o->step_mib);
  sub->add_option("--interval-ms", o->interval_ms);
  sub->add_option("--max-mib", o->max_mib);
  sub->add_option("--duration-s", o->duration_s);
  sub->add_flag("--ignore-sigterm", o->ignore_sigterm);
  sub->add_flag("--fork-child", o->fork_child);
  sub->callback([o] { std::exit(run_workload(*o)); });
}

}  // namespace pressured
