#include "daemon/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "engine/why.hpp"
#include "kernel/fd.hpp"
#include "k8s/bounded_json.hpp"
#include "kernel/file.hpp"
#include "kernel/safe_file.hpp"

namespace pressured {

namespace {

using json = nlohmann::json;
// 2: engine state keyed by signal and kind; the policy's state.
// 3: the policy's API evictions (version 2 still loads, with none); later,
//    "relief" (the reclaim back-off), optional: a checkpoint without it loads
//    with none, and a daemon that predates it ignores it, so no new version;
//    likewise the API evictions' "recorded", "record_seen" and "undone".
constexpr int kVersion = 3;
constexpr int kOldestVersion = 2;

int64_t ns(TimePoint t) { return t.time_since_epoch().count(); }
TimePoint tp(int64_t v) { return TimePoint(Duration(v)); }

// Whole numbers only: nlohmann's get<int64_t>() converts a double (1e34, or an
// integer literal too large for 64 bits) with a cast whose result is
// undefined. A checkpoint never holds anything else, so anything else is corrupt.
int64_t as_int64(const json& v) {
  if (v.is_number_integer() &&
      !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    return v.get<int64_t>();
  }
  throw std::invalid_argument("expected a whole number that fits in 64 bits, got " + v.dump());
}
uint64_t as_uint64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  throw std::invalid_argument("expected a non-negative whole number, got " + v.dump());
}

const char* kind_name(ThresholdKind k) { return k == ThresholdKind::Hard ? "hard" : "soft"; }

ThresholdKind parse_kind(const std::string& s) {
  if (s == "hard") return ThresholdKind::Hard;
  if (s == "soft") return ThresholdKind::Soft;
  throw std::runtime_error("threshold kind '" + s + "' is not hard or soft");
}

Signal parse_signal_or_throw(const std::string& s) {
  auto sig = parse_signal(s);
  if (!sig) throw std::runtime_error("unknown signal \"" + s + "\"");
  return *sig;
}

// "memory.available/hard"
std::string key_name(const ThresholdKey& k) { return std::string(name(k.signal)) + "/" + kind_name(k.kind); }

ThresholdKey parse_key(const std::string& s) {
  auto slash = s.rfind('/');
  if (slash == std::string::npos) throw std::runtime_error("threshold key '" + s + "' is not signal/kind");
  return ThresholdKey{parse_signal_or_throw(s.substr(0, slash)), parse_kind(s.substr(slash + 1))};
}

// The ranking keys as rank_keys_json writes them (snake_case); every field
// is required once the object is there.
RankKeys decode_keys(const json& k) {
  RankKeys r;
  auto q = parse_qos(k.at("qos").get<std::string>());
  if (!q) throw std::runtime_error("unknown QoS class " + k.at("qos").dump());
  r.qos = *q;
  r.over_request = k.at("over_request").get<bool>();
  const int64_t prio = as_int64(k.at("priority"));
  if (prio < std::numeric_limits<int32_t>::min() || prio > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument("priority " + k.at("priority").dump() + " does not fit in 32 bits");
  }
  r.priority = static_cast<int32_t>(prio);
  r.usage = as_uint64(k.at("usage"));
  r.request = as_uint64(k.at("request"));
  r.zero_usage = k.at("zero_usage").get<bool>();
  r.daemonset_last = k.at("daemonset_last").get<bool>();
  if (auto it = k.find("no_stats"); it != k.end()) r.no_stats = it->get<bool>();
  // `ranking: kubelet` keys: the amount is usage - offset.
  if (auto it = k.find("ranking"); it != k.end() && *it == "kubelet") {
    r.kubelet = true;
    const int64_t amount = as_int64(k.at("amount"));
    r.offset = amount >= 0 ? r.usage - std::min(r.usage, static_cast<uint64_t>(amount))
                           : r.usage + (amount == INT64_MIN ? static_cast<uint64_t>(INT64_MAX) + 1
                                                            : static_cast<uint64_t>(-amount));
  }
  return r;
}

json encode_eviction(const Eviction& e) {
  json j = json{{"id", e.id},
              {"uid", e.uid},
              {"name", e.name},
              {"namespace", e.namespace_},
              {"cgroup_path", e.cgroup_path},
              {"qos", std::string(name(e.qos))},
              {"static_pod", e.static_pod},
              {"metadata_known", e.metadata_known},
              {"signal", std::string(name(e.signal))},
              {"kind", kind_name(e.kind)},
              {"observed", e.observed},
              {"threshold", e.threshold_value},
              {"grace_period_seconds", e.grace_period_seconds},
              {"signal_stale", e.signal_stale},
              {"usage_at_decision", e.usage_at_decision},
              {"decided_at_ns", ns(e.decided_at)}};
  // Why this pod: written since the ranking keys were recorded; records
  // without it (older daemons) still load, with empty keys.
  j["ranking"] = why_json(e, JsonKeys::Snake, false);
  // Likewise for what woke the decision (messages only).
  j["wake_source"] = e.wake_source;
  j["detection_latency_seconds"] = e.detection_latency_seconds ? json(*e.detection_latency_seconds) : json(nullptr);
  // A local ephemeral-storage eviction: its rule and the kubelet's sentence
  // (absent for node thresholds, so older records and readers are unchanged).
  if (!e.local_storage_rule.empty()) {
    j["local_storage_rule"] = e.local_storage_rule;
    j["local_storage_message"] = e.local_storage_message;
  }
  // The containers as measured at the decision (the kubelet's sentences):
  // absent when none, so older records and readers are unchanged.
  if (!e.containers.empty()) {
    json cs = json::array();
    for (const auto& c : e.containers) cs.push_back({{"name", c.name}, {"usage", c.usage}, {"request", c.request}});
    j["containers"] = std::move(cs);
  }
  if (e.pod_level_request) j["pod_level_request"] = *e.pod_level_request;
  return j;
}

Eviction decode_eviction(const json& p) {
  Eviction e;
  e.id = p.at("id").get<std::string>();
  e.uid = p.at("uid").get<std::string>();
  e.name = p.at("name").get<std::string>();
  e.namespace_ = p.at("namespace").get<std::string>();
  e.cgroup_path = p.at("cgroup_path").get<std::string>();
  auto q = parse_qos(p.at("qos").get<std::string>());
  if (!q) throw std::runtime_error("unknown QoS class " + p.at("qos").dump());
  e.qos = *q;
  e.static_pod = p.at("static_pod").get<bool>();
  e.metadata_known = p.at("metadata_known").get<bool>();
  e.signal = parse_signal_or_throw(p.at("signal").get<std::string>());
  e.kind = parse_kind(p.at("kind").get<std::string>());
  e.observed = p.at("observed").get<double>();
  e.threshold_value = p.at("threshold").get<double>();
  e.grace_period_seconds = as_int64(p.at("grace_period_seconds"));
  e.signal_stale = p.at("signal_stale").get<bool>();
  e.usage_at_decision = as_uint64(p.at("usage_at_decision"));
  e.decided_at = tp(as_int64(p.at("decided_at_ns")));
  if (auto w = p.find("wake_source"); w != p.end()) e.wake_source = w->get<std::string>();
  if (auto l = p.find("detection_latency_seconds"); l != p.end() && !l->is_null()) {
    e.detection_latency_seconds = l->get<double>();
  }
  if (auto r = p.find("local_storage_rule"); r != p.end()) {
    e.local_storage_rule = r->get<std::string>();
    if (e.local_storage_rule.empty()) throw std::invalid_argument("local_storage_rule is empty");
    e.local_storage_message = p.at("local_storage_message").get<std::string>();
  }
  if (auto cs = p.find("containers"); cs != p.end()) {
    for (const auto& c : cs->get_ref<const json::array_t&>()) {
      e.containers.push_back({c.at("name").get<std::string>(), as_uint64(c.at("usage")), as_uint64(c.at("request"))});
    }
  }
  if (auto r = p.find("pod_level_request"); r != p.end()) e.pod_level_request = as_uint64(*r);
  if (auto r = p.find("ranking"); r != p.end()) {
    e.keys = decode_keys(r->at("victim"));
    if (const json& ru = r->at("runner_up"); !ru.is_null()) {
      RunnerUp u;
      u.uid = ru.at("uid").get<std::string>();
      u.name = ru.at("name").get<std::string>();
      u.namespace_ = ru.at("namespace").get<std::string>();
      u.keys = decode_keys(ru);
      e.runner_up = std::move(u);
    }
    // What plugins changed in the decision (docs/plugins.md); absent without plugins.
    if (auto pl = r->find("plugins"); pl != r->end()) {
      for (const json& n : pl->get_ref<const json::array_t&>()) {
        e.plugin_notes.push_back(PluginNote{n.at("plugin").get<std::string>(), n.at("action").get<std::string>(),
                                            n.at("pod").get<std::string>(), n.at("reason").get<std::string>()});
      }
    }
    if (auto ps = r->find("plugin_signal"); ps != r->end()) e.plugin_signal = ps->get<std::string>();
    // The kubelet's PID order compares stats after priority (rank_keys).
    const bool pids = info(e.signal).resource == StarvedResource::Pids;
    e.keys.pid_order = e.keys.kubelet && pids;
    if (e.runner_up) e.runner_up->keys.pid_order = e.runner_up->keys.kubelet && pids;
  }
  return e;
}

}  // namespace

std::string encode_checkpoint(const Checkpoint& cp) {
  json first = json::object(), met = json::object();
  for (const auto& [k, t] : cp.engine.threshold_first_observed) first[key_name(k)] = ns(t);
  for (const auto& [k, m] : cp.engine.threshold_met) met[key_name(k)] = m;
  json conds = json::array(), last = json::array();
  for (std::size_t i = 0; i < kConditionCount; ++i) {
    conds.push_back(cp.engine.conditions[i]);
    last.push_back(cp.engine.condition_last_met[i] ? json(ns(*cp.engine.condition_last_met[i])) : json(nullptr));
  }
  json flights = json::array();
  for (const auto& f : cp.policy.in_flight) {
    flights.push_back(json{{"eviction", encode_eviction(f.eviction)},
                           {"phase", f.phase == InFlightEviction::Phase::Terminating ? "terminating" : "releasing"},
                           {"kill_at_ns", ns(f.kill_at)},
                           {"phase_deadline_ns", ns(f.phase_deadline)},
                           {"killed", f.killed},
                           {"api", f.api},
                           {"escalated", f.escalated}});
  }
  json api = json::array();
  for (const auto& r : cp.policy.api) {
    api.push_back(json{{"eviction", encode_eviction(r.eviction)},
                       {"state", std::string(name(r.state))},
                       {"killed_at_ns", r.killed_at ? json(ns(*r.killed_at)) : json(nullptr)},
                       {"next_check_ns", ns(r.next_check)},
                       {"recorded", r.recorded},
                       {"record_seen", r.record_seen},
                       {"undone", std::string(name(r.undone))}});
  }
  json backoff = json::object();
  for (const auto& [path, until] : cp.relief.backoff) backoff[path] = ns(until);
  const auto& pol = cp.policy;
  json j{{"version", kVersion},
         {"boot_id", cp.boot_id},
         {"engine",
          {{"threshold_first_observed_ns", first},
           {"threshold_met", met},
           {"conditions", conds},
           {"condition_last_met_ns", last}}},
         {"policy",
          {{"in_flight", flights},
           {"evicted", pol.evicted},
           {"api", api},
           {"disk_reclaim_running", pol.disk_reclaim_running},
           {"disk_reclaim_done_at_ns", pol.disk_reclaim_done_at ? json(ns(*pol.disk_reclaim_done_at)) : json(nullptr)},
           {"sequence", pol.sequence}}},
         {"relief", {{"backoff_until_ns", backoff}}}};
  return j.dump(1) + "\n";
}

Result<Checkpoint> decode_checkpoint(const std::string& text) {
  try {
    // Depth-bounded: a deep document must never reach dump() (in the error
    // messages below), which recurses.
    auto parsed = k8s::parse_bounded_json(text);
    if (!parsed) return Error{EINVAL, "malformed checkpoint: " + parsed.error().message};
    const json& j = *parsed;
    if (!j.is_object()) return Error{EINVAL, "checkpoint is not a JSON object"};
    const int64_t version = as_int64(j.at("version"));
    if (version < kOldestVersion || version > kVersion) {
      return Error{EINVAL, "checkpoint version " + j.at("version").dump() + " is not between " +
                               std::to_string(kOldestVersion) + " and " + std::to_string(kVersion)};
    }
    Checkpoint cp;
    cp.boot_id = j.at("boot_id").get<std::string>();
    const json& e = j.at("engine");
    for (const auto& [k, v] : e.at("threshold_first_observed_ns").items()) {
      cp.engine.threshold_first_observed[parse_key(k)] = tp(as_int64(v));
    }
    for (const auto& [k, v] : e.at("threshold_met").items()) cp.engine.threshold_met[parse_key(k)] = v.get<bool>();
    const json& conds = e.at("conditions");
    const json& last = e.at("condition_last_met_ns");
    if (!conds.is_array() || conds.size() != kConditionCount || !last.is_array() || last.size() != kConditionCount) {
      return Error{EINVAL, "checkpoint conditions must be arrays of " + std::to_string(kConditionCount)};
    }
    for (std::size_t i = 0; i < kConditionCount; ++i) {
      cp.engine.conditions[i] = conds[i].get<bool>();
      if (!last[i].is_null()) cp.engine.condition_last_met[i] = tp(as_int64(last[i]));
    }
    const json& p = j.at("policy");
    for (const auto& f : p.at("in_flight")) {
      InFlightEviction r;
      r.eviction = decode_eviction(f.at("eviction"));
      const std::string phase = f.at("phase").get<std::string>();
      if (phase != "terminating" && phase != "releasing") {
        return Error{EINVAL, "checkpoint phase '" + phase + "' is not terminating or releasing"};
      }
      r.phase = phase == "terminating" ? InFlightEviction::Phase::Terminating : InFlightEviction::Phase::Releasing;
      r.kill_at = tp(as_int64(f.at("kill_at_ns")));
      r.phase_deadline = tp(as_int64(f.at("phase_deadline_ns")));
      r.killed = f.at("killed").get<bool>();
      r.api = f.at("api").get<bool>();
      r.escalated = f.at("escalated").get<bool>();
      cp.policy.in_flight.push_back(std::move(r));
    }
    cp.policy.evicted = p.at("evicted").get<std::vector<std::string>>();
    if (version >= 3) {
      for (const auto& a : p.at("api")) {
        ApiEviction r;
        r.eviction = decode_eviction(a.at("eviction"));
        const std::string state = a.at("state").get<std::string>();
        if (state == "pending") {
          r.state = ApiState::Pending;
        } else if (state == "sent") {
          r.state = ApiState::Sent;
        } else if (state == "confirmed") {
          r.state = ApiState::Confirmed;
        } else {
          return Error{EINVAL, "checkpoint API eviction state '" + state + "' is not pending, sent or confirmed"};
        }
        if (const json& k = a.at("killed_at_ns"); !k.is_null()) r.killed_at = tp(as_int64(k));
        r.next_check = tp(as_int64(a.at("next_check_ns")));
        // The status record's watch; a checkpoint from before it loads with none.
        if (auto it = a.find("recorded"); it != a.end()) r.recorded = it->get<bool>();
        if (auto it = a.find("record_seen"); it != a.end()) r.record_seen = it->get<bool>();
        if (auto it = a.find("undone"); it != a.end()) {
          const std::string undone = it->get<std::string>();
          if (undone == "none") {
            r.undone = RecordUndone::None;
          } else if (undone == "phase") {
            r.undone = RecordUndone::PhaseReverted;
          } else if (undone == "restart") {
            r.undone = RecordUndone::ProcessesBack;
          } else {
            return Error{EINVAL, "checkpoint API eviction undone '" + undone + "' is not none, phase or restart"};
          }
        }
        cp.policy.api.push_back(std::move(r));
      }
    }
    cp.policy.disk_reclaim_running = p.at("disk_reclaim_running").get<bool>();
    if (const json& d = p.at("disk_reclaim_done_at_ns"); !d.is_null()) cp.policy.disk_reclaim_done_at = tp(as_int64(d));
    cp.policy.sequence = as_uint64(p.at("sequence"));
    if (auto r = j.find("relief"); r != j.end()) {
      for (const auto& [path, v] : r->at("backoff_until_ns").items()) {
        if (path.empty() || path.front() != '/') {
          return Error{EINVAL, "checkpoint relief back-off cgroup '" + path + "' is not an absolute path"};
        }
        cp.relief.backoff[path] = tp(as_int64(v));
      }
    }
    return cp;
  } catch (const std::exception& ex) {
    return Error{EINVAL, std::string("malformed checkpoint: ") + ex.what()};
  }
}

Result<void> write_file_atomically(const std::string& path, const std::string& contents) {
  // The directories that exist are the operator's (followed as configured);
  // what is missing below them is made here, with the marker that lets
  // `pressured uninstall` remove it again.
  std::filesystem::path file(path);
  std::filesystem::path base = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  while (!std::filesystem::is_directory(base, ec) && base.has_parent_path() && base != base.parent_path()) {
    base = base.parent_path();
  }
  if (!std::filesystem::is_directory(base, ec)) base = ".";
  const std::filesystem::path relative = file.lexically_relative(base);
  if (relative.empty()) return Error{EINVAL, "checkpoint path " + path + " names no file"};
  return kernel::replace_file(base.string(), relative.string(), contents, {.mode = 0600, .dir_mode = 0700});
}

std::string read_boot_id(const std::string& proc_root) {
  auto text = kernel::read_file(proc_root + "/sys/kernel/random/boot_id", 256);
  if (!text) return {};
  std::string id = text->substr(0, text->find('\n'));
  while (!id.empty() && id.back() == ' ') id.pop_back();
  return id;
}

LoadedCheckpoint load_checkpoint(const std::string& path, const std::string& boot_id) {
  LoadedCheckpoint out;
  // Not a link, a FIFO or anything but a regular file of at most 4 MiB:
  // the daemon's start never blocks on what is found there.
  auto read = kernel::read_regular_file_nofollow(path, kMaxCheckpointBytes);
  if (!read) {
    if (read.error().code == ENOENT) return out;
    out.status = CheckpointLoad::Corrupt;
    out.error = read.error().code == EFBIG ? "checkpoint " + path + " is larger than 4 MiB" : read.error().message;
    return out;
  }
  const std::string& text = *read;
  auto cp = decode_checkpoint(text);
  if (!cp) {
    out.status = CheckpointLoad::Corrupt;
    out.error = path + ": " + cp.error().message;
    return out;
  }
  if (cp->boot_id != boot_id) {
    out.status = CheckpointLoad::OtherBoot;
    out.error = "checkpoint is from boot " + cp->boot_id + ", this is boot " + boot_id;
    return out;
  }
  out.status = CheckpointLoad::Restored;
  out.checkpoint = std::move(*cp);
  return out;
}

namespace {
// Structural part of a checkpoint: everything except the "last met" times
// that move on every evaluation under pressure (rate-limited instead).
std::string structural(Checkpoint cp) {
  cp.engine.condition_last_met = {};
  return encode_checkpoint(cp);
}
}  // namespace

Checkpointer::Checkpointer(std::string path, std::string boot_id, Duration min_interval)
    : path_(std::move(path)), boot_id_(std::move(boot_id)), min_interval_(min_interval) {}

Checkpoint Checkpointer::make(const EngineState& engine, const PolicyState& policy,
                              const ReliefState& relief) const {
  Checkpoint cp;
  cp.boot_id = boot_id_;
  cp.engine = engine;
  cp.policy = policy;
  cp.relief = relief;
  return cp;
}

LoadedCheckpoint Checkpointer::load() {
  if (!enabled()) return {};
  auto loaded = load_checkpoint(path_, boot_id_);
  if (loaded.status == CheckpointLoad::Restored) {
    last_ = encode_checkpoint(loaded.checkpoint);
    last_structure_ = structural(loaded.checkpoint);
    last_state_ = loaded.checkpoint;
  }
  return loaded;
}

bool Checkpointer::save(const EngineState& engine, const PolicyState& policy, const ReliefState& relief) {
  if (!enabled()) return true;
  const Checkpoint cp = make(engine, policy, relief);
  return write(cp, encode_checkpoint(cp));
}

bool Checkpointer::write(const Checkpoint& cp, std::string text) {
  auto w = write_file_atomically(path_, text);
  if (on_write_) on_write_(static_cast<bool>(w));
  if (!w) {
    if (write_failures_++ == 0) {
      spdlog::warn("checkpoint write failed (further failures are only counted): {}", w.error().message);
    }
    return false;
  }
  ++writes_;
  last_ = std::move(text);
  last_structure_ = structural(cp);
  last_state_ = cp;
  return true;
}

void Checkpointer::maybe_save(const EngineState& engine, const PolicyState& policy, TimePoint now,
                              const ReliefState& relief) {
  if (!enabled()) return;
  if (last_state_ && last_state_->engine == engine && last_state_->policy == policy && last_state_->relief == relief) {
    return;  // same text
  }
  const Checkpoint cp = make(engine, policy, relief);
  std::string text = encode_checkpoint(cp);
  if (text == last_) return;
  const bool structural_change = structural(cp) != last_structure_;
  if (!structural_change && now - last_write_ < min_interval_) return;
  last_write_ = now;
  write(cp, std::move(text));
}

}  // namespace pressured
