// `pressured run`: the daemon. Wires observation (docs/observation.md), the
// event reactor (docs/events.md), the engine (docs/engine.md), metrics
// (docs/operations.md), the evictor and the Kubernetes reporter together; see
// docs/daemon.md.
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "bpf/features.hpp"
#include "cgroup/layout.hpp"
#include "commands.hpp"
#include "common/log.hpp"
#include "config/load.hpp"
#include "config/psi_check.hpp"
#include "daemon/daemon.hpp"
#include "daemon/progress_timer.hpp"
#include "daemon/reactor_metrics.hpp"
#include "daemon/systemd_notify.hpp"
#include "events/reactor.hpp"
#include "evict/cgroup_evictor.hpp"
#include "k8s/reporter.hpp"
#include "node/containerfs_layout.hpp"
#include "pressured/metrics.hpp"
#include "relief/cgroup_reclaim.hpp"

namespace pressured::cli {

namespace {

// CPU time of the whole process so far (every thread, those that ended too),
// in ms: what starting cost, with the kernel's time in the BPF verifier.
double cpu_ms_so_far() {
  struct rusage ru {};
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// Taken from the kubelet's file, the thresholds say where they came from at
// start and at every reload: the log shows pressured and the kubelet agree.
void log_kubelet_thresholds(const Config& config) {
  if (config.kubelet.config_path.empty()) return;
  std::istringstream lines(describe_sources(config));
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("#   eviction", 0) == 0) spdlog::info("eviction setting {}", l.substr(4));
  }
}

int run_daemon(const ConfigOptions& options) {
  auto cfg = load_config(options);
  if (!cfg) {
    std::fprintf(stderr, "pressured run: invalid configuration: %s\n", cfg.error().message.c_str());
    return 2;
  }
  Config config = std::move(*cfg);
  if (auto l = setup_logging(config.log.level, config.log.format); !l) {
    std::fprintf(stderr, "pressured run: %s\n", l.error().message.c_str());
    return 2;
  }
  if (config.kubernetes.node_name.empty()) config.kubernetes.node_name = hostname();
  log_kubelet_thresholds(config);
  auto t0 = MonotonicClock().now();
  if (config.daemon.lock_memory) {
    // MCL_ONFAULT: lock pages as they are touched, not every mapping up front.
    if (::mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0) {
      spdlog::warn("daemon.lockMemory: mlockall failed ({}): the daemon's memory can be reclaimed under pressure "
                   "(grant CAP_IPC_LOCK or raise RLIMIT_MEMLOCK)",
                   std::strerror(errno));
    }
  }

  auto layout = detect_layout(config.observe);
  if (!layout) {
    spdlog::error("cgroup layout: {}", layout.error().message);
    return 1;
  }
  spdlog::info("cgroups: {} memory at {}, pods root {}, driver {}", name(layout->version), layout->memory_mount,
               layout->kubepods_memory_path, name(layout->driver));

  const node::ContainerfsDetection containerfs = node::detect_containerfs(config.observe);
  if (containerfs.layout == ContainerfsLayout::Unknown) {
    spdlog::warn("filesystems: containerfs layout unknown ({}): containerfs.* is not observed and has no thresholds",
                 containerfs.detail);
  } else {
    spdlog::info("filesystems: containerfs layout {} ({}); containerfs thresholds derived from {}",
                 name(containerfs.layout), containerfs.detail,
                 containerfs.layout == ContainerfsLayout::Imagefs ? "imagefs" : "nodefs");
  }

  // A kernel without PSI: say once what is lost and run on (the metric below).
  const PsiCheck psi = check_psi(config);
  if (!psi.available) spdlog::warn("{}", psi.message);

  // The reactor blocks SIGTERM/SIGINT/SIGHUP for a signalfd: build it before
  // any other thread starts so they inherit the mask.
  EventStats event_stats;
  ReactorOptions ropts;
  ropts.memory_mount = layout->memory_mount;
  ropts.cgroup_v2 = layout->memory_on_v2;
  ropts.proc_root = config.observe.proc_root;
  ropts.psi_dir = config.observe.psi_dir();
  // The features hold the kernel's BTF (5 MiB and more, resident), needed only
  // to choose and load the BPF programs: they go once the reactor is built.
  auto reactor = Reactor::create(config.events, ropts, *make_kernel_bpf_features(config.observe.proc_root), event_stats);
  if (!reactor) {
    spdlog::error("event reactor: {}", reactor.error().message);
    return 1;
  }

  std::shared_ptr<PodMetadataSource> metadata;
  if (config.observe.pods.kind != PodSourceKind::None) {
    auto m = make_pod_metadata_source(config.observe.pods);
    if (!m) {
      spdlog::error("pod metadata: {}", m.error().message);
      return 2;
    }
    metadata = std::move(*m);
    if (auto r = metadata->refresh(); !r) spdlog::warn("pod metadata: first refresh failed: {}", r.error().message);
    metadata->start(config.observe.pods.refresh_interval);
  }
  // Per-pod ephemeral storage is measured by a bounded walk on its own thread,
  // never on the pressure path; the observer merges the cached results.
  static const MonotonicClock storage_clock;  // outlives the storage thread
  std::shared_ptr<PodStorageSource> storage = make_pod_storage_source(config.observe);
  storage->start(config.observe.disk_walk_interval, storage_clock);
  auto observer = make_node_observer(config.observe, *layout, metadata, storage);
  if (!observer) {
    spdlog::error("observer: {}", observer.error().message);
    return 1;
  }
  // Decisions under memory pressure bound every contending pod's usage: in
  // one BPF cgroup walk where the kernel allows it, else one file per pod.
  (*observer)->set_page_counter_reader((*reactor)->page_counter_reader());
  // Which container of a memory victim grew: the likely victims' containers are read by each full observation.
  (*observer)->track_container_growth(4);

  Metrics metrics(MetricsOptions::from_config(config));
  // Reactor::create succeeded: BPF, or its fallbacks (memcg notifications, PSI
  // triggers, the safety-net timer), are attached. /readyz also waits for the
  // first observation (Metrics::observation_completed, from the daemon loop).
  metrics.set_events_attached(true);
  metrics.set(stats::kPsiAvailable, {}, psi.available ? 1 : 0);
  // Until the pod source delivers, no pod has metadata and none would be
  // evicted: the pod must show NotReady rather than a node silently unprotected.
  if (metadata) metrics.require_pod_source([metadata] { return metadata->stats().last_success.has_value(); });
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    auto p = static_cast<BpfProgram>(i);
    metrics.bpf_attach(name(p), name(static_cast<AttachKind>(event_stats.attach[i].load())),
                       event_stats.attach_reason(p));
  }
  for (const auto& r : event_stats.load_refusals()) metrics.add(stats::kBpfLoadRefusals, {name(r.program), name(r.kind)});
  export_reactor_latency(event_stats, metrics);  // event_stats outlives metrics and its server
  // The reactor's and the observer's own counters, read at each scrape;
  // declared after what they point to, so they are released first.
  const StatsExport event_stats_export = export_stats(metrics, event_stats);
  const StatsExport observer_stats_export = export_stats(metrics, (*observer)->counters());
  // What the metadata source counts of its own work (the API server's
  // list+watch); `metadata` outlives this handle.
  const StatsExport metadata_stats_export =
      metrics.export_counters(metadata ? metadata->exported_stats() : std::vector<ExternalStat>{});
  const StatsExport storage_stats_export = metrics.export_counters(storage->exported_stats());
  std::unique_ptr<MetricsServer> server;
  if (!config.metrics.listen.empty()) {
    WebConfig web;
    if (!config.metrics.web_config_file.empty()) {
      auto w = load_web_config(config.metrics.web_config_file);
      if (!w) {
        spdlog::error("metrics: {}", w.error().message);
        return 2;
      }
      web = std::move(*w);
    }
    auto s = MetricsServer::start(metrics, config.metrics.listen, web);
    if (!s) {
      spdlog::error("metrics endpoint {}: {}", config.metrics.listen, s.error().message);
      return 1;
    }
    server = std::move(*s);
    spdlog::info("metrics at {}://{}/metrics{}", server->scheme(), server->address(),
                 web.auth() ? " (authentication required)" : "");
  }
  // The port's own connections and refusals, served by the port itself;
  // released before the server.
  const StatsExport server_stats_export = server ? export_stats(metrics, server->counters()) : StatsExport{};

  std::unique_ptr<k8s::Reporter> reporter;
  if (config.kubernetes.enabled) {
    auto api = config.kubernetes.kubeconfig.empty() ? k8s::in_cluster_config()
                                                    : k8s::load_kubeconfig(config.kubernetes.kubeconfig);
    if (!api) {
      spdlog::error("kubernetes: {}", api.error().message);
      return 2;
    }
    k8s::ReporterOptions ro;
    ro.node_name = config.kubernetes.node_name;
    ro.condition_prefix = config.kubernetes.condition_prefix;
    ro.taint_nodes = config.kubernetes.taint_nodes;
    ro.taint_key_prefix = config.kubernetes.taint_key_prefix;
    reporter = std::make_unique<k8s::Reporter>(k8s::ApiClient(*api, config.kubernetes.request_timeout), ro);
    reporter->attach_metrics(metrics);
    reporter->start();
    spdlog::info("kubernetes: reporting to {} as node {}", api->server, ro.node_name);
  } else {
    spdlog::info("kubernetes: not configured; evicting locally only");
  }

  Daemon* daemon_ptr = nullptr;  // the daemon once built; the hooks below run on its reactor loop
  CgroupEvictorOptions eo;
  eo.pods_root = layout->kubepods_memory_path;
  eo.hierarchy_mount = layout->memory_mount;
  eo.freezer_mount = layout->freezer_mount;
  eo.proc_root = config.observe.proc_root;
  // None: the kill runs on the reactor thread and returns once the signals are
  // sent (a large process takes 50-250 ms to exit). The victim's cgroup
  // emptying is an event (cgroup_notify_populated), every progress tick
  // re-checks, and the policy re-kills stragglers once a second.
  eo.empty_wait = Duration::zero();
  eo.release_memory = config.daemon.release_victim_memory;
  // The reaping stays on the reactor thread: on the evictor's reaper thread
  // the kill step returned at once, but the memory came back later (reaction
  // p50 366 ms against 264 ms reaped on the reactor, same loaded host;
  // docs/performance.md, spike frontier). Until a host shows it the other
  // way round, off.
  eo.release_on_worker = false;
  // Its memory back: evaluate now rather than at the next tick (an uncharge wakes nothing else).
  eo.on_released = [&reactor, &daemon_ptr] {
    (*reactor)->post([&daemon_ptr] {
      if (daemon_ptr != nullptr) {
        daemon_ptr->evaluate(MonotonicClock().now(), "reaped", std::nullopt, Daemon::Observe::PartialOk);
      }
    });
  };
  CgroupEvictor real_evictor(eo);
  RecordingEvictor dry_evictor;

  // Relief needs cgroup v2's memory.reclaim (Linux 5.19+): probed once here.
  std::unique_ptr<CgroupReclaimWriter> reclaim_writer;
  std::string reclaim_unavailable;
  if (!layout->memory_on_v2) {
    reclaim_unavailable = "cgroup v1 (memory.reclaim is cgroup v2 only; force_empty and limit changes are never used)";
  } else if (!memory_reclaim_available(layout->kubepods_memory_path)) {
    reclaim_unavailable = "no memory.reclaim in " + layout->kubepods_memory_path + " (Linux before 5.19)";
  } else {
    reclaim_writer = std::make_unique<CgroupReclaimWriter>(layout->kubepods_memory_path);
  }

  // Eviction plugins: the gRPC transport is loaded only when a directory is
  // configured (a node without plugins maps none of gRPC).
  std::unique_ptr<plugins::PluginHost> plugin_host;
  if (!config.plugins.directory.empty()) {
    auto connector = plugins::load_grpc_connector(config.plugins.module);
    if (!connector) {
      spdlog::error("plugins.directory is set, but {}", connector.error().message);
      return 2;
    }
    plugins::HostOptions ho;
    ho.directory = config.plugins.directory;
    ho.call_timeout = config.plugins.call_timeout;
    ho.answer_max_age = config.plugins.answer_max_age;
    ho.backoff_initial = config.plugins.backoff_initial;
    ho.backoff_max = config.plugins.backoff_max;
    ho.max_plugins = config.plugins.max_plugins;
    plugin_host = std::make_unique<plugins::PluginHost>(std::move(ho), std::move(*connector));
    if (auto started = plugin_host->start(); !started) {
      spdlog::error("plugins: {}", started.error().message);
      return 2;
    }
  }

  DaemonDeps deps;
  deps.plugins = plugin_host.get();
  deps.reclaim = reclaim_writer.get();
  deps.reclaim_unavailable = reclaim_unavailable;
  deps.observer = observer->get();
  deps.evictor = &real_evictor;
  deps.metrics = &metrics;
  deps.reporter = reporter.get();
  deps.loop = reactor->get();
  deps.alarms = reactor->get();
  deps.boot_id = read_boot_id(config.observe.proc_root);
  deps.containerfs_layout = containerfs.layout;
  // A reload takes the whole file or nothing: reload_config() refuses an
  // empty file and one not ending in '...' (possibly cut mid-write).
  deps.reload = [options] {
    auto c = reload_config(options);
    if (!c) return c;
    // The defaults taken at start, so that a reload compares like with like.
    if (c->kubernetes.node_name.empty()) c->kubernetes.node_name = hostname();
    log_kubelet_thresholds(*c);
    return c;
  };
  if (!options.config_path.empty()) {
    std::ifstream in(options.config_path);
    std::stringstream text;
    text << in.rdbuf();
    if (!ends_with_document_end(text.str())) {
      spdlog::warn("config file {} does not end with '...': SIGHUP reloads will refuse it as possibly truncated "
                   "(docs/configuration.md, Reloading)",
                   options.config_path);
    }
  }
  // Added before the daemon exists (its checkpoint may resume an eviction);
  // it ticks only once the loop runs.
  auto progress = std::make_unique<ProgressTimer>(
      **reactor, std::chrono::milliseconds(50), systemd::watchdog_interval(),
      ProgressTimer::Hooks{
          .busy = [&daemon_ptr] { return daemon_ptr->busy(); },
          // The victims are re-read on a partial refresh too (docs/observation.md,
          // "Decisions while an eviction is in flight"): a tick need not read every pod.
          .progress =
              [&daemon_ptr] {
                daemon_ptr->evaluate(MonotonicClock().now(), "progress", std::nullopt, Daemon::Observe::PartialOk);
              },
          .feed_watchdog = [] { systemd::notify("WATCHDOG=1"); },
      });
  ProgressTimer* progress_timer = progress.get();
  if (auto added = (*reactor)->add_source(std::move(progress)); !added) {
    progress_timer = nullptr;
    spdlog::warn("no progress timer ({}): an eviction in flight progresses at the safety-net tick",
                 added.error().message);
  }
  deps.on_busy_changed = [progress_timer](bool busy) {
    if (progress_timer) progress_timer->set_busy(busy);
  };
  Daemon daemon(config, deps);
  daemon_ptr = &daemon;
  daemon.set_dry_run_evictor(&dry_evictor);
  daemon.restore_checkpoint();
  {
    // A crash between the freeze and the thaw of a v1 kill leaves the victim
    // frozen for good (SIGKILLed tasks only exit once thawed).
    std::vector<std::string> victims;
    for (const auto& f : daemon.policy().state().records) {
      if (f.in_flight()) victims.push_back(f.eviction.cgroup_path);
    }
    if (std::size_t n = real_evictor.thaw_leftovers(victims); n > 0) {
      spdlog::warn("thawed {} freezer cgroup(s) a previous run left frozen mid-kill", n);
    }
  }
  if (config.daemon.dry_run) spdlog::warn("dry run: decisions are logged and exported, nothing is killed");

  daemon.evaluate(MonotonicClock().now(), "startup", std::nullopt);
  event_stats.startup_resyncs.fetch_add(1, std::memory_order_relaxed);
  spdlog::info("pressured running: {} thresholds, {} pods, bpf {}, started in {:.1f} ms ({:.1f} ms of CPU)",
               config.eviction.thresholds.size(), daemon.last_snapshot().pods.size(),
               (*reactor)->bpf_active() ? "active" : "inactive (" + event_stats.bpf_status() + ")",
               std::chrono::duration<double, std::milli>(MonotonicClock().now() - t0).count(), cpu_ms_so_far());

  systemd::notify(fmt::format("READY=1\nSTATUS=running: {} thresholds, {} pods", config.eviction.thresholds.size(),
                              daemon.last_snapshot().pods.size()));
  auto ran = (*reactor)->run(daemon);
  systemd::notify("STOPPING=1");
  daemon.save_checkpoint();
  if (reporter) {
    // Evictions still queued are pods already killed here: give a slow API
    // server time to take them, within the 30 s that the DaemonSet's
    // terminationGracePeriodSeconds and the unit's TimeoutStopSec allow.
    reporter->drain(std::chrono::seconds(10));
    reporter->stop();
  }
  if (metadata) metadata->stop();
  storage->stop();
  if (server) server->stop();
  if (!ran) {
    spdlog::error("reactor: {}", ran.error().message);
    return 1;
  }
  spdlog::info("pressured stopped");
  return 0;
}

}  // namespace

Command add_run(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("run", "Run the daemon: detect pressure and evict pods (see docs/daemon.md)");
  auto options = add_config_flags(c.sub);
  c.run = [options] { return run_daemon(*options); };
  return c;
}

}  // namespace pressured::cli
