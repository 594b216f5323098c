// The configuration loader: YAML file + kubelet-style flags -> Config.
//
// Layout of this file, so that adding a field is one line:
//   1. codecs: how one YAML scalar becomes one C++ field and back;
//   2. section tables: one line per field (key, member, codec);
//   3. the flag table: one line per command-line flag (flag, YAML path);
//   4. eviction: the KubeletConfiguration-named top-level keys;
//   5. validation across fields.
// Flags are applied by writing them into the YAML tree before it is decoded,
// so a flag and a file key share one parser and one set of error messages;
// errors name the flag when the value came from one.

#include "config/load.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "config/quantity.hpp"
#include "config/yaml_guard.hpp"
#include "kernel/file.hpp"
#include "pressured/listen_address.hpp"

namespace pressured {
namespace {

using YAML::Node;

// ---------------------------------------------------------------------------
// Parse context: where values came from (for error messages) and warnings.

// A configuration file is a few KiB; a bound keeps a hostile or broken one
// (a huge file, a device) from costing the daemon its memory.
constexpr std::size_t kMaxConfigFileBytes = 1u << 20;

struct Ctx {
  std::map<std::string, std::string> origin;  // YAML path -> flag it came from
  std::vector<std::string> warnings;

  // "cgroup.cgroupRoot" or "cgroup.cgroupRoot (--cgroup-root)".
  std::string where(const std::string& origin_key, const std::string& path) const {
    auto it = origin.find(origin_key);
    return it == origin.end() ? path : path + " (" + it->second + ")";
  }
};

std::string scalar_text(const Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsNull()) return "null";
  if (n.IsSequence()) return "a list";
  return "a mapping";
}

Error field_error(const std::string& where, const std::string& message) {
  return Error{EINVAL, where + ": " + message};
}

Error value_error(const std::string& where, const Node& n, const std::string& why) {
  std::string shown = n.IsScalar() ? "'" + n.Scalar() + "'" : scalar_text(n);
  return field_error(where, shown + " " + why);
}

// ---------------------------------------------------------------------------
// 1. Codecs. Each decodes one YAML node (already known to exist) or encodes a
// value back into a node for dump_config().

Result<std::string> decode_string(const Node& n, const std::string& where) {
  if (!n.IsScalar()) return value_error(where, n, "is not a string");
  return n.Scalar();
}

Result<bool> decode_bool(const Node& n, const std::string& where) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  return value_error(where, n, "is not a boolean (true or false)");
}

constexpr Duration kMaxConfigDuration = std::chrono::hours(100000);

Result<Duration> decode_duration(const Node& n, const std::string& where) {
  if (!n.IsScalar()) return value_error(where, n, "is not a duration");
  auto d = parse_duration(n.Scalar());
  if (!d) return field_error(where, d.error().message);
  if (d->count() < 0) return value_error(where, n, "is negative; durations must not be negative");
  // Deadlines are now + duration on a nanosecond clock: past ~11 years that
  // sum is one step from overflowing. Nothing in pressured waits that long.
  if (*d > kMaxConfigDuration) {
    return value_error(where, n, "is too long (at most " + format_duration(kMaxConfigDuration) + ")");
  }
  return *d;
}

Result<uint64_t> decode_count(const Node& n, const std::string& where, uint64_t max) {
  if (!n.IsScalar()) return value_error(where, n, "is not a quantity");
  // Plain digits are read exactly: through a double, 18446744073709551615
  // became 2^64 and was refused as larger than itself.
  std::string_view digits = n.Scalar();
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec == std::errc() && p == digits.data() + digits.size() && v <= max) return v;
    return value_error(where, n, "is too large (at most " + std::to_string(max) + ")");
  }
  auto q = parse_quantity(n.Scalar());
  if (!q) return field_error(where, q.error().message);
  if (*q < 0) return value_error(where, n, "is negative");
  if (*q != std::floor(*q)) return value_error(where, n, "is not a whole number");
  // static_cast<double>(UINT64_MAX) rounds up to 2^64, which would pass the
  // comparison and then wrap to 0 in the cast (16Ei printed as 0).
  if (*q >= 18446744073709551616.0 || *q > static_cast<double>(max)) {
    return value_error(where, n, "is too large (at most " + std::to_string(max) + ")");
  }
  return static_cast<uint64_t>(*q);
}

// A count as text that reads back as the same count: past 2^53 a double
// (format_quantity) no longer holds every integer, and UINT64_MAX printed as
// 16Ei, which is refused.
std::string format_count(uint64_t v) {
  if (v < (uint64_t{1} << 53)) return format_quantity(static_cast<double>(v));
  return std::to_string(v);
}

template <typename S>
struct Field {
  std::string key;
  std::function<Result<void>(const Node&, S&, const std::string& where)> decode;
  std::function<Node(const S&)> encode;
};

template <typename S>
Field<S> string_field(std::string key, std::string S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            auto v = decode_string(n, w);
            if (!v) return v.error();
            s.*m = *v;
            return {};
          },
          [m](const S& s) { return Node(s.*m); }};
}

template <typename S>
Field<S> bool_field(std::string key, bool S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            auto v = decode_bool(n, w);
            if (!v) return v.error();
            s.*m = *v;
            return {};
          },
          [m](const S& s) { return Node(s.*m); }};
}

template <typename S>
Field<S> duration_field(std::string key, Duration S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            auto v = decode_duration(n, w);
            if (!v) return v.error();
            s.*m = *v;
            return {};
          },
          [m](const S& s) { return Node(format_duration(s.*m)); }};
}

// null or "" means "not set".
template <typename S>
Field<S> optional_duration_field(std::string key, std::optional<Duration> S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            if (n.IsNull() || (n.IsScalar() && n.Scalar().empty())) {
              s.*m = std::nullopt;
              return {};
            }
            auto v = decode_duration(n, w);
            if (!v) return v.error();
            s.*m = *v;
            return {};
          },
          [m](const S& s) { return (s.*m) ? Node(format_duration(*(s.*m))) : Node(YAML::NodeType::Null); }};
}

// Whole numbers, Kubernetes quantity syntax allowed ("256Ki").
template <typename S, typename U>
Field<S> count_field(std::string key, U S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            auto v = decode_count(n, w, std::numeric_limits<U>::max());
            if (!v) return v.error();
            s.*m = static_cast<U>(*v);
            return {};
          },
          [m](const S& s) { return Node(format_count(static_cast<uint64_t>(s.*m))); }};
}

template <typename S, typename U>
Field<S> optional_count_field(std::string key, std::optional<U> S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            if (n.IsNull() || (n.IsScalar() && n.Scalar().empty())) {
              s.*m = std::nullopt;
              return {};
            }
            auto v = decode_count(n, w, std::numeric_limits<U>::max());
            if (!v) return v.error();
            s.*m = static_cast<U>(*v);
            return {};
          },
          [m](const S& s) {
            return (s.*m) ? Node(format_count(static_cast<uint64_t>(*(s.*m)))) : Node(YAML::NodeType::Null);
          }};
}

// A plain number ("12.5"); the range is checked in validate_config().
template <typename S>
Field<S> number_field(std::string key, double S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            double v = 0;
            if (n.IsScalar()) {
              const std::string& t = n.Scalar();
              auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
              if (!t.empty() && ec == std::errc() && p == t.data() + t.size() && std::isfinite(v)) {
                s.*m = v;
                return {};
              }
            }
            return value_error(w, n, "is not a number");
          },
          [m](const S& s) { return Node(format_quantity(s.*m)); }};
}

// A signed whole number ("-10"); the range is checked in validate_config().
template <typename S>
Field<S> int_field(std::string key, int S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            int v = 0;
            if (n.IsScalar()) {
              const std::string& t = n.Scalar();
              const char* b = t.data() + (!t.empty() && t[0] == '+' ? 1 : 0);
              auto [p, ec] = std::from_chars(b, t.data() + t.size(), v);
              if (b != t.data() + t.size() && ec == std::errc() && p == t.data() + t.size()) {
                s.*m = v;
                return {};
              }
            }
            return value_error(w, n, "is not a whole number");
          },
          [m](const S& s) { return Node(s.*m); }};
}

template <typename E>
using EnumNames = std::vector<std::pair<std::string, E>>;

template <typename E>
std::string enum_choices(const EnumNames<E>& names) {
  std::string out;
  for (const auto& [n, v] : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

template <typename S, typename E>
Field<S> enum_field(std::string key, E S::*m, EnumNames<E> names) {
  return {std::move(key),
          [m, names](const Node& n, S& s, const std::string& w) -> Result<void> {
            if (n.IsScalar()) {
              for (const auto& [text, value] : names) {
                if (text == n.Scalar()) {
                  s.*m = value;
                  return {};
                }
              }
            }
            return value_error(w, n, "is not one of " + enum_choices(names));
          },
          [m, names](const S& s) {
            for (const auto& [text, value] : names) {
              if (value == s.*m) return Node(text);
            }
            return Node("?");
          }};
}

template <typename S>
Field<S> string_list_field(std::string key, std::vector<std::string> S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            if (n.IsNull()) {
              (s.*m).clear();
              return {};
            }
            if (!n.IsSequence()) return value_error(w, n, "is not a list of strings");
            std::vector<std::string> out;
            for (std::size_t i = 0; i < n.size(); ++i) {
              auto v = decode_string(n[i], w + "[" + std::to_string(i) + "]");
              if (!v) return v.error();
              out.push_back(*v);
            }
            s.*m = std::move(out);
            return {};
          },
          [m](const S& s) {
            Node list(YAML::NodeType::Sequence);
            for (const auto& v : s.*m) list.push_back(v);
            return list;
          }};
}

// ---------------------------------------------------------------------------
// 2. Section tables: one YAML mapping per Config section, one line per field.

template <typename E, std::size_t N>
EnumNames<E> from_table(const EnumName<E> (&table)[N]) {
  EnumNames<E> out;
  for (const auto& e : table) out.emplace_back(std::string(e.name), e.value);
  return out;
}

const EnumNames<CgroupDriver> kDrivers = from_table(kCgroupDriverNames);
const EnumNames<MemoryAvailableMode> kMemoryModes{{"kubelet", MemoryAvailableMode::Kubelet},
                                                  {"excludeReserved", MemoryAvailableMode::ExcludeReserved},
                                                  {"reclaimableActive", MemoryAvailableMode::ReclaimableActive}};
const EnumNames<PodSourceKind> kPodSources{
    {"none", PodSourceKind::None},
    {"kubelet", PodSourceKind::Kubelet},
    {"file", PodSourceKind::File},
    {"apiserver", PodSourceKind::ApiServer}};
const EnumNames<BpfMode> kBpfModes{{"auto", BpfMode::Auto}, {"on", BpfMode::On}, {"off", BpfMode::Off}};
const EnumNames<DaemonSetPolicy> kDaemonSetPolicies{
    {"evictLast", DaemonSetPolicy::EvictLast}, {"normal", DaemonSetPolicy::Normal}, {"never", DaemonSetPolicy::Never}};
const EnumNames<Ranking> kRankings{{"qosFirst", Ranking::QosFirst}, {"kubelet", Ranking::Kubelet}};
const EnumNames<KubeletConfigMissing> kKubeletMissing{{"error", KubeletConfigMissing::Error},
                                                      {"kubeletDefaults", KubeletConfigMissing::KubeletDefaults}};

struct Section {
  std::string name;
  std::vector<Field<Config>> fields;
};

// Lifts a sub-struct's fields onto Config through an accessor.
template <typename S>
Section section(std::string name, S& (*get)(Config&), std::vector<Field<S>> fields) {
  Section out{std::move(name), {}};
  for (auto& f : fields) {
    out.fields.push_back(Field<Config>{
        f.key,
        [get, d = f.decode](const Node& n, Config& c, const std::string& w) { return d(n, get(c), w); },
        // encode only reads; the accessor is shared with decode, hence the cast.
        [get, e = f.encode](const Config& c) { return e(get(const_cast<Config&>(c))); }});
  }
  return out;
}

ObserveConfig& observe_of(Config& c) { return c.observe; }
PodSourceConfig& pods_of(Config& c) { return c.observe.pods; }
EventsConfig& events_of(Config& c) { return c.events; }
K8sConfig& k8s_of(Config& c) { return c.kubernetes; }
MetricsConfig& metrics_of(Config& c) { return c.metrics; }
LogConfig& log_of(Config& c) { return c.log; }
DaemonConfig& daemon_of(Config& c) { return c.daemon; }
KubeletConfigSource& kubelet_of(Config& c) { return c.kubelet; }
ReliefConfig& relief_of(Config& c) { return c.relief; }
PluginsConfig& plugins_of(Config& c) { return c.plugins; }

// kubelet.thresholdOffset: signal -> quantity or percentage added to the
// kubelet's threshold for that signal.
Field<KubeletConfigSource> offsets_field(std::string key) {
  return {std::move(key),
          [](const Node& n, KubeletConfigSource& s, const std::string& w) -> Result<void> {
            s.offsets.clear();
            if (n.IsNull()) return {};
            if (!n.IsMap()) return value_error(w, n, "is not a mapping of signal to quantity or percentage");
            for (auto it = n.begin(); it != n.end(); ++it) {
              const std::string sig_name = it->first.as<std::string>();
              // "kubelet.thresholdOffset.memory.available", with " (--flag)" after it when a flag set it.
              const std::size_t flag_at = w.find(" (");
              const std::string path = flag_at == std::string::npos
                                           ? w + "." + sig_name
                                           : w.substr(0, flag_at) + "." + sig_name + w.substr(flag_at);
              auto sig = parse_signal(sig_name);
              if (!sig) return field_error(path, "unknown signal '" + sig_name + "'");
              if (info(*sig).is_psi) return field_error(path, "is not a signal of the kubelet's configuration");
              if (!it->second.IsScalar()) return value_error(path, it->second, "is not a quantity or percentage");
              auto v = parse_threshold_value(it->second.Scalar());
              if (!v) return field_error(path, v.error().message);
              if (v->quantity < 0 || v->percent < 0) return value_error(path, it->second, "is negative");
              s.offsets[*sig] = *v;
            }
            return {};
          },
          [](const KubeletConfigSource& s) {
            Node m(YAML::NodeType::Map);
            for (const auto& [sig, v] : s.offsets) m[std::string(name(sig))] = format_threshold_value(v);
            return m;
          }};
}

const std::vector<Section>& sections() {
  static const std::vector<Section> kSections{
      section<ObserveConfig>("cgroup", observe_of,
                             {
                                 string_field("cgroupMount", &ObserveConfig::cgroup_mount),
                                 string_field("cgroupRoot", &ObserveConfig::cgroup_root),
                                 string_field("kubepodsName", &ObserveConfig::kubepods_name),
                                 enum_field("driver", &ObserveConfig::driver, kDrivers),
                                 string_field("procRoot", &ObserveConfig::proc_root),
                                 string_field("psiPath", &ObserveConfig::psi_path),
                                 string_field("nodefsPath", &ObserveConfig::nodefs_path),
                                 string_field("imagefsPath", &ObserveConfig::imagefs_path),
                                 string_field("podLogsPath", &ObserveConfig::pod_logs_path),
                                 enum_field("memoryAvailableMode", &ObserveConfig::memory_available_mode, kMemoryModes),
                                 optional_count_field("allocatableMemoryBytes", &ObserveConfig::allocatable_memory_bytes),
                                 duration_field("diskWalkInterval", &ObserveConfig::disk_walk_interval),
                                 string_field("mountinfoPath", &ObserveConfig::mountinfo_path),
                                 number_field("reclaimableActiveFilePercent", &ObserveConfig::reclaimable_active_file_percent),
                                 duration_field("diskWalkBudget", &ObserveConfig::disk_walk_budget),
                                 count_field("diskWalkMaxEntries", &ObserveConfig::disk_walk_max_entries),
                                 string_field("runtimeRoot", &ObserveConfig::runtime_root),
                             }),
      section<PodSourceConfig>("pods", pods_of,
                               {
                                   enum_field("kind", &PodSourceConfig::kind, kPodSources),
                                   string_field("path", &PodSourceConfig::path),
                                   string_field("kubeletUrl", &PodSourceConfig::kubelet_url),
                                   string_field("tokenFile", &PodSourceConfig::token_file),
                                   string_field("caFile", &PodSourceConfig::ca_file),
                                   bool_field("insecureSkipVerify", &PodSourceConfig::insecure_skip_verify),
                                   duration_field("refreshInterval", &PodSourceConfig::refresh_interval),
                                   duration_field("timeout", &PodSourceConfig::timeout),
                                   duration_field("watchTimeout", &PodSourceConfig::watch_timeout),
                               }),
      section<EventsConfig>("events", events_of,
                            {
                                enum_field("bpf", &EventsConfig::bpf, kBpfModes),
                                bool_field("psiTriggers", &EventsConfig::psi_triggers),
                                bool_field("memcgNotifications", &EventsConfig::memcg_notifications),
                                duration_field("safetyNetInterval", &EventsConfig::safety_net_interval),
                                optional_duration_field("fullObservationInterval", &EventsConfig::full_observation_interval),
                                optional_duration_field("forcedPollInterval", &EventsConfig::forced_poll_interval),
                                count_field("ringBufferBytes", &EventsConfig::ring_buffer_bytes),
                                count_field("chargeSampleEvery", &EventsConfig::charge_sample_every),
                                duration_field("psiWindow", &EventsConfig::psi_window),
                                duration_field("psiStall", &EventsConfig::psi_stall),
                                int_field("reactorNice", &EventsConfig::reactor_nice),
                                int_field("reactorRtPriority", &EventsConfig::reactor_rt_priority),
                            }),
      section<K8sConfig>("kubernetes", k8s_of,
                         {
                             bool_field("enabled", &K8sConfig::enabled),
                             string_field("kubeconfig", &K8sConfig::kubeconfig),
                             string_field("nodeName", &K8sConfig::node_name),
                             duration_field("requestTimeout", &K8sConfig::request_timeout),
                             string_field("conditionPrefix", &K8sConfig::condition_prefix),
                             bool_field("taintNodes", &K8sConfig::taint_nodes),
                             string_field("taintKeyPrefix", &K8sConfig::taint_key_prefix),
                         }),
      section<MetricsConfig>("metrics", metrics_of,
                             {
                                 string_field("listen", &MetricsConfig::listen),
                                 count_field("topPods", &MetricsConfig::top_pods),
                                 string_field("webConfigFile", &MetricsConfig::web_config_file),
                             }),
      section<LogConfig>("log", log_of,
                         {
                             string_field("level", &LogConfig::level),
                             string_field("format", &LogConfig::format),
                         }),
      section<KubeletConfigSource>("kubelet", kubelet_of,
                                   {
                                       string_field("configPath", &KubeletConfigSource::config_path),
                                       offsets_field("thresholdOffset"),
                                       enum_field("ifMissing", &KubeletConfigSource::if_missing, kKubeletMissing),
                                   }),
      section<DaemonConfig>("daemon", daemon_of,
                            {
                                bool_field("dryRun", &DaemonConfig::dry_run),
                                string_field("stateFile", &DaemonConfig::state_file),
                                string_list_field("diskReclaimCommand", &DaemonConfig::disk_reclaim_command),
                                duration_field("diskReclaimTimeout", &DaemonConfig::disk_reclaim_timeout),
                                duration_field("releaseWaitTimeout", &DaemonConfig::release_wait_timeout),
                                duration_field("softKillMargin", &DaemonConfig::soft_kill_margin),
                                duration_field("killTimeout", &DaemonConfig::kill_timeout),
                                bool_field("lockMemory", &DaemonConfig::lock_memory),
                                bool_field("releaseVictimMemory", &DaemonConfig::release_victim_memory),
                                bool_field("evictAheadOfRelease", &DaemonConfig::evict_ahead_of_release),
                                duration_field("releaseHorizon", &DaemonConfig::release_horizon),
                                duration_field("predictiveLead", &DaemonConfig::predictive_lead),
                            }),
      section<ReliefConfig>("relief", relief_of,
                            {
                                bool_field("enabled", &ReliefConfig::enabled),
                                duration_field("hardThresholdBudget", &ReliefConfig::hard_threshold_budget),
                                duration_field("backoff", &ReliefConfig::backoff),
                                duration_field("timeout", &ReliefConfig::timeout),
                                number_field("lowYieldPercent", &ReliefConfig::low_yield_percent),
                                count_field("minimumAsk", &ReliefConfig::minimum_ask_bytes),
                            }),
      section<PluginsConfig>("plugins", plugins_of,
                             {
                                 string_field("directory", &PluginsConfig::directory),
                                 duration_field("callTimeout", &PluginsConfig::call_timeout),
                                 duration_field("answerMaxAge", &PluginsConfig::answer_max_age),
                                 duration_field("proposalInterval", &PluginsConfig::proposal_interval),
                                 duration_field("backoffInitial", &PluginsConfig::backoff_initial),
                                 duration_field("backoffMax", &PluginsConfig::backoff_max),
                                 count_field("maxCandidates", &PluginsConfig::max_candidates),
                                 count_field("maxPlugins", &PluginsConfig::max_plugins),
                                 string_field("module", &PluginsConfig::module),
                             }),
  };
  return kSections;
}

// ---------------------------------------------------------------------------
// 3. The flag table. Scalar flags overwrite `section.key` in the YAML tree;
// the eviction flags use the kubelet's list syntax and replace the whole map.

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

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string known_signals() {
  std::string out;
  for (const auto& s : kSignals) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

// "memory.available<100Mi,nodefs.available<10%" or "memory.available=1m30s,...".
Result<Node> parse_flag_list(const FlagSpec& spec, const std::string& text) {
  Node map(YAML::NodeType::Map);
  std::set<std::string> seen;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::string stmt = trim(item);
    if (stmt.empty()) continue;
    std::size_t pos = spec.syntax == FlagSyntax::ThresholdList ? stmt.find_first_of("<>") : stmt.find('=');
    auto fail = [&](const std::string& why) {
      return Error{EINVAL, std::string(spec.flag) + ": '" + stmt + "' " + why};
    };
    if (pos == std::string::npos || pos == 0) {
      return fail(spec.syntax == FlagSyntax::ThresholdList ? "is not <signal><operator><quantity>, e.g. memory.available<100Mi"
                                                           : "is not <signal>=<value>, e.g. memory.available=1m30s");
    }
    std::string sig_name = trim(std::string_view(stmt).substr(0, pos));
    std::string value = trim(std::string_view(stmt).substr(pos + 1));
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

// ---------------------------------------------------------------------------
// 4. Eviction: the KubeletConfiguration-named top-level keys.

constexpr const char* kEvictionKeys[] = {
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

bool is_eviction_key(const std::string& k) {
  return std::any_of(std::begin(kEvictionKeys), std::end(kEvictionKeys), [&](const char* e) { return k == e; });
}

// A signal -> text map (evictionHard and friends), in signal order.
Result<std::map<Signal, std::string>> decode_signal_map(const Node& n, const std::string& key, const Ctx& ctx) {
  std::map<Signal, std::string> out;
  if (n.IsNull()) return out;
  if (!n.IsMap()) return value_error(ctx.where(key, key), n, "is not a mapping of signal to value");
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string sig_name = it->first.as<std::string>();
    auto sig = parse_signal(sig_name);
    if (!sig) {
      return field_error(ctx.where(key, key), "unknown signal '" + sig_name + "' (known: " + known_signals() + ")");
    }
    std::string path = key + "." + sig_name;
    if (!it->second.IsScalar()) return value_error(ctx.where(key, path), it->second, "is not a quantity");
    out[*sig] = it->second.Scalar();
  }
  return out;
}

// Checks a threshold value; nullopt means "ignored" (0% and 100%, as the kubelet).
Result<std::optional<ThresholdValue>> check_threshold(Signal sig, const std::string& text, const std::string& where,
                                                      Ctx& ctx) {
  auto v = parse_threshold_value(text);
  if (!v) return field_error(where, v.error().message);
  const bool psi = info(sig).is_psi;
  if (v->kind == ThresholdValue::Kind::Percent) {
    if (v->percent < 0) return field_error(where, "'" + text + "' is negative; thresholds must be positive");
    if (v->percent > 100) return field_error(where, "'" + text + "' is over 100%");
    if (v->percent == 0 || v->percent == 100) {
      ctx.warnings.push_back(where + ": '" + text + "' is ignored (0% and 100% thresholds have no effect, as in the kubelet)");
      return std::optional<ThresholdValue>{};
    }
    return std::optional<ThresholdValue>{*v};
  }
  if (v->quantity <= 0) return field_error(where, "'" + text + "' must be positive");
  if (psi && v->quantity >= 100) {
    if (v->quantity > 100) return field_error(where, "'" + text + "' is over 100; PSI thresholds are a stall percentage 0-100");
    ctx.warnings.push_back(where + ": '" + text + "' is ignored (a PSI average never exceeds 100)");
    return std::optional<ThresholdValue>{};
  }
  return std::optional<ThresholdValue>{*v};
}

Result<ThresholdValue> check_min_reclaim(Signal sig, const std::string& text, const std::string& where) {
  auto v = parse_threshold_value(text);
  if (!v) return field_error(where, v.error().message);
  if (v->kind == ThresholdValue::Kind::Percent) {
    if (v->percent < 0) return field_error(where, "'" + text + "' is negative");
    if (v->percent > 100) return field_error(where, "'" + text + "' is over 100%");
  } else {
    if (v->quantity < 0) return field_error(where, "'" + text + "' is negative");
    if (info(sig).is_psi && v->quantity > 100) return field_error(where, "'" + text + "' is over 100 (PSI is a percentage)");
  }
  return *v;
}

// Whole seconds. `allow_negative`: the kubelet's evictionMaxPodGracePeriod
// is an int32 and takes any of its values (a negative one means 1 s).
Result<int64_t> decode_seconds(const Node& n, const std::string& where, bool allow_negative = false) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    int32_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range) {
      return value_error(where, n, "is outside the 32-bit range the kubelet's field has");
    }
    if (ec == std::errc() && p == s.data() + s.size() && !s.empty()) {
      if (v < 0 && !allow_negative) return value_error(where, n, "is negative; use 0 for none");
      return v;
    }
  }
  return value_error(where, n, "is not a whole number of seconds");
}

// containerfs.* values are checked like any other, then dropped: the
// kubelet (1.29+) overrides them with thresholds derived from nodefs or
// imagefs and logs an error (eviction/helpers.go, UpdateContainerFsThresholds);
// pressured derives them the same way once the layout is known.
void ignore_containerfs(const std::string& path, Ctx& ctx) {
  ctx.warnings.push_back(path +
                         ": is ignored; as in the kubelet, containerfs thresholds are derived: from the nodefs ones, "
                         "or from the imagefs ones when the writable layers share the imagefs; set those instead "
                         "(docs/engine.md, \"containerfs\")");
}

Result<void> decode_eviction(const std::map<std::string, Node>& keys, EvictionConfig& ev, Ctx& ctx) {
  auto get = [&](const char* k) -> const Node* {
    auto it = keys.find(k);
    return it == keys.end() ? nullptr : &it->second;
  };
  if (const Node* n = get("mergeDefaultEvictionSettings")) {
    auto v = decode_bool(*n, ctx.where("mergeDefaultEvictionSettings", "mergeDefaultEvictionSettings"));
    if (!v) return v.error();
    ev.merge_default_eviction_settings = *v;
  }
  if (const Node* n = get("daemonSetPods")) {
    bool found = false;
    for (const auto& [text, value] : kDaemonSetPolicies) {
      if (n->IsScalar() && n->Scalar() == text) {
        ev.daemonset_pods = value;
        found = true;
      }
    }
    if (!found) return value_error("daemonSetPods", *n, "is not one of " + enum_choices(kDaemonSetPolicies));
  }
  if (const Node* n = get("ranking")) {
    bool found = false;
    for (const auto& [text, value] : kRankings) {
      if (n->IsScalar() && n->Scalar() == text) {
        ev.ranking = value;
        found = true;
      }
    }
    if (!found) return value_error("ranking", *n, "is not one of " + enum_choices(kRankings));
  }
  if (const Node* n = get("featureGates")) {
    // The KubeletConfiguration's featureGates, for the one gate pressured
    // has an equivalent of; any other gate is an error (as the kubelet's
    // "unrecognized feature gate"), never silently ignored.
    if (!n->IsNull() && !n->IsMap()) return value_error("featureGates", *n, "is not a mapping of gate name to boolean");
    if (n->IsMap()) {
      for (auto it = n->begin(); it != n->end(); ++it) {
        const std::string gate = it->first.as<std::string>();
        const std::string path = "featureGates." + gate;
        if (gate != "LocalStorageCapacityIsolation") {
          return field_error(path, "unrecognized feature gate (known: LocalStorageCapacityIsolation)");
        }
        auto v = decode_bool(it->second, ctx.where(path, path));
        if (!v) return v.error();
        ev.local_storage_capacity_isolation = *v;
      }
    }
  }
  // A KubeletConfiguration field since the gate went GA (1.25): the same
  // switch as featureGates.LocalStorageCapacityIsolation, kept for old files.
  if (const Node* n = get("localStorageCapacityIsolation")) {
    auto v = decode_bool(*n, ctx.where("localStorageCapacityIsolation", "localStorageCapacityIsolation"));
    if (!v) return v.error();
    if (const Node* g = get("featureGates"); g != nullptr && g->IsMap() && (*g)["LocalStorageCapacityIsolation"]) {
      if (ev.local_storage_capacity_isolation != *v) {
        return field_error("localStorageCapacityIsolation",
                           "disagrees with featureGates.LocalStorageCapacityIsolation; keep one of them");
      }
    }
    ev.local_storage_capacity_isolation = *v;
  }
  if (const Node* n = get("evictionMaxPodGracePeriod")) {
    auto v = decode_seconds(*n, ctx.where("evictionMaxPodGracePeriod", "evictionMaxPodGracePeriod"), true);
    if (!v) return v.error();
    ev.max_pod_grace_period_seconds = *v;
  }
  if (const Node* n = get("softEvictionGraceCeilingSeconds")) {
    auto v = decode_seconds(*n, ctx.where("softEvictionGraceCeilingSeconds", "softEvictionGraceCeilingSeconds"));
    if (!v) return v.error();
    ev.soft_grace_ceiling_seconds = *v;
  }
  if (const Node* n = get("evictionPressureTransitionPeriod")) {
    auto v = decode_duration(*n, ctx.where("evictionPressureTransitionPeriod", "evictionPressureTransitionPeriod"));
    if (!v) return v.error();
    ev.pressure_transition_period = *v;
  }

  std::map<Signal, std::string> hard, soft, grace, reclaim;
  const Node null_node(YAML::NodeType::Null);
  struct MapKey {
    const char* key;
    std::map<Signal, std::string>* out;
  };
  for (auto [key, out] : {MapKey{"evictionHard", &hard}, MapKey{"evictionSoft", &soft},
                          MapKey{"evictionSoftGracePeriod", &grace}, MapKey{"evictionMinimumReclaim", &reclaim}}) {
    if (const Node* n = get(key)) {
      auto m = decode_signal_map(*n, key, ctx);
      if (!m) return m.error();
      *out = std::move(*m);
    }
  }

  // Kubelet defaults: used when evictionHard is not set at all; setting any
  // entry drops the others unless mergeDefaultEvictionSettings is true.
  std::vector<Threshold> defaults = default_hard_thresholds();
  // null is unset, as for the kubelet (`evictionHard:` with no value);
  // `evictionHard: {}` is set, and empty.
  const bool hard_given = get("evictionHard") != nullptr && !get("evictionHard")->IsNull();

  // Minimum reclaim per signal.
  std::map<Signal, ThresholdValue> reclaim_values;
  for (const auto& [sig, text] : reclaim) {
    std::string path = "evictionMinimumReclaim." + std::string(name(sig));
    auto v = check_min_reclaim(sig, text, ctx.where("evictionMinimumReclaim", path));
    if (!v) return v.error();
    reclaim_values[sig] = *v;
  }

  std::vector<Threshold> out;
  std::set<Signal> hard_signals, soft_signals, soft_ignored;
  for (const auto& [sig, text] : hard) {
    std::string path = "evictionHard." + std::string(name(sig));
    auto v = check_threshold(sig, text, ctx.where("evictionHard", path), ctx);
    if (!v) return v.error();
    if (!*v) continue;
    if (is_containerfs(sig)) {
      ignore_containerfs(path, ctx);
      continue;
    }
    Threshold t;
    t.signal = sig;
    t.kind = ThresholdKind::Hard;
    t.value = **v;
    out.push_back(t);
    hard_signals.insert(sig);
  }
  if (!hard_given || ev.merge_default_eviction_settings) {
    for (const auto& d : defaults) {
      if (!hard.count(d.signal)) {
        out.push_back(d);
        hard_signals.insert(d.signal);
      }
    }
  }
  for (const auto& [sig, text] : soft) {
    std::string path = "evictionSoft." + std::string(name(sig));
    auto v = check_threshold(sig, text, ctx.where("evictionSoft", path), ctx);
    if (!v) return v.error();
    if (!*v) {
      soft_ignored.insert(sig);
      continue;
    }
    auto g = grace.find(sig);
    if (g == grace.end()) {
      return field_error(ctx.where("evictionSoft", path),
                         "'" + text + "' has no grace period; set evictionSoftGracePeriod." + std::string(name(sig)) +
                             " (the kubelet refuses to start without one)");
    }
    std::string gpath = "evictionSoftGracePeriod." + std::string(name(sig));
    auto d = parse_duration(g->second);
    if (!d) return field_error(ctx.where("evictionSoftGracePeriod", gpath), d.error().message);
    if (d->count() < 0) {
      return field_error(ctx.where("evictionSoftGracePeriod", gpath),
                         "'" + g->second + "' is negative; durations must not be negative");
    }
    if (is_containerfs(sig)) {
      ignore_containerfs(path, ctx);
      continue;
    }
    Threshold t;
    t.signal = sig;
    t.kind = ThresholdKind::Soft;
    t.value = **v;
    t.grace_period = *d;
    out.push_back(t);
    soft_signals.insert(sig);
  }
  for (const auto& [sig, text] : grace) {
    if (soft.count(sig)) continue;
    std::string gpath = "evictionSoftGracePeriod." + std::string(name(sig));
    std::string why = "'" + text + "' is a grace period for a signal with no soft threshold (evictionSoft." +
                      std::string(name(sig)) + ")";
    if (auto o = ctx.origin.find("evictionSoft"); o != ctx.origin.end() && !ctx.origin.count("evictionSoftGracePeriod")) {
      why += "; " + o->second + " replaced the file's evictionSoft, give --eviction-soft-grace-period too";
    }
    return field_error(ctx.where("evictionSoftGracePeriod", gpath), why);
  }
  for (const auto& [sig, value] : reclaim_values) {
    if (is_containerfs(sig)) {
      ignore_containerfs("evictionMinimumReclaim." + std::string(name(sig)), ctx);
      continue;
    }
    if (!hard_signals.count(sig) && !soft_signals.count(sig)) {
      ctx.warnings.push_back("evictionMinimumReclaim." + std::string(name(sig)) +
                             ": no threshold is set for this signal; the minimum reclaim has no effect");
    }
  }
  for (auto& t : out) {
    auto r = reclaim_values.find(t.signal);
    if (r != reclaim_values.end()) t.min_reclaim = r->second;
    if (info(t.signal).resource == StarvedResource::None) {
      ctx.warnings.push_back(std::string(name(t.signal)) +
                             ": no per-pod usage ranks pods for this signal; it sets its node condition but never evicts");
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Threshold& a, const Threshold& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.signal < b.signal;
  });
  ev.thresholds = std::move(out);
  return {};
}

// ---------------------------------------------------------------------------
// 5. Validation across fields.

Error invalid(const std::string& where, const std::string& value, const std::string& why) {
  return Error{EINVAL, where + ": '" + value + "' " + why};
}

Result<void> require_positive(Duration d, const char* where) {
  if (d.count() <= 0) return invalid(where, format_duration(d), "must be positive");
  return {};
}

std::string threshold_path(const Threshold& t) {
  return std::string(t.kind == ThresholdKind::Hard ? "evictionHard." : "evictionSoft.") + std::string(name(t.signal));
}

Result<Config> parse_tree(Node root, const std::string& source, const ConfigOptions& o,
                          std::vector<std::string>* warnings, const std::string* kubelet_text);

Result<std::string> read_config_file(const std::string& path);
bool no_content(std::string_view text);

// The KubeletConfiguration fields pressured takes from the node's kubelet
// (kubelet.config.k8s.io/v1beta1, as written today).
constexpr const char* kKubeletEvictionKeys[] = {
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

bool is_kubelet_eviction_key(const std::string& k) {
  return std::any_of(std::begin(kKubeletEvictionKeys), std::end(kKubeletEvictionKeys),
                     [&](const char* e) { return k == e; });
}

// `threshold + offset`, both of one kind (a quantity cannot be added to a
// percentage without the capacity, which is only known at run time).
Result<ThresholdValue> add_offset(const ThresholdValue& t, const ThresholdValue& off, const std::string& where) {
  if (t.kind != off.kind) {
    return field_error(where, "the kubelet's threshold '" + format_threshold_value(t) + "' and the offset '" +
                                  format_threshold_value(off) +
                                  "' are not of one kind (quantity, percentage); give the offset as the threshold is");
  }
  ThresholdValue v = t;
  if (v.kind == ThresholdValue::Kind::Percent) {
    v.percent += off.percent;
    if (v.percent >= 100) return field_error(where, "the threshold plus its offset reaches 100%");
  } else {
    v.quantity += off.quantity;
  }
  return v;
}

// What enforceNodeAllocatable may hold (the kubelet refuses anything else).
constexpr const char* kEnforceNodeAllocatable[] = {"pods", "system-reserved", "kube-reserved",
                                                   "system-reserved-compressible", "kube-reserved-compressible",
                                                   "none"};

// The kubelet's enforceNodeAllocatable: true when it contains "pods". Unset
// (absent or null) is the kubelet's default, ["pods"]
// (pkg/kubelet/apis/config/v1beta1/defaults.go); an empty list is none.
Result<bool> enforces_pods(const Node& root, const std::string& path) {
  const Node n = root["enforceNodeAllocatable"];
  if (!n || n.IsNull()) return true;
  if (!n.IsSequence()) return value_error(path + ": enforceNodeAllocatable", n, "is not a list");
  bool pods = false;
  for (const auto& item : n) {
    if (!item.IsScalar() || std::none_of(std::begin(kEnforceNodeAllocatable), std::end(kEnforceNodeAllocatable),
                                         [&](const char* k) { return item.Scalar() == k; })) {
      std::string known;
      for (const char* k : kEnforceNodeAllocatable) known += std::string(known.empty() ? "" : ", ") + k;
      return value_error(path + ": enforceNodeAllocatable", item, "is not one of " + known);
    }
    pods = pods || item.Scalar() == "pods";
  }
  return pods;
}

// A KubeletConfiguration as the kubelet reads it: a mapping of kind
// KubeletConfiguration, apiVersion kubelet.config.k8s.io/v1beta1. A file
// caught mid-write by a tool rewriting it in place is a prefix of the real
// one and often still parses, so the text must also end with a line break
// (every writer ends its last line; a cut mid-line does not).
Result<Node> parse_kubelet_text(const std::string& text, const std::string& path) {
  if (no_content(text)) return Error{EINVAL, path + ": is empty (a write in progress?)"};
  if (text.back() != '\n') {
    return Error{EINVAL, path + ": does not end with a line break: it may be cut mid-write, so it is not taken"};
  }
  if (auto g = check_yaml(text); !g) return Error{EINVAL, path + ": " + g.error().message};
  Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error{EINVAL, path + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
  if (!root.IsMap()) return Error{EINVAL, path + ": is not a KubeletConfiguration (not a mapping)"};
  const Node kind = root["kind"], api = root["apiVersion"];
  if (!kind || !kind.IsScalar() || kind.Scalar() != "KubeletConfiguration" || !api || !api.IsScalar() ||
      api.Scalar() != "kubelet.config.k8s.io/v1beta1") {
    return Error{EINVAL, path + ": is not a KubeletConfiguration of apiVersion kubelet.config.k8s.io/v1beta1 (kind "
                             "and apiVersion must both be there: a file without them may be cut mid-write)"};
  }
  return root;
}

// The allocatableMemory.available threshold the kubelet derives: a copy of
// each hard memory.available threshold (value and minimum reclaim) when
// enforceNodeAllocatable contains pods (eviction/helpers.go,
// ParseThresholdConfig and addAllocatableThresholds, 1.6 through 1.36).
void add_allocatable_thresholds(EvictionConfig& ev, const std::string& path, Ctx& kctx) {
  std::vector<Threshold> copies;
  for (const auto& t : ev.thresholds) {
    if (t.signal != Signal::MemoryAvailable || t.kind != ThresholdKind::Hard) continue;
    Threshold a = t;
    a.signal = Signal::AllocatableMemoryAvailable;
    copies.push_back(a);
  }
  for (const auto& copy : copies) {
    auto own = std::find_if(ev.thresholds.begin(), ev.thresholds.end(), [](const Threshold& t) {
      return t.signal == Signal::AllocatableMemoryAvailable && t.kind == ThresholdKind::Hard;
    });
    if (own == ev.thresholds.end()) {
      ev.thresholds.push_back(copy);
      continue;
    }
    // The file names allocatableMemory.available itself: the kubelet then
    // holds two thresholds on the signal and the higher one is met first.
    if (own->value.kind == copy.value.kind) {
      const bool copy_higher = copy.value.kind == ThresholdValue::Kind::Percent
                                   ? copy.value.percent > own->value.percent
                                   : copy.value.quantity > own->value.quantity;
      if (copy_higher) own->value = copy.value;
    } else {
      kctx.warnings.push_back("evictionHard.allocatableMemory.available: set in " + path +
                              " as well as derived from memory.available in another unit (quantity, percentage); "
                              "pressured keeps the one set, the kubelet watches both");
    }
  }
}

// Replaces the eviction settings with the ones the kubelet derives from its
// KubeletConfiguration (`text`, read from kubelet.configPath; nullopt: the
// file does not exist and kubelet.ifMissing says to take the defaults),
// raised by kubelet.thresholdOffset. The kubelet's other fields are its
// business and are not read; an unknown field whose name starts with
// "eviction" is an error (a typo would silently drop a threshold).
// pressured's own eviction keys (daemonSetPods, ranking,
// softEvictionGraceCeilingSeconds) stay; setting a kubelet-owned one here too
// is an error rather than a silent precedence.
Result<void> apply_kubelet_config(Config& cfg, const std::map<std::string, Node>& own_keys, Ctx& ctx,
                                  const std::optional<std::string>& text) {
  const std::string& path = cfg.kubelet.config_path;
  const std::string via = ctx.where("kubelet.configPath", "kubelet.configPath");
  // PSI thresholds are pressured's own (the kubelet has no such signal):
  // they stay in pressured's file beside the kubelet's settings.
  auto psi_only = [](const Node& n) {
    if (!n.IsMap()) return false;
    for (auto it = n.begin(); it != n.end(); ++it) {
      auto sig = parse_signal(it->first.as<std::string>());
      if (!sig || !info(*sig).is_psi) return false;
    }
    return true;
  };
  for (const auto& [k, n] : own_keys) {
    const bool thresholds = k == "evictionHard" || k == "evictionSoft" || k == "evictionSoftGracePeriod";
    if (is_kubelet_eviction_key(k) && !(thresholds && psi_only(n))) {
      return field_error(ctx.where(k, k), "is taken from the kubelet's configuration " + path + " (" + via +
                                              "); remove it here (kubelet.thresholdOffset raises thresholds; "
                                              "only PSI thresholds stay in pressured's file)");
    }
  }
  std::vector<Threshold> own_psi;
  for (const auto& t : cfg.eviction.thresholds) {
    if (info(t.signal).is_psi) own_psi.push_back(t);
  }
  // A node without the file (kubelet.ifMissing: kubeletDefaults): its
  // kubelet runs with the defaults unless its flags say otherwise, which
  // pressured cannot see; said at every load (start, each reload).
  const bool missing = !text.has_value();
  if (missing) {
    ctx.warnings.push_back(via + ": " + path +
                           " does not exist on this node: taking the kubelet's default eviction settings "
                           "(kubelet.ifMissing: kubeletDefaults); a kubelet configured by flags is not seen");
  }
  Node root(YAML::NodeType::Map);
  if (!missing) {
    auto parsed = parse_kubelet_text(*text, path);
    if (!parsed) return parsed.error();
    root = *parsed;
  }
  // A field given as null is unset, as for the kubelet's decoder: its
  // default applies (`evictionHard:` with no value is the default hard
  // thresholds, `evictionHard: {}` none).
  std::map<std::string, Node> keys;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    if (is_kubelet_eviction_key(k)) {
      if (!it->second.IsNull()) keys[k] = it->second;
    } else if (k.rfind("eviction", 0) == 0) {
      std::string known;
      for (const char* e : kKubeletEvictionKeys) known += std::string(known.empty() ? "" : ", ") + e;
      return Error{EINVAL, path + ": " + k + ": unknown eviction field (known: " + known + ")"};
    }
  }
  auto pods_enforced = enforces_pods(root, path);
  if (!pods_enforced) return pods_enforced.error();
  // The kubelet has many feature gates; pressured has an equivalent of one.
  if (auto it = keys.find("featureGates"); it != keys.end()) {
    Node gates(YAML::NodeType::Map);
    if (it->second.IsMap() && it->second["LocalStorageCapacityIsolation"]) {
      gates["LocalStorageCapacityIsolation"] = it->second["LocalStorageCapacityIsolation"];
    }
    it->second = gates;
  }
  EvictionConfig ev;
  ev.daemonset_pods = cfg.eviction.daemonset_pods;
  ev.ranking = cfg.eviction.ranking;
  ev.soft_grace_ceiling_seconds = cfg.eviction.soft_grace_ceiling_seconds;
  Ctx kctx;
  if (auto r = decode_eviction(keys, ev, kctx); !r) return Error{EINVAL, path + ": " + r.error().message};
  const std::string from = "kubelet configuration " + path;
  const std::string kubelet_default = missing ? "the kubelet's default (" + path + " does not exist)"
                                              : "the kubelet's default, as " + path + " leaves it";
  // v1beta1 defaulting: a zero evictionPressureTransitionPeriod is unset.
  bool transition_defaulted = false;
  if (keys.count("evictionPressureTransitionPeriod") && ev.pressure_transition_period.count() == 0) {
    ev.pressure_transition_period = std::chrono::minutes(5);
    transition_defaulted = true;
  }
  if (*pods_enforced) add_allocatable_thresholds(ev, path, kctx);
  const bool offset_flag = ctx.origin.count("kubelet.thresholdOffset") != 0;
  const std::string offset_via = offset_flag ? ctx.origin.at("kubelet.thresholdOffset") : "kubelet.thresholdOffset";
  // The offset of a threshold: its signal's, and for the derived
  // allocatable threshold, memory.available's when it has none of its own
  // (it is the same threshold to the kubelet).
  auto offset_of = [&](Signal sig) -> const ThresholdValue* {
    if (auto it = cfg.kubelet.offsets.find(sig); it != cfg.kubelet.offsets.end()) return &it->second;
    if (sig == Signal::AllocatableMemoryAvailable && *pods_enforced) {
      if (auto it = cfg.kubelet.offsets.find(Signal::MemoryAvailable); it != cfg.kubelet.offsets.end()) {
        return &it->second;
      }
    }
    return nullptr;
  };
  // An offset for a signal the kubelet has no threshold of raises nothing:
  // said, not refused (one DaemonSet's offsets serve nodes whose kubelets
  // set different thresholds).
  for (const auto& [sig, off] : cfg.kubelet.offsets) {
    // A named copy: clang before 16 cannot capture a structured binding.
    const Signal offset_signal = sig;
    if (std::none_of(ev.thresholds.begin(), ev.thresholds.end(),
                     [offset_signal](const Threshold& t) { return t.signal == offset_signal; })) {
      ctx.warnings.push_back(ctx.where("kubelet.thresholdOffset", "kubelet.thresholdOffset." + std::string(name(sig))) +
                             ": raises nothing: the kubelet's configuration " + path +
                             (missing ? " (absent: its defaults)" : "") + " has no " + std::string(name(sig)) +
                             " threshold");
    }
  }
  for (auto& t : ev.thresholds) {
    const std::string where = threshold_path(t);
    std::string src = keys.count(t.kind == ThresholdKind::Hard ? "evictionHard" : "evictionSoft") != 0
                          ? from
                          : kubelet_default;
    if (t.signal == Signal::AllocatableMemoryAvailable && t.kind == ThresholdKind::Hard && *pods_enforced) {
      src = (keys.count("evictionHard") != 0 ? from + ": evictionHard.memory.available"
                                             : "the kubelet's default memory.available") +
            " copied, as enforceNodeAllocatable contains pods" +
            (root["enforceNodeAllocatable"] && !root["enforceNodeAllocatable"].IsNull() ? ""
                                                                                          : " (its default)");
    }
    if (const ThresholdValue* off = offset_of(t.signal)) {
      auto v = add_offset(t.value, *off, where + " (" + path + " + " + offset_via + " " +
                                             std::string(name(t.signal)) + ")");
      if (!v) return v.error();
      src += " (" + format_threshold_value(t.value) + ") + " + offset_via + " " + format_threshold_value(*off);
      t.value = *v;
    }
    cfg.sources[where] = src;
  }
  for (const char* k : kKubeletEvictionKeys) {
    const std::string key = k;
    if (key == "evictionHard" || key == "evictionSoft") continue;
    cfg.sources[key] = keys.count(key) ? from : kubelet_default;
  }
  if (transition_defaulted) {
    cfg.sources["evictionPressureTransitionPeriod"] =
        "the kubelet's default: " + path + " sets 0s, which the kubelet's defaulting takes as unset";
  }
  for (const auto& w : kctx.warnings) ctx.warnings.push_back(path + ": " + w);
  ev.thresholds.insert(ev.thresholds.end(), own_psi.begin(), own_psi.end());
  std::stable_sort(ev.thresholds.begin(), ev.thresholds.end(), [](const Threshold& a, const Threshold& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.signal < b.signal;
  });
  cfg.eviction = std::move(ev);
  return {};
}

// Where the settings of the file and flags came from.
void record_sources(Config& cfg, const Node& root, const std::string& source, const Ctx& ctx) {
  const std::string file = source == "config" ? "configuration text" : "file " + source;
  auto origin = [&](const std::string& key) {
    auto it = ctx.origin.find(key);
    return it == ctx.origin.end() ? file : "flag " + it->second;
  };
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (is_eviction_key(key)) {
      cfg.sources[key] = origin(key);
      if ((key == "evictionHard" || key == "evictionSoft") && it->second.IsMap()) {
        for (auto s = it->second.begin(); s != it->second.end(); ++s) {
          cfg.sources[key + "." + s->first.as<std::string>()] = origin(key);
        }
      }
    } else if (it->second.IsMap()) {
      for (auto f = it->second.begin(); f != it->second.end(); ++f) {
        const std::string path = key + "." + f->first.as<std::string>();
        cfg.sources[path] = origin(path);
      }
    }
  }
}

Result<Config> parse_impl(const std::string& text, const std::string& source, const ConfigOptions& o,
                          std::vector<std::string>* warnings, const std::string* kubelet_text = nullptr) {
  // Bounded (depth, aliases) and strict: a key given twice is an error, not
  // a silent last-wins.
  if (auto g = check_yaml(text); !g) return Error{EINVAL, source + ": " + g.error().message};
  Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error{EINVAL, source + ": line " + std::to_string(e.mark.line + 1) + ", column " +
                             std::to_string(e.mark.column + 1) + ": " + e.msg};
  }
  // Decoding only throws on shapes the checks above do not expect (a list
  // used as a key, ...): report it rather than crash.
  try {
    return parse_tree(root, source, o, warnings, kubelet_text);
  } catch (const YAML::Exception& e) {
    return Error{EINVAL, source + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
}

Result<Config> parse_tree(Node root, const std::string& source, const ConfigOptions& o,
                          std::vector<std::string>* warnings, const std::string* kubelet_text) {
  if (!root || root.IsNull()) root = Node(YAML::NodeType::Map);
  if (!root.IsMap()) return Error{EINVAL, source + ": the top level must be a mapping of keys to values"};

  Ctx ctx;
  if (auto r = apply_flags(root, o, ctx); !r) return r.error();

  Config cfg;
  std::map<std::string, Node> eviction_keys;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    if (is_eviction_key(key)) {
      eviction_keys[key] = it->second;
      continue;
    }
    const auto& secs = sections();
    auto sec = std::find_if(secs.begin(), secs.end(), [&](const Section& s) { return s.name == key; });
    if (sec == secs.end()) {
      std::string known;
      for (const char* k : kEvictionKeys) known += std::string(known.empty() ? "" : ", ") + k;
      for (const auto& s : secs) known += ", " + s.name;
      return Error{EINVAL, key + ": unknown key (known top-level keys: " + known + ")"};
    }
    if (it->second.IsNull()) continue;
    if (!it->second.IsMap()) return value_error(key, it->second, "is not a mapping");
    for (auto f = it->second.begin(); f != it->second.end(); ++f) {
      const std::string fkey = f->first.as<std::string>();
      const std::string path = key + "." + fkey;
      auto field = std::find_if(sec->fields.begin(), sec->fields.end(), [&](const auto& x) { return x.key == fkey; });
      if (field == sec->fields.end()) {
        std::string known;
        for (const auto& x : sec->fields) known += (known.empty() ? "" : ", ") + x.key;
        return Error{EINVAL, path + ": unknown key (known keys in " + key + ": " + known + ")"};
      }
      if (auto r = field->decode(f->second, cfg, ctx.where(path, path)); !r) return r.error();
    }
  }
  if (auto r = decode_eviction(eviction_keys, cfg.eviction, ctx); !r) return r.error();
  record_sources(cfg, root, source, ctx);
  if (!cfg.kubelet.config_path.empty()) {
    std::optional<std::string> text;
    if (kubelet_text != nullptr) {
      text = *kubelet_text;
    } else if (std::error_code ec; cfg.kubelet.if_missing != KubeletConfigMissing::KubeletDefaults ||
                                   std::filesystem::exists(cfg.kubelet.config_path, ec) || ec) {
      auto t = read_kubelet_config_file(cfg.kubelet.config_path);
      if (!t) return Error{t.error().code, ctx.where("kubelet.configPath", "kubelet.configPath") + ": " + t.error().message};
      text = std::move(*t);
    }
    if (auto r = apply_kubelet_config(cfg, eviction_keys, ctx, text); !r) return r.error();
  } else if (!cfg.kubelet.offsets.empty()) {
    return field_error(ctx.where("kubelet.thresholdOffset", "kubelet.thresholdOffset"),
                       "needs kubelet.configPath (--kubelet-config): it raises the kubelet's thresholds");
  }
  // pods.kind: apiserver talks to the same API server as the reporter.
  cfg.observe.pods.kubeconfig = cfg.kubernetes.kubeconfig;
  cfg.observe.pods.node_name = cfg.kubernetes.node_name;
  if (auto r = validate_config(cfg); !r) return r.error();

  for (auto& w : ctx.warnings) {
    if (warnings) {
      warnings->push_back(w);
    } else {
      spdlog::warn("config: {}", w);
    }
  }
  return cfg;
}

}  // namespace

std::vector<Threshold> default_hard_thresholds() {
  auto make = [](Signal s, ThresholdValue v) {
    Threshold t;
    t.signal = s;
    t.kind = ThresholdKind::Hard;
    t.value = v;
    return t;
  };
  auto pct = [](double p) { return ThresholdValue{ThresholdValue::Kind::Percent, 0, p}; };
  return {
      make(Signal::MemoryAvailable, ThresholdValue{ThresholdValue::Kind::Quantity, 100.0 * 1024 * 1024, 0}),
      make(Signal::NodefsAvailable, pct(10)),
      make(Signal::NodefsInodesFree, pct(5)),
      make(Signal::ImagefsAvailable, pct(15)),
      make(Signal::ImagefsInodesFree, pct(5)),
  };
}

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

Result<Config> parse_config_yaml(const std::string& text, const ConfigOptions& overrides,
                                 std::vector<std::string>* warnings) {
  return parse_impl(text, "config", overrides, warnings);
}

namespace {

Result<std::string> read_config_file(const std::string& path) {
  auto r = kernel::read_regular_file(path, kMaxConfigFileBytes);
  if (!r) return Error{r.error().code, "cannot read config file " + path + ": " + r.error().message};
  return std::move(r->text);
}

}  // namespace

Result<std::string> read_kubelet_config_file(const std::string& path, const std::function<void()>& between_reads) {
  auto first = kernel::read_regular_file(path, kMaxConfigFileBytes);
  if (!first) return first.error();
  if (between_reads) between_reads();
  auto second = kernel::read_regular_file(path, kMaxConfigFileBytes);
  if (!second) return second.error();
  if (!first->same_version(*second)) {
    return Error{EAGAIN, path + ": changed while being read (a write in progress?): not taken; the settings in force "
                                "stay until it reads the same twice"};
  }
  return std::move(first->text);
}

Result<Config> parse_config_yaml_with_kubelet(const std::string& text, const std::string& kubelet_text,
                                              std::vector<std::string>* warnings) {
  return parse_impl(text, "config", {}, warnings, &kubelet_text);
}

namespace {

// True when the text has no YAML content: blank lines and comments only.
bool no_content(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t eol = text.find('\n', i);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(i, eol - i);
    auto first = line.find_first_not_of(" \t\r");
    if (first != std::string_view::npos && line[first] != '#') return false;
    i = eol + 1;
  }
  return true;
}

Result<Config> load_text(const std::string& text, const ConfigOptions& options, std::vector<std::string>* warnings) {
  std::string source = options.config_path.empty() ? "config" : options.config_path;
  if (!options.config_path.empty() && no_content(text)) {
    return Error{EINVAL, "config file " + options.config_path +
                             " is empty: an empty file is never taken as the defaults (write '{}' for them)"};
  }
  auto r = parse_impl(text, source, options, warnings);
  if (!r && !options.config_path.empty() && r.error().message.rfind(source, 0) != 0) {
    return Error{r.error().code, options.config_path + ": " + r.error().message};
  }
  return r;
}

}  // namespace

bool ends_with_document_end(std::string_view text) {
  std::size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return false;
  std::size_t start = text.rfind('\n', end);
  start = start == std::string_view::npos ? 0 : start + 1;
  std::string_view last = text.substr(start, end + 1 - start);
  return last == "...";
}

Result<Config> load_config(const ConfigOptions& options, std::vector<std::string>* warnings) {
  std::string text;
  if (!options.config_path.empty()) {
    auto t = read_config_file(options.config_path);
    if (!t) return t.error();
    text = std::move(*t);
  }
  return load_text(text, options, warnings);
}

Result<Config> reload_config(const ConfigOptions& options, std::vector<std::string>* warnings) {
  if (options.config_path.empty()) return load_text("", options, warnings);  // flags only: nothing can be cut
  auto t = read_config_file(options.config_path);  // read once: check and parse the same bytes
  if (!t) return t.error();
  if (!no_content(*t) && !ends_with_document_end(*t)) {
    return Error{EINVAL, "config file " + options.config_path +
                             " does not end with the document end marker '...' on a line of its own: it may be "
                             "truncated (a write in progress), so it is not reloaded"};
  }
  return load_text(*t, options, warnings);
}

namespace {

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
      std::none_of(c.eviction.thresholds.begin(), c.eviction.thresholds.end(), [](const Threshold& t) {
        return t.kind == ThresholdKind::Hard &&
               (t.signal == Signal::MemoryAvailable || t.signal == Signal::AllocatableMemoryAvailable);
      })) {
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

namespace {

// The configuration as YAML nodes. With a kubelet configuration the eviction
// keys it owns are left out unless `kubelet_owned`: read back, the file would
// both name the kubelet's file and set them, which is refused.
Node dump_node(const Config& c, bool kubelet_owned) {
  Node root(YAML::NodeType::Map);
  const auto& ev = c.eviction;
  Node hard(YAML::NodeType::Map), soft(YAML::NodeType::Map), grace(YAML::NodeType::Map), reclaim(YAML::NodeType::Map);
  for (const auto& t : ev.thresholds) {
    const std::string sig(name(t.signal));
    if (t.kind == ThresholdKind::Hard) {
      hard[sig] = format_threshold_value(t.value);
    } else {
      soft[sig] = format_threshold_value(t.value);
      grace[sig] = format_duration(t.grace_period);
    }
    if (t.min_reclaim.quantity != 0 || t.min_reclaim.percent != 0) reclaim[sig] = format_threshold_value(t.min_reclaim);
  }
  root["evictionHard"] = hard;
  root["evictionSoft"] = soft;
  root["evictionSoftGracePeriod"] = grace;
  root["evictionMinimumReclaim"] = reclaim;
  root["evictionMaxPodGracePeriod"] = ev.max_pod_grace_period_seconds;
  root["softEvictionGraceCeilingSeconds"] = ev.soft_grace_ceiling_seconds;
  root["evictionPressureTransitionPeriod"] = format_duration(ev.pressure_transition_period);
  // The thresholds above are already the merged result.
  root["mergeDefaultEvictionSettings"] = false;
  for (const auto& [text, value] : kDaemonSetPolicies) {
    if (value == ev.daemonset_pods) root["daemonSetPods"] = text;
  }
  for (const auto& [text, value] : kRankings) {
    if (value == ev.ranking) root["ranking"] = text;
  }
  root["featureGates"]["LocalStorageCapacityIsolation"] = ev.local_storage_capacity_isolation;
  for (const auto& sec : sections()) {
    Node s(YAML::NodeType::Map);
    for (const auto& f : sec.fields) s[f.key] = f.encode(c);
    root[sec.name] = s;
  }
  if (!kubelet_owned && !c.kubelet.config_path.empty()) {
    for (const char* k : kKubeletEvictionKeys) root.remove(k);
    // pressured's own PSI thresholds stay (apply_kubelet_config keeps them).
    for (const auto& t : ev.thresholds) {
      if (!info(t.signal).is_psi) continue;
      const std::string sig(name(t.signal));
      if (t.kind == ThresholdKind::Hard) {
        root["evictionHard"][sig] = format_threshold_value(t.value);
      } else {
        root["evictionSoft"][sig] = format_threshold_value(t.value);
        root["evictionSoftGracePeriod"][sig] = format_duration(t.grace_period);
      }
    }
  }
  return root;
}

std::string inline_yaml(const Node& n) {
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << n;
  return out.c_str();
}

}  // namespace

std::string dump_config(const Config& c) {
  YAML::Emitter out;
  out << dump_node(c, false);
  return std::string(out.c_str()) + "\n";
}

std::string describe_sources(const Config& c) {
  auto source = [&](const std::string& path, const std::string& parent) -> std::string {
    if (auto it = c.sources.find(path); it != c.sources.end()) return it->second;
    // A threshold not named where its map was set is a default kept by
    // mergeDefaultEvictionSettings; other maps' entries come with the map.
    if (parent == "evictionHard" || parent == "evictionSoft") return "default";
    if (auto it = c.sources.find(parent); !parent.empty() && it != c.sources.end()) return it->second;
    return "default";
  };
  std::string out = "# Where each effective value came from:\n";
  auto line = [&](const std::string& path, const Node& v, const std::string& parent) {
    out += "#   " + path + ": " + inline_yaml(v) + "  <- " + source(path, parent) + "\n";
  };
  const Node root = dump_node(c, true);
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    const Node v = it->second;
    if (v.IsMap() && v.size() > 0) {
      for (auto f = v.begin(); f != v.end(); ++f) line(key + "." + f->first.as<std::string>(), f->second, key);
    } else {
      line(key, v, "");
    }
  }
  return out;
}

}  // namespace pressured
