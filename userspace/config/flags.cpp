// The command-line flags: one row per flag in kFlags (flag, YAML path, syntax,
// help). Scalar flags overwrite `section.key` in the YAML tree; the eviction
// flags use the kubelet's list syntax and replace the whole map, so a flag and
// a file key share one decoder and one set of error messages.
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "common/text.hpp"
#include "config/load_internal.hpp"
#include "pressured/signals.hpp"

namespace pressured::config_detail {

namespace {

enum class FlagSyntax : uint8_t { Scalar, ThresholdList, AssignList };

struct FlagSpec {
  const char* flag;
  std::optional<std::string> ConfigOptions::*member;
  const char* section;  // "" for top-level (eviction) keys
  const char* key;
  FlagSyntax syntax;
  const char* help;
};

const FlagSpec kFlags[] = {
    {"--eviction-hard", &ConfigOptions::eviction_hard, "", "evictionHard", FlagSyntax::ThresholdList,
     "Hard thresholds, e.g. \"memory.available<100Mi,nodefs.available<10%\" (replaces evictionHard)"},
    {"--eviction-soft", &ConfigOptions::eviction_soft, "", "evictionSoft", FlagSyntax::ThresholdList,
     "Soft thresholds, e.g. \"memory.available<1.5Gi\" (each needs a grace period)"},
    {"--eviction-soft-grace-period", &ConfigOptions::eviction_soft_grace_period, "", "evictionSoftGracePeriod",
     FlagSyntax::AssignList, "Soft grace periods, e.g. \"memory.available=1m30s\""},
    {"--eviction-minimum-reclaim", &ConfigOptions::eviction_minimum_reclaim, "", "evictionMinimumReclaim",
     FlagSyntax::AssignList, "Minimum reclaim, e.g. \"memory.available=0Mi,nodefs.available=500Mi\""},
    {"--eviction-max-pod-grace-period", &ConfigOptions::eviction_max_pod_grace_period, "",
     "evictionMaxPodGracePeriod", FlagSyntax::Scalar,
     "Max grace period (seconds) for soft evictions, as the kubelet: 0: the pod's own "
     "terminationGracePeriodSeconds; negative: 1 s"},
    {"--soft-eviction-grace-ceiling", &ConfigOptions::soft_eviction_grace_ceiling, "",
     "softEvictionGraceCeilingSeconds", FlagSyntax::Scalar,
     "pressured's ceiling (seconds) on a soft eviction's grace period, default 3600; 0: none (the kubelet's)"},
    {"--eviction-pressure-transition-period", &ConfigOptions::eviction_pressure_transition_period, "",
     "evictionPressureTransitionPeriod", FlagSyntax::Scalar,
     "How long a condition stays true after its last met threshold (Go duration, default 5m)"},
    {"--kubelet-config", &ConfigOptions::kubelet_config, "kubelet", "configPath", FlagSyntax::Scalar,
     "The node's KubeletConfiguration file: take its eviction settings (plus kubelet.thresholdOffset)"},
    {"--kubelet-threshold-offset", &ConfigOptions::kubelet_threshold_offset, "kubelet", "thresholdOffset",
     FlagSyntax::AssignList,
     "Raise the kubelet's thresholds, e.g. \"memory.available=50Mi,nodefs.available=1%\" (replaces "
     "kubelet.thresholdOffset; needs --kubelet-config)"},
    {"--ranking", &ConfigOptions::ranking, "", "ranking", FlagSyntax::Scalar,
     "qosFirst (default: QoS class first) or kubelet (the kubelet's orders exactly)"},
    {"--cgroup-root", &ConfigOptions::cgroup_root, "cgroup", "cgroupRoot", FlagSyntax::Scalar,
     "The kubelet's --cgroup-root (default /)"},
    {"--cgroup-mount", &ConfigOptions::cgroup_mount, "cgroup", "cgroupMount", FlagSyntax::Scalar,
     "Where cgroupfs is mounted (default /sys/fs/cgroup)"},
    {"--kubepods-name", &ConfigOptions::kubepods_name, "cgroup", "kubepodsName", FlagSyntax::Scalar,
     "Name of the pods cgroup (kubepods, kubepods.slice)"},
    {"--cgroup-driver", &ConfigOptions::cgroup_driver, "cgroup", "driver", FlagSyntax::Scalar,
     "auto|cgroupfs|systemd"},
    {"--memory-available-mode", &ConfigOptions::memory_available_mode, "cgroup", "memoryAvailableMode",
     FlagSyntax::Scalar, "kubelet|excludeReserved|reclaimableActive"},
    {"--imagefs-path", &ConfigOptions::imagefs_path, "cgroup", "imagefsPath", FlagSyntax::Scalar,
     "The container runtime's image store (imagefs.*; containerd /var/lib/containerd, CRI-O "
     "/var/lib/containers/storage)"},
    {"--runtime-root", &ConfigOptions::runtime_root, "cgroup", "runtimeRoot", FlagSyntax::Scalar,
     "The container runtime's root holding the writable layers (default: --imagefs-path)"},
    {"--pod-source", &ConfigOptions::pod_source, "pods", "kind", FlagSyntax::Scalar, "none|kubelet|file|apiserver"},
    {"--pod-file", &ConfigOptions::pod_file, "pods", "path", FlagSyntax::Scalar,
     "Pod/PodList file or directory (implies --pod-source=file)"},
    {"--bpf", &ConfigOptions::bpf, "events", "bpf", FlagSyntax::Scalar, "auto|on|off"},
    {"--poll-interval", &ConfigOptions::poll_interval, "events", "forcedPollInterval", FlagSyntax::Scalar,
     "Baseline mode: poll at this interval and disable event sources"},
    {"--safety-net-interval", &ConfigOptions::safety_net_interval, "events", "safetyNetInterval",
     FlagSyntax::Scalar, "Re-evaluate at least this often even without events (default 1s)"},
    {"--metrics-listen", &ConfigOptions::metrics_listen, "metrics", "listen", FlagSyntax::Scalar,
     "Prometheus endpoint address (default 0.0.0.0:9847; empty disables)"},
    {"--log-level", &ConfigOptions::log_level, "log", "level", FlagSyntax::Scalar,
     "trace|debug|info|warn|error|critical|off"},
    {"--log-format", &ConfigOptions::log_format, "log", "format", FlagSyntax::Scalar, "text|json"},
    {"--state-file", &ConfigOptions::state_file, "daemon", "stateFile", FlagSyntax::Scalar,
     "Engine checkpoint file"},
    {"--node-name", &ConfigOptions::node_name, "kubernetes", "nodeName", FlagSyntax::Scalar,
     "This node's name (default: hostname)"},
    {"--kubeconfig", &ConfigOptions::kubeconfig, "kubernetes", "kubeconfig", FlagSyntax::Scalar,
     "kubeconfig for the API server (turns kubernetes.enabled on)"},
    {"--plugins-directory", &ConfigOptions::plugins_directory, "plugins", "directory", FlagSyntax::Scalar,
     "Directory eviction plugins create their sockets in (turns plugins on; docs/plugins.md)"},
};

}  // namespace

std::string known_signals() {
  std::string out;
  for (const auto& s : kSignals) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

namespace {

// "memory.available<100Mi,nodefs.available<10%" or "memory.available=1m30s,...".
Result<Node> parse_flag_list(const FlagSpec& spec, const std::string& text) {
  Node map(YAML::NodeType::Map);
  std::set<std::string> seen;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::string stmt(trim_space(item));
    if (stmt.empty()) continue;
    std::size_t pos = spec.syntax == FlagSyntax::ThresholdList ? stmt.find_first_of("<>") : stmt.find('=');
    auto fail = [&](const std::string& why) {
      return Error{EINVAL, std::string(spec.flag) + ": '" + stmt + "' " + why};
    };
    if (pos == std::string::npos || pos == 0) {
      return fail(spec.syntax == FlagSyntax::ThresholdList ? "is not <signal><operator><quantity>, e.g. memory.available<100Mi"
                                                           : "is not <signal>=<value>, e.g. memory.available=1m30s");
    }
    std::string sig_name(trim_space(std::string_view(stmt).substr(0, pos)));
    std::string value(trim_space(std::string_view(stmt).substr(pos + 1)));
    auto sig = parse_signal(sig_name);
    if (!sig) return fail("names an unknown signal '" + sig_name + "' (known: " + known_signals() + ")");
    if (spec.syntax == FlagSyntax::ThresholdList) {
      char want = info(*sig).op == Operator::LessThan ? '<' : '>';
      if (stmt[pos] != want) {
        return fail("uses operator '" + std::string(1, stmt[pos]) + "'; " + sig_name + " takes '" + std::string(1, want) + "'");
      }
    }
    if (value.empty()) return fail("has no value");
    if (!seen.insert(sig_name).second) return fail("repeats signal " + sig_name);
    map[sig_name] = value;
  }
  return map;
}

}  // namespace

Result<void> apply_flags(Node& root, const ConfigOptions& o, Ctx& ctx) {
  auto set_scalar = [&](const char* section, const char* key, const std::string& value, const std::string& flag) -> Result<void> {
    if (section[0] == '\0') {
      root[key] = value;
      ctx.origin[key] = flag;
      return {};
    }
    Node sec = root[section];
    if (sec && !sec.IsMap() && !sec.IsNull()) return Error{EINVAL, std::string(section) + ": is not a mapping"};
    if (!sec || sec.IsNull()) {
      root[section] = Node(YAML::NodeType::Map);
      sec = root[section];
    }
    sec[key] = value;
    ctx.origin[std::string(section) + "." + key] = flag;
    return {};
  };
  for (const auto& spec : kFlags) {
    const auto& v = o.*spec.member;
    if (!v) continue;
    if (spec.syntax == FlagSyntax::Scalar) {
      auto r = set_scalar(spec.section, spec.key, *v, spec.flag);
      if (!r) return r;
    } else {
      auto list = parse_flag_list(spec, *v);
      if (!list) return list.error();
      if (spec.section[0] == '\0') {
        root[spec.key] = *list;
        ctx.origin[spec.key] = spec.flag;
      } else {
        Node sec = root[spec.section];
        if (sec && !sec.IsMap() && !sec.IsNull()) return Error{EINVAL, std::string(spec.section) + ": is not a mapping"};
        if (!sec || sec.IsNull()) {
          root[spec.section] = Node(YAML::NodeType::Map);
          sec = root[spec.section];
        }
        sec[spec.key] = *list;
        ctx.origin[std::string(spec.section) + "." + spec.key] = spec.flag;
      }
    }
  }
  // Flags that imply a second setting.
  if (o.pod_file && !o.pod_source) {
    auto r = set_scalar("pods", "kind", "file", "--pod-file");
    if (!r) return r;
  }
  if (o.kubeconfig) {
    auto r = set_scalar("kubernetes", "enabled", "true", "--kubeconfig");
    if (!r) return r;
  }
  if (o.dry_run) {
    auto r = set_scalar("daemon", "dryRun", *o.dry_run ? "true" : "false", "--dry-run");
    if (!r) return r;
  }
  return {};
}

}  // namespace pressured::config_detail

namespace pressured {

using namespace config_detail;

std::shared_ptr<ConfigOptions> add_config_flags(CLI::App* sub) {
  auto opts = std::make_shared<ConfigOptions>();
  sub->add_option("--config", opts->config_path, "YAML configuration file (see docs/configuration.md)")
      ->type_name("FILE");
  for (const auto& spec : kFlags) {
    auto member = spec.member;
    sub->add_option(spec.flag, spec.help)
        ->type_name(spec.syntax == FlagSyntax::Scalar ? "VALUE" : "LIST")
        ->each([opts, member](const std::string& v) { (*opts).*member = v; })
        ->group("Configuration (overrides the file)");
  }
  sub->add_flag_callback("--dry-run", [opts] { opts->dry_run = true; }, "Decide and log, never evict")
      ->group("Configuration (overrides the file)");
  return opts;
}

}  // namespace pressured
