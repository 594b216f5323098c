#include "daemon/workload.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
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

constexpr uint64_t kChunkMib = 2;

}  // namespace

GrowthReport grow_continuous(uint64_t total_mib, uint64_t threads, uint64_t rate_mib_per_s,
                             std::chrono::steady_clock::time_point deadline, const volatile std::sig_atomic_t& stop) {
  using clock = std::chrono::steady_clock;
  const uint64_t chunks = (total_mib + kChunkMib - 1) / kChunkMib;
  std::atomic<uint64_t> claimed{0}, touched{0};
  const auto t0 = clock::now();
  auto worker = [&] {
    while (!stop && clock::now() < deadline) {
      uint64_t next = claimed.load(std::memory_order_relaxed);
      if (next >= chunks) return;
      if (rate_mib_per_s > 0) {
        // Paced: chunk `next` may start once the clock allows it at the asked rate.
        double due_s = static_cast<double>(next * kChunkMib) / static_cast<double>(rate_mib_per_s);
        auto due = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(due_s));
        if (clock::now() < due) {
          std::this_thread::sleep_until(std::min({due, deadline, clock::now() + std::chrono::milliseconds(5)}));
          continue;
        }
      }
      if (!claimed.compare_exchange_weak(next, next + 1, std::memory_order_relaxed)) continue;
      if (touch_alloc(kChunkMib) == nullptr) return;  // out of address space: stop growing
      touched.fetch_add(kChunkMib, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> pool;
  for (uint64_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return GrowthReport{touched.load(), std::chrono::duration<double>(clock::now() - t0).count()};
}

ForkReport fork_children(uint64_t max_children, uint64_t forks_per_s, std::chrono::steady_clock::time_point deadline,
                         const volatile std::sig_atomic_t& stop) {
  using clock = std::chrono::steady_clock;
  ForkReport r;
  const auto t0 = clock::now();
  uint64_t attempts = 0;
  while (!stop && r.forked < max_children && clock::now() < deadline) {
    if (forks_per_s > 0) {
      auto due = t0 + std::chrono::duration_cast<clock::duration>(
                          std::chrono::duration<double>(static_cast<double>(attempts) / static_cast<double>(forks_per_s)));
      if (clock::now() < due) {
        std::this_thread::sleep_until(std::min(due, deadline));
        continue;
      }
    } else if (r.refused > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // flat out, refused: no busy loop
    }
    ++attempts;
    pid_t c = ::fork();
    if (c == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      while (clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ::_exit(0);
    }
    if (c > 0) {
      ++r.forked;
    } else {
      ++r.refused;
    }
  }
  r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return r;
}

int run_workload(const WorkloadOptions& in) {
  WorkloadOptions o = in;
  o.max_mib = std::min<uint64_t>(std::max(o.max_mib, o.start_mib), 4096);  // the cap covers the start
  o.start_mib = std::min(o.start_mib, o.max_mib);
  o.duration_s = std::clamp<uint64_t>(o.duration_s, 1, 600);
  o.interval_ms = std::clamp<uint64_t>(o.interval_ms, 10, 10000);
  o.threads = std::clamp<uint64_t>(o.threads, 1, 16);
  o.max_children = std::min<uint64_t>(o.max_children, 4096);
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
  if (o.max_children > 0) {
    ForkReport r = fork_children(o.max_children, o.forks_per_s, end, g_stop);
    std::printf("forked %llu children (%llu refused) in %.1f ms\n", static_cast<unsigned long long>(r.forked),
                static_cast<unsigned long long>(r.refused), r.seconds * 1e3);
    std::fflush(stdout);
  }
  if (o.flat_out || o.rate_mib_per_s > 0) {
    GrowthReport r = grow_continuous(o.max_mib - held, o.threads, o.flat_out ? 0 : o.rate_mib_per_s, end, g_stop);
    std::printf("grew %llu MiB in %.1f ms on %llu thread(s): %.0f MiB/s\n",
                static_cast<unsigned long long>(r.touched_mib), r.seconds * 1e3,
                static_cast<unsigned long long>(o.threads), r.mib_per_s());
    std::fflush(stdout);
    held += r.touched_mib;
  }
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
  sub->add_option("--threads", o->threads, "continuous growth: touching threads (1..16)");
  sub->add_option("--rate-mib-per-s", o->rate_mib_per_s, "continuous growth at this total rate");
  sub->add_flag("--flat-out", o->flat_out, "continuous growth as fast as the threads touch");
  sub->add_option("--max-children", o->max_children, "PIDs: fork this many sleeping children (<= 4096)");
  sub->add_option("--forks-per-s", o->forks_per_s, "PIDs: at this rate (0: as fast as fork allows)");
  sub->callback([o] { std::exit(run_workload(*o)); });
}

}  // namespace pressured
