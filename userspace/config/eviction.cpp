// Eviction: the KubeletConfiguration-named top-level keys of pressured's file
// (evictionHard, evictionSoft, ...), decoded and checked as the kubelet does,
// with its default hard thresholds and their merging.
#include <algorithm>
#include <charconv>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/load_internal.hpp"
#include "pressured/signals.hpp"

namespace pressured::config_detail {

namespace {

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

}  // namespace

bool is_eviction_key(const std::string& k) {
  return std::any_of(std::begin(kEvictionKeys), std::end(kEvictionKeys), [&](const char* e) { return k == e; });
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
  sort_thresholds(out);
  ev.thresholds = std::move(out);
  return {};
}

void sort_thresholds(std::vector<Threshold>& thresholds) {
  std::stable_sort(thresholds.begin(), thresholds.end(), [](const Threshold& a, const Threshold& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.signal < b.signal;
  });
}

}  // namespace pressured::config_detail

namespace pressured {

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

}  // namespace pressured
