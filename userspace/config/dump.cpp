// The dump: the effective configuration back as YAML in the config-file
// schema (check-config), encoded by the same codecs that decode it, and the
// source of each value.
#include <string>

#include "config/load_internal.hpp"
#include "pressured/signals.hpp"

namespace pressured {

using namespace config_detail;

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
