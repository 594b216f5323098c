#include "engine/eviction_words.hpp"

#include <cmath>
#include <cstdio>
#include <iterator>
#include <vector>

#include <fmt/format.h>

namespace pressured {
namespace {

// Binary-suffixed bytes ("1.5Gi"), or a plain count.
std::string amount_text(uint64_t v, StarvedResource r) {
  if (r != StarvedResource::Memory && r != StarvedResource::EphemeralStorage) return std::to_string(v);
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  double d = static_cast<double>(v);
  std::size_t u = 0;
  while (d >= 1024 && u + 1 < std::size(kUnits)) {
    d /= 1024;
    ++u;
  }
  char b[32];
  if (u == 0) {
    std::snprintf(b, sizeof b, "%llu", static_cast<unsigned long long>(v));
  } else {
    std::snprintf(b, sizeof b, d >= 100 ? "%.0f%s" : "%.1f%s", d, kUnits[u]);
  }
  return b;
}

std::string_view resource_word(StarvedResource r) {
  switch (r) {
    case StarvedResource::Memory: return "memory";
    case StarvedResource::EphemeralStorage: return "ephemeral storage";
    case StarvedResource::Inodes: return "inodes";
    case StarvedResource::Pids: return "pids";
    case StarvedResource::None: break;
  }
  return "nothing";
}

// A byte amount as the kubelet prints a resource.Quantity in its messages
// (canonical BinarySI: the largest suffix that represents it exactly, else
// plain bytes), so "available: 255Mi" reads and parses as the kubelet's.
std::string byte_quantity(uint64_t v) {
  static constexpr const char* kSuffix[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (v == 0) return "0";
  int i = -1;
  while (i + 1 < 6 && v % 1024 == 0) {
    v /= 1024;
    ++i;
  }
  return std::to_string(v) + (i < 0 ? "" : kSuffix[i]);
}

std::string percent(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%%", v);
  return b;
}

std::string quantity(StarvedResource r, double v) {
  const uint64_t n = v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v));
  if (r == StarvedResource::Memory || r == StarvedResource::EphemeralStorage) return byte_quantity(n);
  return std::to_string(n);
}

// The kubelet's pod sentence ("Pod %s was using %s, request is %s, has
// larger consumption of %v. ") and offending_pod annotations: memory
// evictions of a pod with pod-level resources and a pod-level memory request
// (PodLevelResources, on by default from 1.34), whatever its usage.
bool names_pod(const Eviction& e) {
  return e.local_storage_rule.empty() && info(e.signal).resource == StarvedResource::Memory &&
         e.pod_level_request.has_value();
}

// The containers the kubelet names: usage above the container's own request.
std::vector<const ContainerUsage*> offending_containers(const Eviction& e) {
  std::vector<const ContainerUsage*> out;
  if (!e.local_storage_rule.empty()) return out;
  const StarvedResource r = info(e.signal).resource;
  if (r != StarvedResource::Memory && r != StarvedResource::EphemeralStorage) return out;
  for (const auto& c : e.containers) {
    if (c.usage > c.request) out.push_back(&c);
  }
  return out;
}

std::string mib(uint64_t bytes) { return fmt::format("{:.1f}Mi", static_cast<double>(bytes) / (1 << 20)); }

}  // namespace

std::string starved_resource_name(Signal s) {
  switch (info(s).resource) {
    case StarvedResource::Memory: return "memory";
    case StarvedResource::EphemeralStorage: return "ephemeral-storage";
    case StarvedResource::Inodes: return "inodes";
    case StarvedResource::Pids: return "pids";
    case StarvedResource::None: break;
  }
  return "io";
}

std::string pod_label(const std::string& ns, const std::string& name, const std::string& uid) {
  if (name.empty()) return "pod " + uid;
  return fmt::format("pod {}/{} ({})", ns, name, uid);
}

namespace {

// A signed amount ("-512Mi").
std::string signed_amount_text(int64_t v, StarvedResource r) {
  if (v >= 0) return amount_text(static_cast<uint64_t>(v), r);
  std::string s = "-";
  s += amount_text(v == INT64_MIN ? static_cast<uint64_t>(INT64_MAX) + 1 : static_cast<uint64_t>(-v), r);
  return s;
}

}  // namespace

std::string describe_keys(const RankKeys& k, StarvedResource r) {
  if (k.kubelet) {
    // The kubelet's keys only (QoS is not one of them).
    std::string s;
    if (k.no_stats) s += "no-stats ";
    if (r != StarvedResource::Pids && !k.no_stats) s += k.over_request ? "over-request " : "within-request ";
    s += "priority=" + std::to_string(k.priority);
    s += " usage=" + amount_text(k.usage, r);
    if (r != StarvedResource::Pids) {
      s += " request=" + amount_text(k.request, r);
      s += " usage-request=" + signed_amount_text(k.kubelet_amount(), r);
    }
    return s;
  }
  std::string s = "qos=" + std::string(name(k.qos));
  s += k.over_request ? " over-request" : " within-request";
  s += " priority=" + std::to_string(k.priority);
  s += " usage=" + amount_text(k.usage, r);
  s += " request=" + amount_text(k.request, r);
  if (k.daemonset_last) s += " daemonset-last";
  return s;
}

namespace {

std::string runner_up_label(const RunnerUp& ru) {
  return !ru.name.empty() ? ru.namespace_ + "/" + ru.name : "<" + ru.uid + ">";
}

// "qos: BestEffort before Burstable": the deciding key and what it compared.
std::string deciding_words(const RankKeys& v, const RankKeys& o, StarvedResource r) {
  const RankKey key = deciding_key(v, o);
  std::string s(name(key));
  s += ": ";
  switch (key) {
    case RankKey::ZeroUsage: s += "the runner-up uses no " + std::string(resource_word(r)); break;
    case RankKey::DaemonSet: s += "the runner-up is a DaemonSet pod, evicted last"; break;
    case RankKey::Qos: s += std::string(name(v.qos)) + " before " + std::string(name(o.qos)); break;
    case RankKey::OverRequest: s += "over its request before a pod within its request"; break;
    case RankKey::Priority:
      s += "priority " + std::to_string(v.priority) + " below " + std::to_string(o.priority);
      break;
    case RankKey::Amount:
      if (v.kubelet) {
        s += r == StarvedResource::Pids
                 ? "runs " + amount_text(v.usage, r) + " processes, the runner-up " + amount_text(o.usage, r)
                 : "usage - request " + signed_amount_text(v.kubelet_amount(), r) + ", the runner-up " +
                       signed_amount_text(o.kubelet_amount(), r);
        break;
      }
      // "Exceeds its request" only means something when there is a request.
      s += v.over_request && (v.request != 0 || o.request != 0)
               ? "exceeds its request by " + amount_text(v.amount(), r) + ", the runner-up by " + amount_text(o.amount(), r)
               : "uses " + amount_text(v.amount(), r) + ", the runner-up " + amount_text(o.amount(), r);
      break;
    case RankKey::Uid: s += "every key equal, the smaller uid goes first"; break;
    case RankKey::NoStats: s += "no stats for it (never read), evicted first as the kubelet does"; break;
  }
  return s;
}

}  // namespace

namespace {

// "; plugins: batch-first protect shop/web (\"serving\")": what plugins changed.
std::string plugin_words(const Eviction& e) {
  if (e.plugin_notes.empty()) return "";
  // The first three (the log, the Event and `top` stay short); the "why"
  // JSON holds every note.
  constexpr std::size_t kShown = 3;
  std::string s = "; plugins:";
  for (std::size_t i = 0; i < e.plugin_notes.size() && i < kShown; ++i) {
    const PluginNote& n = e.plugin_notes[i];
    s += (i == 0 ? " " : ", ") + n.plugin + " " + n.action + " " + n.pod;
    if (!n.reason.empty()) s += " (\"" + n.reason + "\")";
  }
  if (e.plugin_notes.size() > kShown) s += " and " + std::to_string(e.plugin_notes.size() - kShown) + " more";
  return s;
}

}  // namespace

std::string explain_choice(const Eviction& e) {
  const StarvedResource r = info(e.signal).resource;
  // Over its own limit: no ranking chose it, nobody else was compared.
  if (!e.local_storage_rule.empty()) {
    return "over its own local storage limit (" + e.local_storage_rule + "): usage " + amount_text(e.keys.usage, r) +
           " of the pod; no ranking, the first pod over a limit";
  }
  std::string s = "victim " + describe_keys(e.keys, r);
  const std::string predicted = e.prediction.empty() ? std::string() : "; " + e.prediction;
  if (!e.runner_up) return s + "; no runner-up (the only pod that could be evicted)" + plugin_words(e) + predicted;
  return s + "; runner-up " + runner_up_label(*e.runner_up) + " " + describe_keys(e.runner_up->keys, r) +
         "; chosen by " + deciding_words(e.keys, e.runner_up->keys, r) + plugin_words(e) + predicted;
}

std::string choice_summary(const Eviction& e) {
  if (!e.local_storage_rule.empty()) return "over its own local storage limit, before any node threshold";
  if (!e.runner_up) return "the only pod that could be evicted" + plugin_words(e);
  return "chosen before " + runner_up_label(*e.runner_up) + " by " +
         deciding_words(e.keys, e.runner_up->keys, info(e.signal).resource) + plugin_words(e);
}

std::string kubelet_eviction_message(const Eviction& e) {
  // Over its own limit, not a node threshold: the kubelet's sentence naming
  // the volume or container (localStorageEviction) is the whole message.
  if (!e.local_storage_rule.empty()) return e.local_storage_message;
  const StarvedResource r = info(e.signal).resource;
  const std::string res = starved_resource_name(e.signal);
  std::string m = "The node was low on resource: " + res + ". ";
  if (info(e.signal).is_psi) {
    // A pressure percentage has no "available" amount (the kubelet has no
    // PSI signal: pressured's sentence, in its shape).
    char b[96];
    std::snprintf(b, sizeof b, "Threshold: %.6g%%, observed: %.2f%%. ", e.threshold_value, e.observed);
    m += b;
  } else {
    m += "Threshold quantity: " + quantity(r, e.threshold_value) + ", available: " + quantity(r, e.observed) + ". ";
  }
  if (names_pod(e)) {
    m += fmt::format("Pod {} was using {}, request is {}, has larger consumption of {}. ",
                     e.name.empty() ? e.uid : e.name, quantity(r, static_cast<double>(e.keys.usage)),
                     quantity(r, static_cast<double>(*e.pod_level_request)), res);
  }
  for (const ContainerUsage* c : offending_containers(e)) {
    m += fmt::format("Container {} was using {}, request is {}, has larger consumption of {}. ", c->name,
                     quantity(r, static_cast<double>(c->usage)), quantity(r, static_cast<double>(c->request)), res);
  }
  return m;
}

std::string eviction_message(const Eviction& e) {
  const StarvedResource r = info(e.signal).resource;
  std::string m = kubelet_eviction_message(e);
  // pressured's own facts, after the kubelet's message.
  std::string own;
  if (!e.local_storage_rule.empty()) {
    own = "Evicted by pressured (eviction " + e.id + ") for " + e.local_storage_rule + " (usage " +
          quantity(r, e.observed) + ", limit " + quantity(r, e.threshold_value) + ")";
  } else {
    own = "Evicted by pressured (eviction " + e.id + ") for " + std::string(eviction_reason(e)) + " (" +
          (e.kind == ThresholdKind::Hard ? "hard" : "soft") + " threshold" + (e.signal_stale ? ", stale reading" : "") +
          ")";
  }
  if (!e.wake_source.empty()) own += ", woken by " + e.wake_source;
  if (e.detection_latency_seconds) {
    char b[48];
    std::snprintf(b, sizeof b, "%.1f ms", *e.detection_latency_seconds * 1e3);
    own += std::string(", decided ") + b + " after the kernel's event";
  }
  own += "; " + choice_summary(e) + ".";
  // The Event message is for humans in `kubectl describe`; the kubelet's
  // stays well under 1 KiB and so does this one. pressured's part is cut
  // first: the kubelet's stays whole for what parses it.
  if (m.size() + own.size() > kMaxEventMessage) {
    if (m.size() + 3 >= kMaxEventMessage) {
      m = m.substr(0, kMaxEventMessage - 3) + "...";
    } else {
      m += own.substr(0, kMaxEventMessage - 3 - m.size()) + "...";
    }
    return m;
  }
  return m + own;
}

std::map<std::string, std::string> eviction_annotations(const Eviction& e) {
  // The kubelet passes no annotations for its local-storage-limit evictions.
  if (!e.local_storage_rule.empty()) return {};
  const StarvedResource r = info(e.signal).resource;
  std::string names, usage;
  for (const ContainerUsage* c : offending_containers(e)) {
    // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false
    // positive) on a literal + a temporary string.
    if (!names.empty()) names += ',';
    names += c->name;
    if (!usage.empty()) usage += ',';
    usage += quantity(r, static_cast<double>(c->usage));
  }
  std::map<std::string, std::string> a{
      {"offending_containers", names}, {"offending_containers_usage", usage}, {"starved_resource", starved_resource_name(e.signal)}};
  if (names_pod(e)) {
    a["offending_pod"] = e.name.empty() ? e.uid : e.name;
    a["offending_pod_usage"] = quantity(r, static_cast<double>(e.keys.usage));
  }
  if (e.grew) {
    a["pressured.io/grown-container"] = e.grew->name;
    a["pressured.io/grown-container-detail"] = growth_text(*e.grew);
  }
  return a;
}

std::string human_bytes(double b) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
  int u = 0;
  double v = b;
  while (std::fabs(v) >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char out[48];
  if (u == 0) {
    std::snprintf(out, sizeof out, "%.0f", v);
  } else {
    std::snprintf(out, sizeof out, v >= 100 ? "%.0f%s" : "%.1f%s", v, kUnits[u]);
  }
  return out;
}

std::string growth_text(const ContainerGrowth& g) {
  auto mib = [](uint64_t bytes) { return human_bytes(static_cast<double>(bytes)); };
  // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false
  // positive) on a literal + a temporary string.
  std::string out = "container ";
  out += g.name;
  if (g.basis == ContainerGrowth::Basis::Growth) {
    char b[64];
    std::snprintf(b, sizeof b, "%.1fs", g.seconds);
    out += " grew by ";
    out += mib(static_cast<uint64_t>(g.bytes));
    out += " in ";
    out += b;
    out += " to ";
    out += mib(g.usage);
    out += " (request ";
    out += mib(g.request);
    out += ")";
    return out;
  }
  out += " is ";
  out += mib(static_cast<uint64_t>(g.bytes));
  out += " over its request (";
  out += mib(g.usage);
  out += " of ";
  out += mib(g.request);
  out += "; no reading before to tell growth)";
  return out;
}

std::string stall_text(const Eviction& e) {
  std::string parts;
  if (e.memory_pressure) {
    parts = "pod ";
    parts += percent(e.memory_pressure->some.avg10);
  }
  for (const auto& c : e.containers) {
    if (!c.memory_pressure) continue;
    if (!parts.empty()) parts += ", ";
    parts += c.name;
    parts += ' ';
    parts += percent(c.memory_pressure->some.avg10);
  }
  if (parts.empty()) return parts;
  return "memory stall (some avg10): " + parts;
}

std::string attribution_sentences(const Eviction& e) {
  std::string out;
  if (e.grew) {
    out += " Grew: ";
    out += growth_text(*e.grew);
    out += '.';
  }
  if (const std::string hurt = stall_text(e); !hurt.empty()) {
    out += " Hurt: ";
    out += hurt;
    out += '.';
  }
  return out;
}

std::string eviction_start_line(const Eviction& e, bool dry_run) {
  return fmt::format("{}eviction {}: {} qos={} signal={} observed={:.0f} threshold={:.0f} ({}) grace={}s cgroup={}: "
                     "{} Why: {}",
                     dry_run ? "[dry-run] " : "", e.id, pod_label(e.namespace_, e.name, e.uid), name(e.qos),
                     eviction_reason(e), e.observed, e.threshold_value,
                     e.kind == ThresholdKind::Hard ? "hard" : "soft", e.grace_period_seconds, e.cgroup_path,
                     eviction_message(e), explain_choice(e)) +
         (e.relief ? fmt::format(" Reclaim first: relief {} asked {:.1f}Mi, got back {:.1f}Mi in {:.1f} ms; still short.",
                                 e.relief->id, static_cast<double>(e.relief->asked_bytes) / (1 << 20),
                                 static_cast<double>(e.relief->reclaimed_bytes) / (1 << 20), e.relief->seconds * 1e3)
                   : std::string()) +
         attribution_sentences(e);
}

std::string relief_record_line(const ReliefRecord& r) {
  std::string verdict = r.dry_run ? "dry run, nothing written"
                        : r.failed ? "failed, evicting as usual"
                        : r.eviction_avoided
                            ? "eviction avoided"
                            : fmt::format("{} still short, evicting as usual", name(r.signal));
  return fmt::format("relief {}: {} ({}) short {}: asked {} from {} pod cgroup(s), got back {} in {:.1f} ms{}: {}", r.id,
                     name(r.signal), r.kind == ThresholdKind::Hard ? "hard" : "soft", mib(r.shortfall_bytes),
                     mib(r.asked_bytes), r.cgroups, mib(r.reclaimed_bytes),
                     std::chrono::duration<double, std::milli>(r.took).count(), r.timed_out ? " (stopped at its budget)" : "",
                     verdict);
}

}  // namespace pressured
