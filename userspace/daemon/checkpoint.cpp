#include "daemon/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "daemon/eviction_executor.hpp"
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
// 4: one record per eviction (its local, API and status record phases) and
//    the lanes' phases, instead of "in_flight", "api", "evicted" and
//    "disk_reclaim_running" (versions 2 and 3 still load: legacy_policy()).
constexpr int kVersion = 4;
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

// Enumerations by their names (name() of each); anything else is corrupt.
template <typename E, std::size_t N>
E enum_of(const json& v, const std::array<E, N>& all, std::string_view what) {
  const std::string s = v.get<std::string>();
  for (E e : all) {
    if (name(e) == s) return e;
  }
  std::string names;
  for (E e : all) names += (names.empty() ? "" : ", ") + std::string(name(e));
  throw std::invalid_argument(std::string(what) + " '" + s + "' is not one of " + names);
}

json ns_or_null(const std::optional<TimePoint>& t) { return t ? json(ns(*t)) : json(nullptr); }
std::optional<TimePoint> tp_or_null(const json& v) {
  if (v.is_null()) return std::nullopt;
  return tp(as_int64(v));
}

using L = EvictionRecord::Local;
using A = EvictionRecord::Api;
using S = EvictionRecord::Status;
constexpr std::array kLocal{L::Terminating, L::Releasing, L::Done, L::Stuck};
constexpr std::array kApi{A::None, A::Pending, A::Sent, A::Confirmed};
constexpr std::array kStatus{S::None, S::Written, S::Seen, S::Undone};
constexpr std::array kUndone{RecordUndone::None, RecordUndone::PhaseReverted, RecordUndone::ProcessesBack};
constexpr std::array kLanes{Lane::Memory, Lane::Disk, Lane::Pids};
// A relief run does not survive the process: written as idle.
constexpr std::array kLanePhases{LanePhase::Idle, LanePhase::ReclaimingDisk, LanePhase::Evicting};

// Versions 2 and 3 kept an eviction in up to three places: its local part
// ("in_flight"), its API eviction ("api", 3 on; the same Eviction, with the
// soft grace period an escalation took off the local copy) and the victims
// done with ("evicted", refused candidates included). One record each now.
PolicyState legacy_policy(const json& p, int64_t version) {
  PolicyState st;
  std::vector<std::string> evicted = p.at("evicted").get<std::vector<std::string>>();
  for (const auto& f : p.at("in_flight")) {
    EvictionRecord r;
    r.eviction = f.at("eviction").get<Eviction>();
    const std::string phase = f.at("phase").get<std::string>();
    if (phase != "terminating" && phase != "releasing") {
      throw std::invalid_argument("checkpoint phase '" + phase + "' is not terminating or releasing");
    }
    r.local = phase == "terminating" ? L::Terminating : L::Releasing;
    r.kill_at = tp(as_int64(f.at("kill_at_ns")));
    r.phase_deadline = tp(as_int64(f.at("phase_deadline_ns")));
    r.killed = f.at("killed").get<bool>();
    r.delegated = f.at("api").get<bool>();
    r.escalated = f.at("escalated").get<bool>();
    st.records.push_back(std::move(r));
  }
  if (version >= 3) {
    for (const auto& a : p.at("api")) {
      Eviction e = a.at("eviction").get<Eviction>();
      auto it = std::find_if(st.records.begin(), st.records.end(), [&](const EvictionRecord& r) {
        return r.api == A::None && r.eviction.id == e.id && r.eviction.uid == e.uid;
      });
      EvictionRecord* r = nullptr;
      if (it != st.records.end()) {
        r = &*it;
        r->eviction = std::move(e);  // the copy as decided (escalated: `escalated` says so)
      } else {
        // Done with locally: left out of ranking while "evicted" lists it.
        EvictionRecord done;
        done.eviction = std::move(e);
        done.local = L::Done;
        done.excluded = std::find(evicted.begin(), evicted.end(), done.eviction.uid) != evicted.end();
        st.records.push_back(std::move(done));
        r = &st.records.back();
      }
      const std::string state = a.at("state").get<std::string>();
      if (state != "pending" && state != "sent" && state != "confirmed") {
        throw std::invalid_argument("checkpoint API eviction state '" + state + "' is not pending, sent or confirmed");
      }
      r->api = enum_of(a.at("state"), kApi, "API eviction state");
      r->killed_at = tp_or_null(a.at("killed_at_ns"));
      r->next_check = tp(as_int64(a.at("next_check_ns")));
      // The status record's watch; a checkpoint from before it loads with none.
      const bool recorded = a.value("recorded", false), seen = a.value("record_seen", false);
      if (auto u = a.find("undone"); u != a.end()) r->undone = enum_of(*u, kUndone, "API eviction undone");
      r->status = r->undone != RecordUndone::None ? S::Undone : seen ? S::Seen : recorded ? S::Written : S::None;
    }
  }
  // Victims done with that no record holds (no API eviction; or refused):
  // left out of ranking while observed, as before.
  for (auto& uid : evicted) {
    const bool held = std::any_of(st.records.begin(), st.records.end(),
                                  [&](const EvictionRecord& r) { return r.excluded && r.eviction.uid == uid; });
    if (!held) st.refused.push_back(std::move(uid));
  }
  if (p.at("disk_reclaim_running").get<bool>()) st.lanes[static_cast<std::size_t>(Lane::Disk)] = LanePhase::ReclaimingDisk;
  for (const auto& r : st.records) {
    if (r.in_flight()) st.lanes[static_cast<std::size_t>(lane_of(r.eviction.signal).value_or(Lane::Memory))] =
        st.lane(lane_of(r.eviction.signal).value_or(Lane::Memory)) == LanePhase::ReclaimingDisk ? LanePhase::ReclaimingDisk
                                                                                                 : LanePhase::Evicting;
  }
  st.disk_reclaim_done_at = tp_or_null(p.at("disk_reclaim_done_at_ns"));
  st.sequence = as_uint64(p.at("sequence"));
  return st;
}

}  // namespace

namespace {

json psi_json(const PsiStats& p) {
  auto line = [](const PsiLine& l) {
    return json{{"avg10", l.avg10}, {"avg60", l.avg60}, {"avg300", l.avg300}, {"total_us", l.total_us}};
  };
  json j{{"some", line(p.some)}};
  if (p.full) j["full"] = line(*p.full);
  return j;
}

PsiStats psi_of(const json& j) {
  auto line = [](const json& l) {
    return PsiLine{l.at("avg10").get<double>(), l.at("avg60").get<double>(), l.at("avg300").get<double>(),
                   as_uint64(l.at("total_us"))};
  };
  PsiStats p;
  p.some = line(j.at("some"));
  if (auto f = j.find("full"); f != j.end()) p.full = line(*f);
  return p;
}

}  // namespace

// The JSON codec of each type the checkpoint holds (found by nlohmann's
// get<T>() and json(T) through argument-dependent lookup).

void to_json(json& j, const Eviction& e) {
  j = json{{"id", e.id},
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
  // Which container grew and who was hurt (memory evictions; absent when not
  // known, so older records and readers are unchanged): the record says what
  // the log line said.
  if (e.grew) {
    j["grew"] = json{{"container", e.grew->name},
                     {"basis", e.grew->basis == ContainerGrowth::Basis::Growth ? "growth" : "over_request"},
                     {"usage", e.grew->usage},
                     {"request", e.grew->request},
                     {"bytes", e.grew->bytes},
                     {"seconds", e.grew->seconds}};
  }
  if (e.memory_pressure) j["memory_pressure"] = psi_json(*e.memory_pressure);
  for (std::size_t i = 0; i < e.containers.size(); ++i) {
    if (e.containers[i].memory_pressure) j["containers"][i]["memory_pressure"] = psi_json(*e.containers[i].memory_pressure);
  }
}


void from_json(const json& p, Eviction& e) {
  e = Eviction{};
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
  if (auto g = p.find("grew"); g != p.end()) {
    ContainerGrowth cg;
    cg.name = g->at("container").get<std::string>();
    const std::string basis = g->at("basis").get<std::string>();
    if (basis != "growth" && basis != "over_request") throw std::invalid_argument("unknown growth basis " + basis);
    cg.basis = basis == "growth" ? ContainerGrowth::Basis::Growth : ContainerGrowth::Basis::OverRequest;
    cg.usage = as_uint64(g->at("usage"));
    cg.request = as_uint64(g->at("request"));
    cg.bytes = as_int64(g->at("bytes"));
    cg.seconds = g->at("seconds").get<double>();
    e.grew = std::move(cg);
  }
  if (auto m = p.find("memory_pressure"); m != p.end()) e.memory_pressure = psi_of(*m);
  if (auto cs = p.find("containers"); cs != p.end()) {
    const auto& arr = cs->get_ref<const json::array_t&>();
    for (std::size_t i = 0; i < arr.size() && i < e.containers.size(); ++i) {
      if (auto m = arr[i].find("memory_pressure"); m != arr[i].end()) e.containers[i].memory_pressure = psi_of(*m);
    }
  }
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
}


void to_json(json& j, const EvictionRecord& r) {
  j = json{{"eviction", r.eviction},
           {"local", std::string(name(r.local))},
           {"kill_at_ns", ns(r.kill_at)},
           {"phase_deadline_ns", ns(r.phase_deadline)},
           {"killed", r.killed},
           {"delegated", r.delegated},
           {"escalated", r.escalated},
           {"excluded", r.excluded},
           {"api", std::string(name(r.api))},
           {"status", std::string(name(r.status))},
           {"undone", std::string(name(r.undone))},
           {"killed_at_ns", ns_or_null(r.killed_at)},
           {"next_check_ns", ns(r.next_check)}};
}

void from_json(const json& j, EvictionRecord& r) {
  r = EvictionRecord{};
  r.eviction = j.at("eviction").get<Eviction>();
  r.local = enum_of(j.at("local"), kLocal, "local phase");
  r.kill_at = tp(as_int64(j.at("kill_at_ns")));
  r.phase_deadline = tp(as_int64(j.at("phase_deadline_ns")));
  r.killed = j.at("killed").get<bool>();
  r.delegated = j.at("delegated").get<bool>();
  r.escalated = j.at("escalated").get<bool>();
  r.excluded = j.at("excluded").get<bool>();
  r.api = enum_of(j.at("api"), kApi, "API phase");
  r.status = enum_of(j.at("status"), kStatus, "status record phase");
  r.undone = enum_of(j.at("undone"), kUndone, "status record undone");
  r.killed_at = tp_or_null(j.at("killed_at_ns"));
  r.next_check = tp(as_int64(j.at("next_check_ns")));
}

void to_json(json& j, const PolicyState& st) {
  json lanes = json::object();
  for (Lane l : kLanes) lanes[std::string(name(l))] = std::string(name(st.lane(l) == LanePhase::Relieving ? LanePhase::Idle : st.lane(l)));
  j = json{{"lanes", lanes},
           {"records", st.records},
           {"refused", st.refused},
           {"disk_reclaim_done_at_ns", ns_or_null(st.disk_reclaim_done_at)},
           {"sequence", st.sequence}};
}

void from_json(const json& j, PolicyState& st) {
  st = PolicyState{};
  for (Lane l : kLanes) {
    st.lanes[static_cast<std::size_t>(l)] = enum_of(j.at("lanes").at(std::string(name(l))), kLanePhases, "lane phase");
  }
  st.records = j.at("records").get<std::vector<EvictionRecord>>();
  st.refused = j.at("refused").get<std::vector<std::string>>();
  st.disk_reclaim_done_at = tp_or_null(j.at("disk_reclaim_done_at_ns"));
  st.sequence = as_uint64(j.at("sequence"));
}

void to_json(json& j, const EngineState& e) {
  json first = json::object(), met = json::object();
  for (const auto& [k, t] : e.threshold_first_observed) first[key_name(k)] = ns(t);
  for (const auto& [k, m] : e.threshold_met) met[key_name(k)] = m;
  json conds = json::array(), last = json::array();
  for (std::size_t i = 0; i < kConditionCount; ++i) {
    conds.push_back(e.conditions[i]);
    last.push_back(ns_or_null(e.condition_last_met[i]));
  }
  j = json{{"threshold_first_observed_ns", first}, {"threshold_met", met}, {"conditions", conds},
           {"condition_last_met_ns", last}};
}

void from_json(const json& j, EngineState& e) {
  e = EngineState{};
  for (const auto& [k, v] : j.at("threshold_first_observed_ns").items()) {
    e.threshold_first_observed[parse_key(k)] = tp(as_int64(v));
  }
  for (const auto& [k, v] : j.at("threshold_met").items()) e.threshold_met[parse_key(k)] = v.get<bool>();
  const json& conds = j.at("conditions");
  const json& last = j.at("condition_last_met_ns");
  if (!conds.is_array() || conds.size() != kConditionCount || !last.is_array() || last.size() != kConditionCount) {
    throw std::invalid_argument("checkpoint conditions must be arrays of " + std::to_string(kConditionCount));
  }
  for (std::size_t i = 0; i < kConditionCount; ++i) {
    e.conditions[i] = conds[i].get<bool>();
    e.condition_last_met[i] = tp_or_null(last[i]);
  }
}

void to_json(json& j, const ReliefState& r) {
  json backoff = json::object();
  for (const auto& [path, until] : r.backoff) backoff[path] = ns(until);
  j = json{{"backoff_until_ns", backoff}};
}

void from_json(const json& j, ReliefState& r) {
  r = ReliefState{};
  for (const auto& [path, v] : j.at("backoff_until_ns").items()) {
    if (path.empty() || path.front() != '/') {
      throw std::invalid_argument("checkpoint relief back-off cgroup '" + path + "' is not an absolute path");
    }
    r.backoff[path] = tp(as_int64(v));
  }
}

std::string encode_checkpoint(const Checkpoint& cp) {
  const json j{{"version", kVersion}, {"boot_id", cp.boot_id}, {"engine", cp.engine}, {"policy", cp.policy},
               {"relief", cp.relief}};
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
    cp.engine = j.at("engine").get<EngineState>();
    cp.policy = version >= 4 ? j.at("policy").get<PolicyState>() : legacy_policy(j.at("policy"), version);
    // Optional: a checkpoint without it loads with none.
    if (auto r = j.find("relief"); r != j.end()) cp.relief = r->get<ReliefState>();
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

LoadedCheckpoint Checkpointer::restore() {
  if (!enabled()) return {};
  LoadedCheckpoint loaded = load();
  switch (loaded.status) {
    case CheckpointLoad::Missing:
      spdlog::info("checkpoint {}: none, starting fresh", path_);
      break;
    case CheckpointLoad::Corrupt:
      spdlog::warn("checkpoint ignored (corrupt): {}", loaded.error);
      break;
    case CheckpointLoad::OtherBoot:
      spdlog::info("checkpoint ignored: {}", loaded.error);
      break;
    case CheckpointLoad::Restored:
      for (const auto& f : loaded.checkpoint.policy.records) {
        if (!f.in_flight()) continue;
        spdlog::info("checkpoint: resuming eviction {} of {} ({}{})", f.eviction.id,
                     pod_label(f.eviction.namespace_, f.eviction.name, f.eviction.uid),
                     f.local == EvictionRecord::Local::Terminating ? "terminating" : "releasing",
                     f.killed ? ", killed" : "");
      }
      for (const auto& r : loaded.checkpoint.policy.records) {
        if (r.api == EvictionRecord::Api::Confirmed || r.api == EvictionRecord::Api::None) continue;
        spdlog::info("checkpoint: the API eviction {} of {} was not confirmed: sending it again",
                     r.eviction.id, pod_label(r.eviction.namespace_, r.eviction.name, r.eviction.uid));
      }
      break;
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
