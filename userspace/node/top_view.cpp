#include "node/top_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "engine/why.hpp"
#include "node/attribution.hpp"
#include "pressured/engine.hpp"

namespace pressured::node {
namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string value_text(Signal s, double v) {
  const auto& si = info(s);
  if (si.is_psi) return fmt("%.2f%%", v);
  if (si.resource == StarvedResource::Memory || si.resource == StarvedResource::EphemeralStorage) return human_bytes(v);
  return fmt("%.0f", v);
}

std::string threshold_text(const Threshold& t, std::optional<double> capacity) {
  std::string op = info(t.signal).op == Operator::LessThan ? "<" : ">";
  std::string v = t.value.kind == ThresholdValue::Kind::Percent ? fmt("%g%%", t.value.percent)
                                                                : value_text(t.signal, t.value.quantity);
  std::string res = t.value.kind == ThresholdValue::Kind::Percent && capacity
                        ? " (" + value_text(t.signal, t.value.resolve(*capacity)) + ")"
                        : "";
  return (t.kind == ThresholdKind::Hard ? "hard" : "soft") + op + v + res;
}

bool met(const Threshold& t, const SignalObservation& o) {
  double thr = t.value.resolve(o.capacity);
  return info(t.signal).op == Operator::LessThan ? o.value < thr : o.value > thr;
}

std::string pod_name(const Pod& p) {
  if (!p.metadata_known) return "<" + p.uid + ">";
  return p.namespace_ + "/" + p.name;
}

double usage_over_request(const Pod& p) {
  if (p.requests.memory_bytes == 0) return std::nan("");
  return static_cast<double>(p.usage.memory_working_set_bytes) / static_cast<double>(p.requests.memory_bytes);
}

std::string flags(const Pod& p) {
  std::string f;
  if (p.critical) f += "critical,";
  if (p.static_pod) f += "static,";
  if (p.daemonset) f += "daemonset,";
  if (p.stale) f += "STALE,";
  if (!p.metadata_known) f += "no-metadata,";
  if (!f.empty()) f.pop_back();
  return f;
}

// Pods in memory eviction order, followed by those rank_pods leaves out.
std::vector<std::pair<int, const Pod*>> ordered(const TopInput& in) {
  std::vector<std::pair<int, const Pod*>> out;
  auto ranked = rank_pods(in.snapshot->pods, StarvedResource::Memory, *in.eviction);
  std::unordered_set<const Pod*> in_rank(ranked.begin(), ranked.end());
  int i = 1;
  for (const Pod* p : ranked) out.emplace_back(i++, p);
  for (const auto& p : in.snapshot->pods) {
    if (!in_rank.count(&p)) out.emplace_back(0, &p);
  }
  return out;
}

// Each pod's containers, read once per frame (a second read would see no growth).
class ContainerReadings {
 public:
  explicit ContainerReadings(const TopInput& in) : in_(in) {}
  const std::vector<ContainerMemory>& of(const Pod& p) {
    auto it = cache_.find(p.uid);
    if (it == cache_.end()) {
      it = cache_.emplace(p.uid, in_.container_memory ? in_.container_memory(p) : std::vector<ContainerMemory>{}).first;
    }
    return it->second;
  }

 private:
  const TopInput& in_;
  std::unordered_map<std::string, std::vector<ContainerMemory>> cache_;
};

const ContainerSpec* spec_of(const Pod& p, const ContainerMemory& m) {
  for (const auto& c : p.containers) {
    if (c.id == m.id) return &c;
  }
  return nullptr;
}

std::string container_label(const Pod& p, const ContainerMemory& m) {
  const ContainerSpec* c = spec_of(p, m);
  return c != nullptr ? c->name : m.id.substr(0, 12);  // no metadata: the runtime id
}

// "+300Mi/12.0s" since the reading before (the frame before), "" without one.
std::string growth_cell(const ContainerMemory& m) {
  if (!m.previous_working_set_bytes || !m.previous_age_seconds) return "";
  const double by = static_cast<double>(m.working_set_bytes) - static_cast<double>(*m.previous_working_set_bytes);
  std::string out(by >= 0 ? "+" : "-");  // appended: GCC 12 -O3 warns on a literal + a temporary (-Wrestrict)
  out += human_bytes(std::fabs(by));
  out += fmt("/%.1fs", *m.previous_age_seconds);
  return out;
}

// The memory candidates' per-container part, as the daemon adds it when an eviction starts.
void attribute_next(Decisions& d, const TopInput& in, ContainerReadings& readings) {
  for (auto& e : d.candidates) {
    if (info(e.signal).resource != StarvedResource::Memory || !e.local_storage_rule.empty()) continue;
    for (const auto& p : in.snapshot->pods) {
      if (p.uid == e.uid) attribute_containers(e, p, readings.of(p));
    }
  }
}

// Who would go next for the current pressure: the engine's own decision on
// this snapshot with soft grace periods treated as elapsed (a one-shot frame
// has no history), so a met soft threshold shows its victim too. `top` does
// not know what the daemon has in flight: nothing is excluded.
Decisions next_evictions(const TopInput& in) {
  EvictionConfig preview = *in.eviction;
  for (auto& t : preview.thresholds) t.grace_period = Duration::zero();
  Engine engine(std::move(preview));
  return engine.evaluate(*in.snapshot, in.snapshot->taken_at);
}

std::string next_text(const Decisions& d) {
  std::string stuck;
  for (Signal s : d.no_candidates) stuck += (stuck.empty() ? "" : ", ") + std::string(name(s));
  if (!stuck.empty()) stuck = "met with no pod that can be evicted: " + stuck;
  const auto& next = d.candidates;
  if (next.empty()) {
    return "\nNEXT EVICTION: none (" + (stuck.empty() ? std::string("no eviction threshold is met") : stuck) + ")\n";
  }
  std::string out = "\nNEXT EVICTION (per lane, for the thresholds met now)\n";
  if (!stuck.empty()) out += "  " + stuck + "\n";
  for (const auto& e : next) {
    out += std::string(eviction_reason(e)) + " (" + (e.kind == ThresholdKind::Hard ? "hard" : "soft") + "): " +
           (e.metadata_known && !e.name.empty() ? e.namespace_ + "/" + e.name : "<" + e.uid + ">") + "\n  why: " +
           explain_choice(e) + "\n";
    if (e.grew) out += "  grew: " + growth_text(*e.grew) + "\n";
    if (const std::string hurt = stall_text(e); !hurt.empty()) out += "  hurt: " + hurt + "\n";
  }
  return out;
}

nlohmann::json next_json(const std::vector<Eviction>& next) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& e : next) {
    a.push_back({{"signal", std::string(eviction_reason(e))},
                 {"kind", e.kind == ThresholdKind::Hard ? "hard" : "soft"},
                 {"uid", e.uid},
                 {"name", e.name},
                 {"namespace", e.namespace_},
                 {"grace_period_seconds", e.grace_period_seconds},
                 {"why", why_json(e, JsonKeys::Snake)}});
    a.back()["why"].update(nlohmann::json(attribution_json(e, false)));
  }
  return a;
}

nlohmann::json breakdown_json(const EphemeralStorageBreakdown& b) {
  return {{"logs_bytes", b.logs_bytes},
          {"logs_inodes", b.logs_inodes},
          {"empty_dir_bytes", b.empty_dir_bytes},
          {"empty_dir_inodes", b.empty_dir_inodes},
          {"writable_layers_bytes", b.writable_layers_bytes},
          {"writable_layers_inodes", b.writable_layers_inodes},
          {"writable_layers_measured", b.writable_layers_measured},
          {"containers", b.containers},
          {"writable_layers", b.writable_layers},
          {"unresolved_containers", b.unresolved_containers}};
}

nlohmann::json storage_json(const PodStorageStats& st) {
  const auto& wl = st.writable_layers;
  nlohmann::json unresolved = nlohmann::json::object();
  for (std::size_t i = 0; i < wl.unresolved.size(); ++i) unresolved[std::string(name(static_cast<LayerFailure>(i)))] = wl.unresolved[i];
  return {{"walks", st.walks},
          {"incomplete_walks", st.incomplete_walks},
          {"entries", st.entries},
          {"errors", st.errors},
          {"last_walk_seconds", std::chrono::duration<double>(st.last_walk_duration).count()},
          {"writable_layers",
           {{"measured", wl.measured},
            {"runtime_root", wl.runtime_root},
            {"not_measured_reason", wl.not_measured_reason},
            {"containers", wl.containers},
            {"layers", wl.layers},
            {"shared", wl.shared},
            {"skipped", wl.skipped},
            {"unresolved", unresolved}}}};
}

std::string storage_text(const PodStorageStats& st) {
  const auto& wl = st.writable_layers;
  std::string out = "ephemeral storage: " + std::to_string(st.walks) + " walks, last " +
                    fmt("%.0f ms", std::chrono::duration<double, std::milli>(st.last_walk_duration).count()) + ", " +
                    std::to_string(st.entries) + " entries";
  if (st.walks == 0) return out + "\n";
  if (!wl.measured) return out + "; writable layers NOT measured: " + wl.not_measured_reason + "\n";
  out += "; writable layers below " + wl.runtime_root + ": " + std::to_string(wl.layers) + " of " +
         std::to_string(wl.containers) + " containers";
  if (wl.shared != 0) out += ", " + std::to_string(wl.shared) + " shared";
  for (std::size_t i = 0; i < wl.unresolved.size(); ++i) {
    if (wl.unresolved[i] != 0) out += ", " + std::string(name(static_cast<LayerFailure>(i))) + " " + std::to_string(wl.unresolved[i]);
  }
  return out + "\n";
}

}  // namespace

std::string render_top_text(const TopInput& in) {
  const NodeSnapshot& s = *in.snapshot;
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "pressured top   cgroup %s (%s driver)   kubepods %s   pod metadata: %s\n",
                std::string(name(in.layout->version)).c_str(), std::string(name(in.layout->driver)).c_str(),
                in.layout->kubepods_memory_path.c_str(), in.metadata_source.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-30s %12s %12s %7s  %s\n", "SIGNAL", "VALUE", "CAPACITY", "STATE", "THRESHOLDS");
  out += line;
  for (const auto& si : kSignals) {
    const auto& o = s.signal(si.signal);
    std::string thr;
    bool any_met = false;
    for (const auto& t : in.eviction->thresholds) {
      if (t.signal != si.signal) continue;
      if (!thr.empty()) thr += "  ";
      thr += threshold_text(t, o ? std::optional<double>(o->capacity) : std::nullopt);
      if (o && met(t, *o)) {
        thr += " MET";
        any_met = true;
      }
    }
    if (!o) {
      std::snprintf(line, sizeof line, "%-30s %12s %12s %7s  %s\n", std::string(si.name).c_str(), "-", "-", "n/a", thr.c_str());
    } else {
      std::snprintf(line, sizeof line, "%-30s %12s %12s %7s  %s\n", std::string(si.name).c_str(),
                    value_text(si.signal, o->value).c_str(), value_text(si.signal, o->capacity).c_str(),
                    o->stale ? "STALE" : any_met ? "MET" : "ok", thr.c_str());
    }
    out += line;
  }
  auto pods = ordered(in);
  ContainerReadings readings(in);
  std::snprintf(line, sizeof line, "\nPODS (%zu, memory eviction order)\n%-4s %-44s %-10s %10s %10s %8s %10s %7s  %s\n",
                s.pods.size(), "RANK", "POD", "QOS", "REQUEST", "WORKSET", "USE/REQ", "RSS", "PSI10", "FLAGS");
  out += line;
  std::size_t n = 0;
  for (const auto& [rank, p] : pods) {
    if (in.max_pods != 0 && n++ >= in.max_pods) {
      out += "... " + std::to_string(pods.size() - in.max_pods) + " more\n";
      break;
    }
    double ur = usage_over_request(*p);
    std::string name = pod_name(*p);
    if (name.size() > 44) name = name.substr(0, 43) + "~";
    std::snprintf(line, sizeof line, "%-4s %-44s %-10s %10s %10s %8s %10s %7s  %s\n",
                  rank == 0 ? "-" : std::to_string(rank).c_str(), name.c_str(), std::string(pressured::name(p->qos)).c_str(),
                  p->requests.memory_bytes ? human_bytes(static_cast<double>(p->requests.memory_bytes)).c_str() : "-",
                  human_bytes(static_cast<double>(p->usage.memory_working_set_bytes)).c_str(),
                  std::isnan(ur) ? "-" : fmt("%.2f", ur).c_str(), human_bytes(static_cast<double>(p->usage.memory_rss_bytes)).c_str(),
                  p->memory_pressure ? fmt("%.2f", p->memory_pressure->some.avg10).c_str() : "-", flags(*p).c_str());
    out += line;
    // Each container's own reading under its pod; FLAGS shows what it grew by since the frame before.
    for (const ContainerMemory& m : readings.of(*p)) {
      const ContainerSpec* spec = spec_of(*p, m);
      const uint64_t req = spec != nullptr ? spec->memory_request_bytes : 0;
      std::string cname = "  " + container_label(*p, m);
      if (cname.size() > 44) cname = cname.substr(0, 43) + "~";
      std::snprintf(line, sizeof line, "%-4s %-44s %-10s %10s %10s %8s %10s %7s  %s\n", "", cname.c_str(), "",
                    req ? human_bytes(static_cast<double>(req)).c_str() : "-",
                    human_bytes(static_cast<double>(m.working_set_bytes)).c_str(),
                    req ? fmt("%.2f", static_cast<double>(m.working_set_bytes) / static_cast<double>(req)).c_str() : "-",
                    "-", m.memory_pressure ? fmt("%.2f", m.memory_pressure->some.avg10).c_str() : "-",
                    growth_cell(m).c_str());
      out += line;
    }
  }
  Decisions next = next_evictions(in);
  attribute_next(next, in, readings);
  out += next_text(next);
  const auto& c = in.counters;
  std::snprintf(line, sizeof line,
                "\nstale signal reads %llu  stale pod reads %llu  vanished pods %llu  reopened %llu  "
                "pods without metadata %llu  metadata without cgroup %llu\n",
                static_cast<unsigned long long>(c.stale_signal_reads), static_cast<unsigned long long>(c.stale_pod_reads),
                static_cast<unsigned long long>(c.vanished_pods), static_cast<unsigned long long>(c.reopened_cgroups),
                static_cast<unsigned long long>(c.pods_without_metadata),
                static_cast<unsigned long long>(c.metadata_without_cgroup));
  out += line;
  if (in.storage) out += storage_text(*in.storage);
  return out;
}

nlohmann::json render_top_json(const TopInput& in) {
  using nlohmann::json;
  const NodeSnapshot& s = *in.snapshot;
  json j;
  j["layout"] = {{"version", name(in.layout->version)},
                 {"driver", name(in.layout->driver)},
                 {"memory_mount", in.layout->memory_mount},
                 {"unified_mount", in.layout->unified_mount},
                 {"kubepods", in.layout->kubepods_memory_path}};
  j["metadata_source"] = in.metadata_source;
  json sigs = json::array();
  for (const auto& si : kSignals) {
    const auto& o = s.signal(si.signal);
    json e{{"signal", si.name}, {"observed", o.has_value()}};
    if (o) {
      e["value"] = o->value;
      e["capacity"] = o->capacity;
      e["stale"] = o->stale;
    }
    json thr = json::array();
    for (const auto& t : in.eviction->thresholds) {
      if (t.signal != si.signal) continue;
      thr.push_back({{"kind", t.kind == ThresholdKind::Hard ? "hard" : "soft"},
                     {"value", o ? t.value.resolve(o->capacity) : t.value.quantity},
                     {"met", o ? met(t, *o) : false}});
    }
    e["thresholds"] = thr;
    sigs.push_back(e);
  }
  j["signals"] = sigs;
  json pods = json::array();
  ContainerReadings readings(in);
  for (const auto& [rank, p] : ordered(in)) {
    json e{{"rank", rank == 0 ? json(nullptr) : json(rank)},
           {"uid", p->uid},
           {"name", p->name},
           {"namespace", p->namespace_},
           {"qos", name(p->qos)},
           {"metadata_known", p->metadata_known},
           {"critical", p->critical},
           {"static", p->static_pod},
           {"daemonset", p->daemonset},
           {"stale", p->stale},
           {"priority", p->priority},
           {"memory_request_bytes", p->requests.memory_bytes},
           {"memory_limit_bytes", p->limits.memory_bytes},
           {"working_set_bytes", p->usage.memory_working_set_bytes},
           {"rss_bytes", p->usage.memory_rss_bytes},
           {"cache_bytes", p->usage.memory_cache_bytes},
           {"pids", p->usage.pids},
           {"ephemeral_storage_bytes", p->usage.ephemeral_storage_bytes},
           {"ephemeral_storage_inodes", p->usage.inodes},
           {"cgroup_path", p->cgroup_path},
           {"cgroup_id", p->cgroup_id}};
    // The memory ranking keys, as the engine compares them (docs/engine.md, "Ranking").
    e["memory_rank_keys"] = rank_keys_json(rank_keys(*p, StarvedResource::Memory, *in.eviction), JsonKeys::Snake);
    double ur = usage_over_request(*p);
    e["usage_over_request"] = std::isnan(ur) ? json(nullptr) : json(ur);
    if (p->memory_pressure) e["memory_pressure_some_avg10"] = p->memory_pressure->some.avg10;
    if (p->memory_events) e["memory_events"] = {{"high", p->memory_events->high}, {"max", p->memory_events->max},
                                                {"oom", p->memory_events->oom}, {"oom_kill", p->memory_events->oom_kill}};
    if (p->ephemeral_storage) e["ephemeral_storage"] = breakdown_json(*p->ephemeral_storage);
    if (in.container_memory) {
      json cs = json::array();
      for (const ContainerMemory& m : readings.of(*p)) {
        const ContainerSpec* spec = spec_of(*p, m);
        json c{{"name", spec != nullptr ? json(spec->name) : json(nullptr)},
               {"id", m.id},
               {"working_set_bytes", m.working_set_bytes},
               {"usage_bytes", m.usage_bytes},
               {"memory_request_bytes", spec != nullptr ? json(spec->memory_request_bytes) : json(nullptr)}};
        if (m.previous_working_set_bytes && m.previous_age_seconds) {
          c["growth_bytes"] = static_cast<int64_t>(m.working_set_bytes) - static_cast<int64_t>(*m.previous_working_set_bytes);
          c["growth_seconds"] = *m.previous_age_seconds;
        }
        if (m.memory_pressure) c["memory_pressure_some_avg10"] = m.memory_pressure->some.avg10;
        cs.push_back(std::move(c));
      }
      e["containers"] = std::move(cs);
    }
    pods.push_back(e);
  }
  j["pods"] = pods;
  Decisions next = next_evictions(in);
  attribute_next(next, in, readings);
  j["next_evictions"] = next_json(next.candidates);
  nlohmann::json stuck = nlohmann::json::array();
  for (Signal sig : next.no_candidates) stuck.push_back(name(sig));
  j["next_evictions_none_for"] = stuck;  // thresholds met with no pod that can be evicted
  const auto& c = in.counters;
  j["counters"] = {{"observations", c.observations},        {"stale_signal_reads", c.stale_signal_reads},
                   {"stale_pod_reads", c.stale_pod_reads},  {"vanished_pods", c.vanished_pods},
                   {"reopened_cgroups", c.reopened_cgroups}, {"pods_without_metadata", c.pods_without_metadata},
                   {"metadata_without_cgroup", c.metadata_without_cgroup},
                   {"failed_pod_listings", c.failed_pod_listings}};
  if (in.storage) j["storage"] = storage_json(*in.storage);
  return j;
}

}  // namespace pressured::node
