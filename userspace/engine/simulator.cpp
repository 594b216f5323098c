#include "engine/simulator.hpp"

#include <cmath>
#include <istream>
#include <ostream>
#include <set>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "config/quantity.hpp"
#include "engine/why.hpp"

namespace pressured {
namespace {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

Error err(const std::string& msg) { return Error{EINVAL, msg}; }

// Rejects keys outside `allowed`, naming the first unknown one.
Result<void> check_keys(const json& obj, std::initializer_list<std::string_view> allowed, const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
      std::string known;
      for (auto a : allowed) known += (known.empty() ? "" : ", ") + std::string(a);
      return err(where + "unknown key \"" + it.key() + "\" (expected " + known + ")");
    }
  }
  return {};
}

// A quantity given as a JSON number or a Kubernetes quantity string.
Result<double> quantity_of(const json& v, const std::string& where) {
  if (v.is_number()) {
    double d = v.get<double>();
    if (!std::isfinite(d)) return err(where + " is not a finite number");
    return d;
  }
  if (v.is_string()) {
    auto q = parse_quantity(v.get<std::string>());
    if (!q) return err(where + ": " + q.error().message);
    return *q;
  }
  return err(where + " must be a quantity (a number or a string such as \"1Gi\")");
}

Result<uint64_t> count_of(const json& v, const std::string& where) {
  auto q = quantity_of(v, where);
  if (!q) return q.error();
  if (*q < 0) return err(where + " must not be negative");
  if (*q > 1.8e19) return err(where + " is too large");
  return static_cast<uint64_t>(std::ceil(*q));  // fractional bytes round up, as Quantity.Value()
}

Result<bool> bool_of(const json& v, const std::string& where) {
  if (!v.is_boolean()) return err(where + " must be true or false");
  return v.get<bool>();
}

Result<int64_t> int_of(const json& v, const std::string& where) {
  if (!v.is_number_integer()) return err(where + " must be an integer");
  return v.get<int64_t>();
}

Result<std::string> string_of(const json& v, const std::string& where) {
  if (!v.is_string()) return err(where + " must be a string");
  return v.get<std::string>();
}

// "t" is echoed as given: 5 stays 5, 5.5 stays 5.5.
ordered_json echo_t(const json& t) {
  if (t.is_number_unsigned()) return t.get<uint64_t>();
  if (t.is_number_integer()) return t.get<int64_t>();
  return t.get<double>();
}

// "containers": [{"name", "limits": {"ephemeral-storage"}}], "volumes":
// [{"name", "emptyDir": {"sizeLimit"}}] (the pod spec's shapes) and
// "storage": {"emptyDir": {volume: bytes}, "logs": {container: bytes},
// "writableLayers": {container: bytes}} (the walk; usage.ephemeral-storage
// becomes the sum of its parts). Each key given replaces what it describes;
// without "storage" the pod counts as not walked (no limit is judged).
Result<void> local_storage_fields(const json& j, Pod& p) {
  LocalStorageSpec spec = p.local_storage;
  if (j.contains("containers")) {
    const json& cs = j["containers"];
    if (!cs.is_array()) return err("containers must be a list of {\"name\", \"limits\"}");
    spec.containers.clear();
    spec.pod_limit_bytes.reset();
    for (std::size_t i = 0; i < cs.size(); ++i) {
      const std::string where = "containers[" + std::to_string(i) + "]";
      const json& c = cs[i];
      if (!c.is_object()) return err(where + " must be an object");
      if (auto r = check_keys(c, {"name", "limits"}, where + ": "); !r) return r;
      if (!c.contains("name") || !c["name"].is_string() || c["name"].get<std::string>().empty()) {
        return err(where + " needs a non-empty \"name\"");
      }
      LocalStorageSpec::Container k;
      k.name = c["name"].get<std::string>();
      k.id = k.name;  // the timeline names writable layers by container
      if (c.contains("limits")) {
        const json& l = c["limits"];
        if (!l.is_object()) return err(where + ".limits must be an object");
        if (auto r = check_keys(l, {"ephemeral-storage"}, where + ".limits: "); !r) return r;
        if (l.contains("ephemeral-storage")) {
          auto v = count_of(l["ephemeral-storage"], where + ".limits.ephemeral-storage");
          if (!v) return v.error();
          k.ephemeral_storage_limit_bytes = *v;
          // The kubelet's PodLimits: the sum of the limits that are set.
          spec.pod_limit_bytes = spec.pod_limit_bytes.value_or(0) + *v;
        }
      }
      spec.containers.push_back(std::move(k));
    }
  }
  if (j.contains("volumes")) {
    const json& vs = j["volumes"];
    if (!vs.is_array()) return err("volumes must be a list of {\"name\", \"emptyDir\"}");
    spec.empty_dirs.clear();
    for (std::size_t i = 0; i < vs.size(); ++i) {
      const std::string where = "volumes[" + std::to_string(i) + "]";
      const json& v = vs[i];
      if (!v.is_object()) return err(where + " must be an object");
      if (auto r = check_keys(v, {"name", "emptyDir"}, where + ": "); !r) return r;
      if (!v.contains("name") || !v["name"].is_string() || v["name"].get<std::string>().empty()) {
        return err(where + " needs a non-empty \"name\"");
      }
      if (!v.contains("emptyDir") || !v["emptyDir"].is_object()) return err(where + " needs an \"emptyDir\" object");
      const json& ed = v["emptyDir"];
      if (auto r = check_keys(ed, {"sizeLimit"}, where + ".emptyDir: "); !r) return r;
      LocalStorageSpec::EmptyDir e;
      e.name = v["name"].get<std::string>();
      if (ed.contains("sizeLimit")) {
        auto l = count_of(ed["sizeLimit"], where + ".emptyDir.sizeLimit");
        if (!l) return l.error();
        e.size_limit_bytes = *l;
      }
      spec.empty_dirs.push_back(std::move(e));
    }
  }
  std::optional<EphemeralStorageBreakdown> walked = p.ephemeral_storage;
  uint64_t total = p.usage.ephemeral_storage_bytes;
  if (j.contains("storage")) {
    const json& st = j["storage"];
    if (!st.is_object()) return err("storage must be an object");
    if (auto r = check_keys(st, {"emptyDir", "logs", "writableLayers"}, "storage: "); !r) return r;
    if (j.contains("usage") && j["usage"].contains("ephemeral-storage")) {
      return err("usage.ephemeral-storage and storage are both given (storage sets it to the sum of its parts)");
    }
    EphemeralStorageBreakdown b;
    total = 0;
    for (auto [key, parts, sum] :
         {std::tuple{"emptyDir", &b.empty_dir_volumes, &b.empty_dir_bytes},
          std::tuple{"logs", &b.container_logs, &b.logs_bytes},
          std::tuple{"writableLayers", &b.container_layers, &b.writable_layers_bytes}}) {
      if (!st.contains(key)) continue;
      const json& m = st[key];
      const std::string where = std::string("storage.") + key;
      if (!m.is_object()) return err(where + " must be an object of name to bytes");
      for (auto it = m.begin(); it != m.end(); ++it) {
        auto v = count_of(it.value(), where + "." + it.key());
        if (!v) return v.error();
        parts->push_back({it.key(), *v, 0});
        *sum += *v;
        total += *v;
      }
    }
    b.writable_layers_measured = st.contains("writableLayers");
    walked = std::move(b);
  }
  p.local_storage = std::move(spec);
  p.ephemeral_storage = std::move(walked);
  p.usage.ephemeral_storage_bytes = total;
  return {};
}

}  // namespace

QosClass derive_qos(std::optional<double> request_cpu, std::optional<double> request_memory,
                    std::optional<double> limit_cpu, std::optional<double> limit_memory) {
  auto set = [](const std::optional<double>& v) { return v && *v != 0; };
  if (!set(request_cpu) && !set(request_memory) && !set(limit_cpu) && !set(limit_memory)) return QosClass::BestEffort;
  // Guaranteed: CPU and memory limits set, and requests (defaulted to the
  // limits when absent) equal to them.
  if (set(limit_cpu) && set(limit_memory) && (!set(request_cpu) || *request_cpu == *limit_cpu) &&
      (!set(request_memory) || *request_memory == *limit_memory)) {
    return QosClass::Guaranteed;
  }
  return QosClass::Burstable;
}

Simulator::Simulator(EvictionConfig config, std::optional<PolicyConfig> policy) : engine_(std::move(config)) {
  if (policy) policy_.emplace(std::move(*policy));
}

Result<void> Simulator::feed(std::string_view line, std::vector<std::string>& out) {
  std::size_t first = line.find_first_not_of(" \t\r");
  if (first == std::string_view::npos || line[first] == '#') return {};

  json j;
  try {
    j = json::parse(line);
  } catch (const json::parse_error& e) {
    return err(std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) return err("each line must be a JSON object");
  if (!j.contains("t")) return err("missing \"t\" (seconds)");
  const json& tj = j["t"];
  if (!tj.is_number() || !std::isfinite(tj.get<double>())) return err("\"t\" must be a number of seconds");
  const double t = tj.get<double>();
  if (t < 0) return err("\"t\" must not be negative");
  if (t > 9e9) return err("\"t\" is too large (at most 9e9 seconds)");
  if (last_t_ && t < *last_t_) {
    return err("\"t\" goes backwards (" + tj.dump() + " after " + format_quantity(*last_t_) + ")");
  }
  if (!j.contains("kind") || !j["kind"].is_string()) return err("missing \"kind\" (observe, layout, pod, podExited, podDeleted or tick)");
  const std::string kind = j["kind"].get<std::string>();
  const TimePoint now{std::chrono::duration_cast<Duration>(std::chrono::duration<double>(t))};

  if (kind == "observe") {
    if (auto r = check_keys(j, {"t", "kind", "signals"}, ""); !r) return r;
    if (!j.contains("signals") || !j["signals"].is_object()) return err("observe needs a \"signals\" object");
    // Decode everything first, so a bad entry leaves the snapshot untouched.
    SignalSet next = snapshot_.signals;
    for (auto it = j["signals"].begin(); it != j["signals"].end(); ++it) {
      auto sig = parse_signal(it.key());
      if (!sig) return err("unknown signal \"" + it.key() + "\"");
      auto& slot = next[static_cast<std::size_t>(*sig)];
      const std::string where = "signals." + it.key();
      if (it.value().is_null()) {  // no longer observed
        slot.reset();
        continue;
      }
      if (!it.value().is_object()) return err(where + " must be an object such as {\"available\":\"900Mi\",\"capacity\":\"10Gi\"}");
      const json& o = it.value();
      if (auto r = check_keys(o, {"available", "value", "capacity", "stale"}, where + ": "); !r) return r;
      SignalObservation obs = slot.value_or(SignalObservation{});
      const bool psi = info(*sig).is_psi;
      if (o.contains("available") && o.contains("value")) return err(where + " has both \"available\" and \"value\"");
      const char* value_key = o.contains("available") ? "available" : "value";
      if (o.contains(value_key)) {
        auto v = quantity_of(o[value_key], where + "." + value_key);
        if (!v) return v.error();
        if (*v < 0) return err(where + "." + value_key + " must not be negative");
        if (psi && *v > 100) return err(where + "." + value_key + " is a PSI percentage and must be at most 100");
        obs.value = *v;
      } else if (!slot) {
        return err(where + " needs \"" + (psi ? "value" : "available") + "\" the first time it is observed");
      }
      if (o.contains("capacity")) {
        auto c = quantity_of(o["capacity"], where + ".capacity");
        if (!c) return c.error();
        if (*c < 0) return err(where + ".capacity must not be negative");
        obs.capacity = *c;
      }
      if (psi) obs.capacity = 100;
      obs.stale = false;
      if (o.contains("stale")) {
        auto s = bool_of(o["stale"], where + ".stale");
        if (!s) return s.error();
        obs.stale = *s;
      }
      obs.observed_at = now;
      slot = obs;
    }
    snapshot_.signals = next;
  } else if (kind == "layout") {
    // Where the writable layers are (the daemon detects it at start): the
    // containerfs thresholds are derived for it, as the kubelet does.
    if (auto r = check_keys(j, {"t", "kind", "containerfs"}, ""); !r) return r;
    if (!j.contains("containerfs") || !j["containerfs"].is_string()) {
      return err("layout needs \"containerfs\": single, imagefs, split or separate");
    }
    const std::string text = j["containerfs"].get<std::string>();
    auto l = parse_containerfs_layout(text);
    if (!l || *l == ContainerfsLayout::Unknown) {
      return err("layout.containerfs \"" + text + "\" is not one of single, imagefs, split, separate");
    }
    snapshot_.containerfs_layout = *l;
    EvictionConfig c = engine_.config();
    c.thresholds = with_containerfs_thresholds(std::move(c.thresholds), *l);
    engine_.reconfigure(std::move(c));
  } else if (kind == "pod") {
    if (auto r = check_keys(j,
                            {"t", "kind", "uid", "name", "namespace", "qosClass", "priority", "critical", "static",
                             "daemonSet", "terminationGracePeriodSeconds", "requests", "limits", "usage",
                             "containers", "volumes", "storage", "noStats"},
                            "");
        !r) {
      return r;
    }
    if (!j.contains("uid") || !j["uid"].is_string() || j["uid"].get<std::string>().empty()) {
      return err("pod needs a non-empty \"uid\"");
    }
    const std::string uid = j["uid"].get<std::string>();
    auto existing = pods_.find(uid);
    SimPod sp = existing != pods_.end() ? existing->second : SimPod{};
    Pod& p = sp.pod;
    p.uid = uid;
    p.metadata_known = true;
    if (j.contains("name")) {
      auto v = string_of(j["name"], "name");
      if (!v) return v.error();
      p.name = *v;
    }
    if (j.contains("namespace")) {
      auto v = string_of(j["namespace"], "namespace");
      if (!v) return v.error();
      p.namespace_ = *v;
    }
    if (j.contains("qosClass")) {
      auto v = string_of(j["qosClass"], "qosClass");
      if (!v) return v.error();
      auto q = parse_qos(*v);
      if (!q) return err("qosClass \"" + *v + "\" is not one of BestEffort, Burstable, Guaranteed");
      sp.explicit_qos = q;
    }
    if (j.contains("priority")) {
      auto v = int_of(j["priority"], "priority");
      if (!v) return v.error();
      if (*v < INT32_MIN || *v > INT32_MAX) return err("priority is out of the int32 range");
      p.priority = static_cast<int32_t>(*v);
    }
    for (auto [key, member] : {std::pair{"critical", &Pod::critical}, std::pair{"static", &Pod::static_pod},
                               std::pair{"daemonSet", &Pod::daemonset}}) {
      if (!j.contains(key)) continue;
      auto v = bool_of(j[key], key);
      if (!v) return v.error();
      p.*member = *v;
    }
    // No stats at all for the pod (never read, never measured), as the
    // observer reports a pod whose cgroup files could not be read yet.
    if (j.contains("noStats")) {
      auto v = bool_of(j["noStats"], "noStats");
      if (!v) return v.error();
      p.no_usage_stats = *v;
      p.no_storage_stats = *v;
    }
    if (j.contains("terminationGracePeriodSeconds")) {
      auto v = int_of(j["terminationGracePeriodSeconds"], "terminationGracePeriodSeconds");
      if (!v) return v.error();
      if (*v < 0) return err("terminationGracePeriodSeconds must not be negative");
      p.termination_grace_period_seconds = *v;
    }
    for (const char* section : {"requests", "limits"}) {
      if (!j.contains(section)) continue;
      const json& r = j[section];
      if (!r.is_object()) return err(std::string(section) + " must be an object");
      if (auto c = check_keys(r, {"memory", "cpu", "ephemeral-storage"}, std::string(section) + ": "); !c) return c;
      const bool req = std::string_view(section) == "requests";
      for (auto [key, slot] : {std::pair{"memory", req ? &sp.request_memory : &sp.limit_memory},
                               std::pair{"cpu", req ? &sp.request_cpu : &sp.limit_cpu},
                               std::pair{"ephemeral-storage", req ? &sp.request_storage : &sp.limit_storage}}) {
        if (!r.contains(key)) continue;
        auto v = quantity_of(r[key], std::string(section) + "." + key);
        if (!v) return v.error();
        if (*v < 0) return err(std::string(section) + "." + key + " must not be negative");
        *slot = *v;
      }
    }
    if (j.contains("usage")) {
      const json& u = j["usage"];
      if (!u.is_object()) return err("usage must be an object");
      if (auto c = check_keys(u, {"memory", "ephemeral-storage", "inodes", "pids", "writable-layers", "writable-layers-inodes"},
                              "usage: ");
          !c) {
        return c;
      }
      for (auto [key, member] : {std::pair{"memory", &PodUsage::memory_working_set_bytes},
                                 std::pair{"ephemeral-storage", &PodUsage::ephemeral_storage_bytes},
                                 std::pair{"inodes", &PodUsage::inodes}, std::pair{"pids", &PodUsage::pids}}) {
        if (!u.contains(key)) continue;
        auto v = count_of(u[key], std::string("usage.") + key);
        if (!v) return v.error();
        p.usage.*member = *v;
      }
      // The part of ephemeral-storage (and inodes) in the containers'
      // writable layers: what ranks pods for containerfs.* when it is not nodefs.
      for (auto [key, member] : {std::pair{"writable-layers", &EphemeralStorageBreakdown::writable_layers_bytes},
                                 std::pair{"writable-layers-inodes", &EphemeralStorageBreakdown::writable_layers_inodes}}) {
        if (!u.contains(key)) continue;
        auto v = count_of(u[key], std::string("usage.") + key);
        if (!v) return v.error();
        if (!p.ephemeral_storage) p.ephemeral_storage.emplace();
        p.ephemeral_storage->writable_layers_measured = true;
        (*p.ephemeral_storage).*member = *v;
      }
      if (p.ephemeral_storage && (p.ephemeral_storage->writable_layers_bytes > p.usage.ephemeral_storage_bytes ||
                                  p.ephemeral_storage->writable_layers_inodes > p.usage.inodes)) {
        return err("usage.writable-layers is part of usage.ephemeral-storage (and -inodes of inodes): it cannot be larger");
      }
    }
    // Local ephemeral-storage limits: the spec's containers and emptyDir
    // volumes, and what the storage walker measured part by part.
    if (auto r = local_storage_fields(j, p); !r) return r;
    // API defaulting: a request left out defaults to the limit.
    // Saturating: a 1e30 request is "more than any node", never a wrapped 0 (UB).
    auto bytes = [](const std::optional<double>& v) -> uint64_t {
      if (!v || !(*v > 0)) return 0;
      double c = std::ceil(*v);
      return c >= 18446744073709551616.0 ? UINT64_MAX : static_cast<uint64_t>(c);
    };
    p.requests.memory_bytes = bytes(sp.request_memory ? sp.request_memory : sp.limit_memory);
    p.requests.ephemeral_storage_bytes = bytes(sp.request_storage ? sp.request_storage : sp.limit_storage);
    p.limits.memory_bytes = bytes(sp.limit_memory);
    p.limits.ephemeral_storage_bytes = bytes(sp.limit_storage);
    p.qos = sp.explicit_qos ? *sp.explicit_qos
                            : derive_qos(sp.request_cpu, sp.request_memory, sp.limit_cpu, sp.limit_memory);
    if (existing == pods_.end()) pod_order_.push_back(uid);
    pods_[uid] = std::move(sp);
  } else if (kind == "podDeleted") {
    if (auto r = check_keys(j, {"t", "kind", "uid"}, ""); !r) return r;
    if (!j.contains("uid") || !j["uid"].is_string()) return err("podDeleted needs a \"uid\"");
    const std::string uid = j["uid"].get<std::string>();
    if (!pods_.erase(uid)) return err("podDeleted for unknown pod uid \"" + uid + "\"");
    pod_order_.erase(std::find(pod_order_.begin(), pod_order_.end(), uid));
    std::erase(evicted_, uid);
    std::erase(exited_, uid);
  } else if (kind == "podExited") {
    if (auto r = check_keys(j, {"t", "kind", "uid"}, ""); !r) return r;
    if (!j.contains("uid") || !j["uid"].is_string()) return err("podExited needs a \"uid\"");
    const std::string uid = j["uid"].get<std::string>();
    if (pods_.count(uid) == 0) return err("podExited for unknown pod uid \"" + uid + "\"");
    if (!policy_) return err("podExited needs the policy (it is ignored by --engine-only)");
    if (std::find(exited_.begin(), exited_.end(), uid) == exited_.end()) exited_.push_back(uid);
  } else if (kind == "tick") {
    if (auto r = check_keys(j, {"t", "kind"}, ""); !r) return r;
    snapshot_.taken_at = now;
    snapshot_.pods.clear();
    for (const auto& uid : pod_order_) snapshot_.pods.push_back(pods_.at(uid).pod);
    Decisions d = engine_.evaluate(snapshot_, now, policy_ ? policy_->excluded() : evicted_);
    for (const auto& c : d.changes) {
      ordered_json o;
      o["t"] = echo_t(tj);
      o["kind"] = "condition";
      o["condition"] = std::string(name(c.condition));
      o["status"] = c.status;
      out.push_back(o.dump());
    }
    for (Signal s : d.no_candidates) {
      ordered_json o;
      o["t"] = echo_t(tj);
      o["kind"] = "noCandidates";
      o["signal"] = std::string(name(s));
      out.push_back(o.dump());
    }
    auto line = [&](std::string_view what, const Eviction& e) {
      ordered_json o;
      o["t"] = echo_t(tj);
      o["kind"] = std::string(what);
      o["uid"] = e.uid;
      return o;
    };
    auto evict_line = [&](const Eviction& e) {
      ordered_json o = line("evict", e);
      o["name"] = e.name;
      o["namespace"] = e.namespace_;
      o["signal"] = std::string(eviction_reason(e));
      o["threshold"] = e.kind == ThresholdKind::Hard ? "hard" : "soft";
      o["gracePeriodSeconds"] = e.grace_period_seconds;
      if (!e.local_storage_rule.empty()) {  // over its own limit: what and by how much
        o["message"] = e.local_storage_message;
        o["usage"] = static_cast<uint64_t>(e.observed);
        o["limit"] = static_cast<uint64_t>(e.threshold_value);
      }
      o["why"] = why_json(e, JsonKeys::Camel, false);
      return o.dump();
    };
    if (!policy_) {
      if (d.eviction) {
        evicted_.push_back(d.eviction->uid);
        out.push_back(evict_line(*d.eviction));
      }
    } else {
      using K = PolicyAction::Kind;
      PolicyInputs in;
      in.exited = exited_;
      in.disk_reclaim_finished = std::exchange(disk_reclaim_done_, false);
      for (const auto& a : policy_->step(now, snapshot_, d, in)) {
        const Eviction& e = a.eviction;
        switch (a.kind) {
          case K::Start: out.push_back(evict_line(e)); break;
          case K::Escalate: {
            ordered_json o = line("escalate", e);
            o["signal"] = std::string(name(a.trigger));
            out.push_back(o.dump());
            break;
          }
          case K::GraceEndKill:
          case K::StragglerKill: {
            ordered_json o = line("kill", e);
            o["reason"] = a.kind == K::GraceEndKill ? "graceEnd" : "straggler";
            out.push_back(o.dump());
            break;
          }
          case K::Deferred: {
            ordered_json o = line("deferred", e);
            o["signal"] = std::string(eviction_reason(e));
            o["threshold"] = e.kind == ThresholdKind::Hard ? "hard" : "soft";
            o["reason"] = a.reason;
            out.push_back(o.dump());
            break;
          }
          case K::DiskReclaim: {
            ordered_json o;
            o["t"] = echo_t(tj);
            o["kind"] = "diskReclaim";
            o["signal"] = std::string(name(e.signal));
            out.push_back(o.dump());
            // The command is not run here: it counts as done by the next
            // tick, where the disk eviction comes if the pressure remains.
            disk_reclaim_done_ = true;
            break;
          }
          // Kubernetes reporting (off in a simulation) and restarts (none here).
          case K::Terminate:
          case K::ReportApi:
          case K::ApiConfirmed:
          case K::ApiUnsent:
          case K::RestartKill:
          case K::EndApi: break;
          case K::Exited:
          case K::Released:
          case K::ReleaseTimeout:
          case K::Stuck:
          case K::Expired: out.push_back(line(name(a.kind), e).dump()); break;
        }
      }
    }
  } else {
    return err("unknown kind \"" + kind + "\" (expected observe, layout, pod, podExited, podDeleted or tick)");
  }
  last_t_ = t;
  return {};
}

Result<void> simulate_stream(std::istream& in, std::ostream& out, const EvictionConfig& config,
                             std::optional<PolicyConfig> policy) {
  Simulator sim(config, std::move(policy));
  std::string line;
  std::vector<std::string> lines;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    lines.clear();
    auto r = sim.feed(line, lines);
    if (!r) return Error{r.error().code, "line " + std::to_string(number) + ": " + r.error().message};
    for (const auto& l : lines) out << l << '\n';
    out.flush();
  }
  if (in.bad()) return Error{EIO, "reading the timeline failed"};
  return {};
}

}  // namespace pressured
