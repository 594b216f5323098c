// The schema: one YAML mapping per Config section, one line per field (key,
// member, codec: config/codecs.hpp). Adding a field to a section is one line
// in sections() below; dump_config() prints it with the same codec.
#include <string>
#include <utility>
#include <vector>

#include "config/load_internal.hpp"
#include "pressured/signals.hpp"

namespace pressured::config_detail {

const EnumNames<DaemonSetPolicy> kDaemonSetPolicies{
    {"evictLast", DaemonSetPolicy::EvictLast}, {"normal", DaemonSetPolicy::Normal}, {"never", DaemonSetPolicy::Never}};
const EnumNames<Ranking> kRankings{{"qosFirst", Ranking::QosFirst}, {"kubelet", Ranking::Kubelet}};

namespace {

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
const EnumNames<KubeletConfigMissing> kKubeletMissing{{"error", KubeletConfigMissing::Error},
                                                      {"kubeletDefaults", KubeletConfigMissing::KubeletDefaults}};

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

}  // namespace

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

}  // namespace pressured::config_detail
