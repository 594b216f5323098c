#pragma once
// Loading the effective configuration: defaults, then the YAML file, then the
// command-line flags (flags win), then validation. Every subcommand that needs
// a Config registers the shared flags with add_config_flags() and calls
// load_config() in its run function. See docs/configuration.md.
//
// Adding a field: add it to include/pressured/config.hpp, then add one line to
// the section's table in userspace/config/schema.cpp (key, member, codec) and,
// when operators need it on the command line, one member in ConfigOptions
// plus one row in kFlags (flags.cpp). Validation rules go in validate_config()
// (validate.cpp). The loader's parts are listed in load.cpp.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "pressured/config.hpp"
#include "pressured/result.hpp"

namespace pressured {

/// The --config path and every configuration flag given on the command line.
/// An unset optional means "not given": the file's value (or the default) stays.
struct ConfigOptions {
  std::string config_path;  // empty: no file, defaults plus flags

  // Eviction (kubelet flag syntax, e.g. "memory.available<100Mi,nodefs.available<10%").
  std::optional<std::string> eviction_hard;
  std::optional<std::string> eviction_soft;
  std::optional<std::string> eviction_soft_grace_period;  // "memory.available=1m30s,..."
  std::optional<std::string> eviction_minimum_reclaim;    // "memory.available=500Mi,..."
  std::optional<std::string> eviction_max_pod_grace_period;  // seconds
  std::optional<std::string> soft_eviction_grace_ceiling;    // seconds
  std::optional<std::string> ranking;                        // qosFirst | kubelet
  std::optional<std::string> kubelet_config;                 // the node's KubeletConfiguration file
  std::optional<std::string> kubelet_threshold_offset;       // "memory.available=50Mi,nodefs.available=1%"
  std::optional<std::string> eviction_pressure_transition_period;  // Go duration

  // Observation (cgroup:, pods:).
  std::optional<std::string> cgroup_root;
  std::optional<std::string> cgroup_mount;
  std::optional<std::string> kubepods_name;
  std::optional<std::string> cgroup_driver;  // auto|cgroupfs|systemd
  std::optional<std::string> pod_source;     // none|kubelet|file
  std::optional<std::string> pod_file;       // implies --pod-source=file unless that is given
  std::optional<std::string> memory_available_mode;  // kubelet|excludeReserved|reclaimableActive
  std::optional<std::string> imagefs_path;           // the runtime's image store
  std::optional<std::string> runtime_root;           // the runtime's root (writable layers)

  // Events (events:).
  std::optional<std::string> bpf;  // auto|on|off
  std::optional<std::string> poll_interval;  // forced polling baseline (disables events)
  std::optional<std::string> safety_net_interval;

  // Metrics, logs, daemon, kubernetes.
  std::optional<std::string> metrics_listen;
  std::optional<std::string> log_level;
  std::optional<std::string> log_format;
  std::optional<bool> dry_run;
  std::optional<std::string> state_file;
  std::optional<std::string> node_name;
  std::optional<std::string> kubeconfig;  // also turns kubernetes.enabled on
  std::optional<std::string> plugins_directory;  // eviction plugins (docs/plugins.md)
};

/// Registers --config and the configuration flags on `sub`. The returned
/// options are filled when the command line is parsed; pass them to
/// load_config() from the subcommand's run function.
std::shared_ptr<ConfigOptions> add_config_flags(CLI::App* sub);

/// Reads options.config_path (when set), applies the flags, validates, and
/// returns the effective configuration. Warnings (ignored 0%/100% thresholds,
/// unused settings) go to `warnings` when given, else to the log at warn.
Result<Config> load_config(const ConfigOptions& options, std::vector<std::string>* warnings = nullptr);

/// The SIGHUP path: load_config() that only accepts a complete document. The
/// file is read once; it must not be empty and its last non-blank line must
/// be YAML's document end marker `...`, so a file cut after any line (a write
/// in progress, a full disk) is refused as a whole and the running
/// configuration stays. See docs/configuration.md "Reloading".
Result<Config> reload_config(const ConfigOptions& options, std::vector<std::string>* warnings = nullptr);

/// True when the last non-blank line of `text` is `...` (YAML document end).
bool ends_with_document_end(std::string_view text);

/// Same as load_config() with the YAML text given directly (tests, reloads).
Result<Config> parse_config_yaml(const std::string& text, const ConfigOptions& overrides = {},
                                 std::vector<std::string>* warnings = nullptr);

/// parse_config_yaml() with the node's KubeletConfiguration given as text
/// instead of read from kubelet.configPath (which then only names it in
/// messages): the import on its own, for the fuzzer and tests.
Result<Config> parse_config_yaml_with_kubelet(const std::string& text, const std::string& kubelet_text,
                                              std::vector<std::string>* warnings = nullptr);

/// Reads the node's KubeletConfiguration as pressured takes it: a regular
/// file (opened non-blocking, so a FIFO at the path never blocks the event
/// loop) of at most 1 MiB, read twice; two reads that differ (content,
/// inode, size or mtime) mean a write in progress and an error, so a reload
/// keeps the settings in force. `between_reads` runs between the two reads
/// (tests). See docs/configuration.md, "The kubelet's configuration".
Result<std::string> read_kubelet_config_file(const std::string& path,
                                             const std::function<void()>& between_reads = {});

/// Checks cross-field rules that the parser cannot see field by field (a file
/// pod source needs a path, intervals must be positive, ...). load_config()
/// calls it; call it again after editing a Config by hand.
Result<void> validate_config(const Config& config);

/// The effective configuration as YAML in the config-file schema; feeding it
/// back to parse_config_yaml() yields the same Config. Used by check-config.
std::string dump_config(const Config& config);

/// One YAML comment line per effective value ("#   evictionHard.memory.available:
/// 550Mi  <- kubelet configuration /var/lib/kubelet/config.yaml (500Mi) +
/// kubelet.thresholdOffset 50Mi"): the file, the flag, the kubelet's
/// configuration, or the default it came from. check-config prints it.
std::string describe_sources(const Config& config);

/// The kubelet's default hard thresholds (memory.available<100Mi,
/// nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%,
/// imagefs.inodesFree<5%).
std::vector<Threshold> default_hard_thresholds();

}  // namespace pressured
