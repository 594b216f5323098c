// Validation across fields: the rules no single field's codec can see (a
// file pod source needs a path, intervals must be positive, ...).
// load_config() runs it; so may anyone who edits a Config by hand.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdint>
#include <iterator>
#include <string>

#include "config/load_internal.hpp"
#include "pressured/listen_address.hpp"
#include "pressured/predictive.hpp"
#include "pressured/signals.hpp"

namespace pressured::config_detail {

std::string threshold_path(const Threshold& t) {
  return std::string(t.kind == ThresholdKind::Hard ? "evictionHard." : "evictionSoft.") + std::string(name(t.signal));
}

}  // namespace pressured::config_detail

namespace pressured {

using namespace config_detail;

namespace {

Error invalid(const std::string& where, const std::string& value, const std::string& why) {
  return Error{EINVAL, where + ": '" + value + "' " + why};
}

Result<void> require_positive(Duration d, const char* where) {
  if (d.count() <= 0) return invalid(where, format_duration(d), "must be positive");
  return {};
}

Result<void> validate_plugins(const PluginsConfig& p) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  if (!p.directory.empty() && p.directory.front() != '/') {
    return invalid("plugins.directory", p.directory, "is not an absolute path");
  }
  if (!p.module.empty() && p.module.front() != '/') return invalid("plugins.module", p.module, "is not an absolute path");
  if (p.call_timeout < milliseconds(1) || p.call_timeout > seconds(1)) {
    return invalid("plugins.callTimeout", format_duration(p.call_timeout),
                   "is not between 1ms and 1s (tens of ms: a plugin's answer is advice that must come quickly)");
  }
  if (p.answer_max_age < seconds(1) || p.answer_max_age > std::chrono::minutes(10)) {
    return invalid("plugins.answerMaxAge", format_duration(p.answer_max_age), "is not between 1s and 10m");
  }
  if (p.proposal_interval < seconds(1)) {
    return invalid("plugins.proposalInterval", format_duration(p.proposal_interval),
                   "is under 1s (proposals are rate-limited per plugin)");
  }
  if (p.backoff_initial < milliseconds(10)) {
    return invalid("plugins.backoffInitial", format_duration(p.backoff_initial), "is under 10ms");
  }
  if (p.backoff_max < p.backoff_initial || p.backoff_max > std::chrono::hours(1)) {
    return invalid("plugins.backoffMax", format_duration(p.backoff_max),
                   "is not between plugins.backoffInitial and 1h");
  }
  if (p.max_candidates < 1 || p.max_candidates > 1000) {
    return invalid("plugins.maxCandidates", std::to_string(p.max_candidates), "is not between 1 and 1000");
  }
  if (p.max_plugins < 1 || p.max_plugins > 64) {
    return invalid("plugins.maxPlugins", std::to_string(p.max_plugins), "is not between 1 and 64");
  }
  return {};
}

}  // namespace

Result<void> validate_config(const Config& c) {
  // Eviction (the loader already checks these; a hand-built Config may not be).
  const auto& ev = c.eviction;
  if (ev.max_pod_grace_period_seconds < INT32_MIN || ev.max_pod_grace_period_seconds > INT32_MAX) {
    return invalid("evictionMaxPodGracePeriod", std::to_string(ev.max_pod_grace_period_seconds),
                   "is outside the 32-bit range the kubelet's field has");
  }
  if (ev.soft_grace_ceiling_seconds < 0) {
    return invalid("softEvictionGraceCeilingSeconds", std::to_string(ev.soft_grace_ceiling_seconds), "is negative");
  }
  if (ev.pressure_transition_period.count() < 0) {
    return invalid("evictionPressureTransitionPeriod", format_duration(ev.pressure_transition_period), "is negative");
  }
  for (const auto& t : ev.thresholds) {
    const std::string where = threshold_path(t);
    const std::string text = format_threshold_value(t.value);
    if (t.value.kind == ThresholdValue::Kind::Percent && (t.value.percent <= 0 || t.value.percent > 100)) {
      return invalid(where, text, "must be a percentage above 0% and at most 100%");
    }
    if (t.value.kind == ThresholdValue::Kind::Quantity && t.value.quantity <= 0) {
      return invalid(where, text, "must be positive");
    }
    if (t.kind == ThresholdKind::Soft && t.grace_period.count() < 0) {
      return invalid("evictionSoftGracePeriod." + std::string(name(t.signal)), format_duration(t.grace_period),
                     "is negative");
    }
    if (t.min_reclaim.quantity < 0 || t.min_reclaim.percent < 0 || t.min_reclaim.percent > 100) {
      return invalid("evictionMinimumReclaim." + std::string(name(t.signal)), format_threshold_value(t.min_reclaim),
                     "is out of range");
    }
  }

  const auto& ob = c.observe;
  auto absolute = [](const std::string& p) { return !p.empty() && p[0] == '/'; };
  if (!absolute(ob.cgroup_mount)) return invalid("cgroup.cgroupMount", ob.cgroup_mount, "must be an absolute path");
  if (!absolute(ob.cgroup_root)) return invalid("cgroup.cgroupRoot", ob.cgroup_root, "must be an absolute path");
  if (ob.kubepods_name.empty() || ob.kubepods_name.find('/') != std::string::npos || ob.kubepods_name == "." ||
      ob.kubepods_name == "..") {
    return invalid("cgroup.kubepodsName", ob.kubepods_name, "must be a single cgroup name");
  }
  if (!absolute(ob.proc_root)) return invalid("cgroup.procRoot", ob.proc_root, "must be an absolute path");
  if (!ob.psi_path.empty() && !absolute(ob.psi_path)) {
    return invalid("cgroup.psiPath", ob.psi_path, "must be an absolute path (empty: <procRoot>/pressure)");
  }
  if (auto r = require_positive(ob.disk_walk_interval, "cgroup.diskWalkInterval"); !r) return r;
  if (auto r = require_positive(ob.disk_walk_budget, "cgroup.diskWalkBudget"); !r) return r;
  if (ob.disk_walk_max_entries == 0) return invalid("cgroup.diskWalkMaxEntries", "0", "must be at least 1");
  if (!ob.runtime_root.empty() && (!absolute(ob.runtime_root) || ob.runtime_root.find_first_not_of('/') == std::string::npos)) {
    return invalid("cgroup.runtimeRoot", ob.runtime_root, "must be an absolute path other than / (empty: imagefsPath)");
  }
  if (!(ob.reclaimable_active_file_percent >= 0 && ob.reclaimable_active_file_percent <= 100)) {
    return invalid("cgroup.reclaimableActiveFilePercent", format_quantity(ob.reclaimable_active_file_percent),
                   "must be a percentage 0-100");
  }
  if (ob.pods.kind == PodSourceKind::File && ob.pods.path.empty()) {
    return invalid("pods.path", ob.pods.path, "must be set when pods.kind is file (--pod-file)");
  }
  if (ob.pods.kind == PodSourceKind::Kubelet && ob.pods.kubelet_url.empty()) {
    return invalid("pods.kubeletUrl", ob.pods.kubelet_url, "must be set when pods.kind is kubelet");
  }
  if (auto r = require_positive(ob.pods.refresh_interval, "pods.refreshInterval"); !r) return r;
  if (auto r = require_positive(ob.pods.timeout, "pods.timeout"); !r) return r;
  if (ob.pods.watch_timeout < std::chrono::seconds(1) || ob.pods.watch_timeout > std::chrono::hours(1)) {
    return invalid("pods.watchTimeout", format_duration(ob.pods.watch_timeout), "must be between 1s and 1h");
  }

  const auto& e = c.events;
  // The reactor may run SCHED_FIFO: an interval of a few nanoseconds would
  // make it spin and starve the CPU it runs on.
  const Duration min_interval = std::chrono::milliseconds(10);
  if (auto r = require_positive(e.safety_net_interval, "events.safetyNetInterval"); !r) return r;
  if (e.safety_net_interval < min_interval) {
    return invalid("events.safetyNetInterval", format_duration(e.safety_net_interval), "must be at least 10ms");
  }
  if (e.full_observation_interval && *e.full_observation_interval < e.safety_net_interval) {
    return invalid("events.fullObservationInterval", format_duration(*e.full_observation_interval),
                   "must be at least events.safetyNetInterval (" + format_duration(e.safety_net_interval) + ")");
  }
  if (e.forced_poll_interval && *e.forced_poll_interval < min_interval) {
    return invalid("events.forcedPollInterval", format_duration(*e.forced_poll_interval), "must be at least 10ms");
  }
  if (ob.pods.refresh_interval < min_interval) {
    return invalid("pods.refreshInterval", format_duration(ob.pods.refresh_interval), "must be at least 10ms");
  }
  if (ob.disk_walk_interval < min_interval) {
    return invalid("cgroup.diskWalkInterval", format_duration(ob.disk_walk_interval), "must be at least 10ms");
  }
  if (e.ring_buffer_bytes < 4096 || (e.ring_buffer_bytes & (e.ring_buffer_bytes - 1)) != 0) {
    return invalid("events.ringBufferBytes", format_quantity(e.ring_buffer_bytes),
                   "must be a power of two of at least 4Ki (a BPF ring buffer requirement)");
  }
  if (e.charge_sample_every == 0) return invalid("events.chargeSampleEvery", "0", "must be at least 1");
  if (e.reactor_nice < -20 || e.reactor_nice > 19) {
    return invalid("events.reactorNice", std::to_string(e.reactor_nice), "must be a nice value -20..19");
  }
  if (e.reactor_rt_priority < 0 || e.reactor_rt_priority > 99) {
    return invalid("events.reactorRtPriority", std::to_string(e.reactor_rt_priority), "must be 0 (off) or 1..99");
  }
  // The kernel accepts PSI trigger windows of 500ms..10s and a stall within the window.
  if (e.psi_window < std::chrono::milliseconds(500) || e.psi_window > std::chrono::seconds(10)) {
    return invalid("events.psiWindow", format_duration(e.psi_window), "must be between 500ms and 10s (kernel PSI trigger limits)");
  }
  if (e.psi_stall.count() <= 0 || e.psi_stall > e.psi_window) {
    return invalid("events.psiStall", format_duration(e.psi_stall), "must be positive and at most events.psiWindow");
  }

  if (auto r = require_positive(c.kubernetes.request_timeout, "kubernetes.requestTimeout"); !r) return r;
  if (c.kubernetes.condition_prefix.empty()) return invalid("kubernetes.conditionPrefix", "", "must not be empty");
  {
    // A taint key is a qualified name: [DNS subdomain "/"] name; the prefix
    // is completed with "memory-pressure" etc., so it must end in '/' or be
    // a valid name start.
    const std::string& p = c.kubernetes.taint_key_prefix;
    auto slash = p.find('/');
    bool ok = !p.empty() && p.size() <= 230 && p.find('/', slash == std::string::npos ? 0 : slash + 1) == std::string::npos &&
              p.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._/") == std::string::npos &&
              std::isalnum(static_cast<unsigned char>(p.front())) != 0;
    if (ok && slash != std::string::npos) {
      for (char ch : p.substr(0, slash)) ok = ok && !std::isupper(static_cast<unsigned char>(ch)) && ch != '_';
    }
    if (!ok) {
      return invalid("kubernetes.taintKeyPrefix", p,
                     "must start a taint key: an optional DNS-subdomain prefix ending in '/' (e.g. pressured.io/), "
                     "letters, digits, '-', '_', '.'");
    }
  }

  // The same parser as the metrics server's: what check-config accepts, run can bind.
  if (!c.metrics.listen.empty()) {
    if (auto a = parse_listen_address(c.metrics.listen); !a) {
      return invalid("metrics.listen", c.metrics.listen,
                     "is not a listen address: " + a.error().message + "; empty disables the endpoint");
    }
  }

  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  if (std::none_of(std::begin(kLevels), std::end(kLevels), [&](const char* l) { return c.log.level == l; })) {
    return invalid("log.level", c.log.level, "is not one of trace, debug, info, warn, error, critical, off");
  }
  if (c.log.format != "text" && c.log.format != "json") {
    return invalid("log.format", c.log.format, "is not one of text, json");
  }

  if (c.daemon.state_file.empty()) return invalid("daemon.stateFile", "", "must not be empty");
  if (auto r = require_positive(c.daemon.disk_reclaim_timeout, "daemon.diskReclaimTimeout"); !r) return r;
  if (c.daemon.release_horizon.count() < 0) {
    return invalid("daemon.releaseHorizon", format_duration(c.daemon.release_horizon), "is negative");
  }
  if (c.daemon.predictive_lead.count() < 0) {
    return invalid("daemon.predictiveLead", format_duration(c.daemon.predictive_lead), "is negative");
  }
  if (c.daemon.predictive_lead > std::chrono::seconds(10)) {
    return invalid("daemon.predictiveLead", format_duration(c.daemon.predictive_lead),
                   "is longer than 10s (a projection that far ahead evicts on a passing allocation; set it to "
                   "pressured's reaction time with a margin)");
  }
  if (c.daemon.predictive_lead.count() > 0 &&
      std::none_of(c.eviction.thresholds.begin(), c.eviction.thresholds.end(), predictable)) {
    return invalid("daemon.predictiveLead", format_duration(c.daemon.predictive_lead),
                   "needs a hard memory.available or allocatableMemory.available threshold (evictionHard) to predict");
  }
  if (c.daemon.release_wait_timeout.count() < 0) {
    return invalid("daemon.releaseWaitTimeout", format_duration(c.daemon.release_wait_timeout), "is negative");
  }
  if (c.daemon.soft_kill_margin.count() < 0) {
    return invalid("daemon.softKillMargin", format_duration(c.daemon.soft_kill_margin), "is negative");
  }
  if (c.daemon.kill_timeout < std::chrono::seconds(1)) {
    return invalid("daemon.killTimeout", format_duration(c.daemon.kill_timeout),
                   "is under 1s (a victim needs time to die before it counts as stuck)");
  }

  const ReliefConfig& rl = c.relief;
  if (rl.hard_threshold_budget.count() < 0) {
    return invalid("relief.hardThresholdBudget", format_duration(rl.hard_threshold_budget),
                   "is negative (0 disables reclaim on hard thresholds)");
  }
  if (rl.hard_threshold_budget > std::chrono::seconds(2)) {
    return invalid("relief.hardThresholdBudget", format_duration(rl.hard_threshold_budget),
                   "is over 2s: a hard threshold is the last line before the kernel's OOM killer and must not wait "
                   "that long (a few hundred ms at most; 0 disables reclaim on hard thresholds)");
  }
  if (rl.backoff < std::chrono::seconds(1)) {
    return invalid("relief.backoff", format_duration(rl.backoff),
                   "is under 1s (a cgroup that gave back little would be asked again at once)");
  }
  if (auto r = require_positive(rl.timeout, "relief.timeout"); !r) return r;
  if (rl.timeout > std::chrono::minutes(5)) {
    return invalid("relief.timeout", format_duration(rl.timeout),
                   "is over 5m (one reclaim run must end well before the next decision)");
  }
  if (!(rl.low_yield_percent >= 0 && rl.low_yield_percent <= 100)) {
    return invalid("relief.lowYieldPercent", format_quantity(rl.low_yield_percent), "is not between 0 and 100");
  }
  return validate_plugins(c.plugins);
}

}  // namespace pressured
