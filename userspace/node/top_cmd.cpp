// `pressured top [--once] [--json]`: the node's signals against their
// thresholds and the pods in eviction order, refreshed in place on a TTY.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "commands.hpp"
#include "common/log.hpp"
#include "config/load.hpp"
#include "node/top_view.hpp"
#include "pressured/engine.hpp"
#include "pressured/observer.hpp"

namespace pressured::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

}  // namespace

Command add_top(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("top", "Show node signals and pods in eviction order");
  auto options = add_config_flags(c.sub);
  struct TopFlags {
    bool once = false;
    bool json = false;
    double interval_s = 2.0;
    std::size_t max_pods = 0;
  };
  auto flags = std::make_shared<TopFlags>();
  c.sub->add_flag("--once", flags->once, "Print one frame and exit");
  c.sub->add_flag("--json", flags->json, "Print JSON (one object per frame, one frame per line)");
  c.sub->add_option("--interval", flags->interval_s, "Seconds between frames")->check(CLI::Range(0.1, 3600.0));
  c.sub->add_option("--max-pods", flags->max_pods, "Show at most this many pods (0: all)");
  c.run = [options, flags] {
    std::vector<std::string> warnings;
    auto cfg = load_config(*options, &warnings);
    if (!cfg) {
      std::fprintf(stderr, "pressured top: %s\n", cfg.error().message.c_str());
      return 2;
    }
    (void)setup_logging(flags->json ? "error" : cfg->log.level == "info" ? "warn" : cfg->log.level, "text");
    for (const auto& w : warnings) std::fprintf(stderr, "pressured top: warning: %s\n", w.c_str());

    auto md = make_pod_metadata_source(cfg->observe.pods);
    if (!md) {
      std::fprintf(stderr, "pressured top: %s\n", md.error().message.c_str());
      return 2;
    }
    std::shared_ptr<PodMetadataSource> metadata = std::move(*md);
    if (auto r = metadata->refresh(); !r) {
      std::fprintf(stderr, "pressured top: warning: pod metadata: %s\n", r.error().message.c_str());
    }
    std::shared_ptr<PodStorageSource> storage = make_pod_storage_source(cfg->observe);
    MonotonicClock clock;
    auto obs = make_node_observer(cfg->observe, metadata, storage);
    if (!obs) {
      std::fprintf(stderr, "pressured top: %s\n", obs.error().message.c_str());
      return 1;
    }
    NodeObserver& observer = **obs;
    if (flags->once) {
      storage->walk_now(clock.now());  // bounded by the walk budget
    } else {
      metadata->start(cfg->observe.pods.refresh_interval);
      storage->start(cfg->observe.disk_walk_interval, clock);
    }

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    const bool tty = ::isatty(STDOUT_FILENO) == 1 && !flags->json;
    int rc = 0;
    while (!g_stop) {
      auto snap = observer.observe(clock.now());
      if (!snap) {
        std::fprintf(stderr, "pressured top: %s\n", snap.error().message.c_str());
        rc = 1;
        break;
      }
      // The thresholds the daemon runs with: containerfs.* derived for the
      // layout the observer detected.
      EvictionConfig eviction = cfg->eviction;
      eviction.thresholds = with_containerfs_thresholds(std::move(eviction.thresholds), snap->containerfs_layout);
      node::TopInput in;
      in.snapshot = &*snap;
      in.layout = &observer.layout();
      in.eviction = &eviction;
      in.counters = observer.counters().values();
      in.metadata_source = metadata->describe();
      in.max_pods = flags->max_pods;
      in.storage = storage->stats();
      in.container_memory = [&observer](const Pod& p) { return observer.container_memory(p); };
      if (flags->json) {
        std::string s = node::render_top_json(in).dump();
        std::fprintf(stdout, "%s\n", s.c_str());
      } else {
        std::string s = node::render_top_text(in);
        if (tty) std::fputs("\033[H\033[2J", stdout);
        std::fputs(s.c_str(), stdout);
        if (!tty && !flags->once) std::fputs("\n", stdout);
      }
      std::fflush(stdout);
      if (flags->once) break;
      auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(flags->interval_s);
      while (!g_stop && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    metadata->stop();
    storage->stop();
    return rc;
  };
  return c;
}

}  // namespace pressured::cli
