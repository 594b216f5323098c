#pragma once
// Internal to userspace/config: what the loader's parts share. The loader
// (load.cpp) parses the YAML, writes the flags into the tree (flags.cpp),
// decodes the sections (schema.cpp) and the eviction keys (eviction.cpp),
// imports the kubelet's configuration (kubelet_import.cpp) and validates
// (validate.cpp); dump.cpp prints the result back in the same schema.
// Flags are applied by writing them into the YAML tree before it is decoded,
// so a flag and a file key share one parser and one set of error messages;
// errors name the flag when the value came from one.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/codecs.hpp"
#include "config/load.hpp"
#include "pressured/config.hpp"

namespace pressured::config_detail {

// A configuration file is a few KiB; a bound keeps a hostile or broken one
// (a huge file, a device) from costing the daemon its memory.
inline constexpr std::size_t kMaxConfigFileBytes = 1u << 20;

/// Parse context: where values came from (for error messages) and warnings.
struct Ctx {
  std::map<std::string, std::string> origin;  // YAML path -> flag it came from
  std::vector<std::string> warnings;

  // "cgroup.cgroupRoot" or "cgroup.cgroupRoot (--cgroup-root)".
  std::string where(const std::string& origin_key, const std::string& path) const {
    auto it = origin.find(origin_key);
    return it == origin.end() ? path : path + " (" + it->second + ")";
  }
};

// --- schema.cpp: one YAML mapping per Config section, one line per field.
struct Section {
  std::string name;
  std::vector<Field<Config>> fields;
};
const std::vector<Section>& sections();
extern const EnumNames<DaemonSetPolicy> kDaemonSetPolicies;
extern const EnumNames<Ranking> kRankings;

// --- eviction.cpp: the KubeletConfiguration-named top-level keys.
inline constexpr const char* kEvictionKeys[] = {
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMinimumReclaim",
    "evictionMaxPodGracePeriod",
    "softEvictionGraceCeilingSeconds",
    "evictionPressureTransitionPeriod",
    "mergeDefaultEvictionSettings",
    "localStorageCapacityIsolation",
    "daemonSetPods",
    "ranking",
    "featureGates",
};
bool is_eviction_key(const std::string& k);
/// Decodes the eviction keys present in `keys` into `ev` (thresholds with the
/// kubelet's defaults and merging, grace periods, minimum reclaim, ...).
Result<void> decode_eviction(const std::map<std::string, Node>& keys, EvictionConfig& ev, Ctx& ctx);
/// Hard before soft, then in signal order (stable): the order of EvictionConfig::thresholds.
void sort_thresholds(std::vector<Threshold>& thresholds);

// --- flags.cpp: the command-line flags, written into the YAML tree.
/// "memory.available, nodefs.available, ...", for error messages.
std::string known_signals();
Result<void> apply_flags(Node& root, const ConfigOptions& o, Ctx& ctx);

// --- kubelet_import.cpp: the node's KubeletConfiguration.
inline constexpr const char* kKubeletEvictionKeys[] = {
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMinimumReclaim",
    "evictionMaxPodGracePeriod",
    "evictionPressureTransitionPeriod",
    "mergeDefaultEvictionSettings",
    "localStorageCapacityIsolation",
    "featureGates",
};
/// Replaces cfg.eviction with what the kubelet derives from its configuration
/// `text` (nullopt: absent, take its defaults), raised by kubelet.thresholdOffset;
/// `own_keys` are the eviction keys of pressured's own file (only PSI ones may stay).
Result<void> apply_kubelet_config(Config& cfg, const std::map<std::string, Node>& own_keys, Ctx& ctx,
                                  const std::optional<std::string>& text);

// --- validate.cpp
/// "evictionHard.<signal>" or "evictionSoft.<signal>".
std::string threshold_path(const Threshold& t);

// --- load.cpp
/// True when the text has no YAML content: blank lines and comments only.
bool no_content(std::string_view text);

}  // namespace pressured::config_detail
