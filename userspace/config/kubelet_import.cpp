// The kubelet configuration import: with kubelet.configPath set, the eviction
// settings are the ones the node's kubelet derives from its
// KubeletConfiguration (read safely: a regular file, bounded, read twice),
// raised by kubelet.thresholdOffset. See docs/configuration.md, "The
// kubelet's configuration".
#include <algorithm>
#include <chrono>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/load_internal.hpp"
#include "config/yaml_guard.hpp"
#include "kernel/file.hpp"
#include "pressured/signals.hpp"

namespace pressured::config_detail {

namespace {

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

}  // namespace

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
  sort_thresholds(ev.thresholds);
  cfg.eviction = std::move(ev);
  return {};
}

}  // namespace pressured::config_detail

namespace pressured {

using namespace config_detail;

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

}  // namespace pressured
