#include "pods/pod_json.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "config/quantity.hpp"
#include "config/yaml_guard.hpp"
#include "k8s/bounded_json.hpp"

namespace pressured::pods {
namespace {

using nlohmann::json;

struct BadDocument {
  std::string what;
};

json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& v : n) a.push_back(yaml_to_json(v));
      return a;
    }
    case YAML::NodeType::Scalar: return n.Scalar();  // typed on use (numbers may be strings)
    default: return nullptr;
  }
}

const json* get(const json& o, std::string_view key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string get_string(const json& o, std::string_view key) {
  const json* v = get(o, key);
  if (v == nullptr) return {};
  if (v->is_string()) return v->get<std::string>();
  return v->dump();
}

std::optional<int64_t> get_int(const json& o, std::string_view key, std::string_view where) {
  const json* v = get(o, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number()) {
    // A float outside int64 (1e300) has no integer value: casting it is
    // undefined behaviour, not a clamp.
    double d = v->get<double>();
    if (std::isfinite(d) && d >= -9.2233720368547758e18 && d < 9.2233720368547758e18) return static_cast<int64_t>(d);
    throw BadDocument{std::string(where) + "." + std::string(key) + ": " + v->dump() + " is out of range"};
  }
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    int64_t n = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && p == s.data() + s.size()) return n;
  }
  throw BadDocument{std::string(where) + "." + std::string(key) + ": not an integer"};
}

// A resource quantity (string "128Mi" or a bare number) in base units.
std::optional<double> get_quantity(const json& resources, std::string_view name, std::string_view where) {
  const json* v = get(resources, name);
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  if (!v->is_string()) throw BadDocument{std::string(where) + "." + std::string(name) + ": not a quantity"};
  // Saturating: the API server stores quantities past a double (1e309), and
  // one the API server accepts must never make the pod unreadable.
  auto q = parse_quantity_saturating(v->get_ref<const std::string&>());
  if (!q) throw BadDocument{std::string(where) + "." + std::string(name) + ": " + q.error().message};
  return *q;
}

struct ContainerResources {
  std::optional<double> req_mem, req_cpu, req_eph, lim_mem, lim_cpu, lim_eph;
};

ContainerResources container_resources(const json& c, const std::string& where) {
  ContainerResources r;
  const json* res = get(c, "resources");
  if (res == nullptr) return r;
  if (const json* req = get(*res, "requests")) {
    r.req_mem = get_quantity(*req, "memory", where + ".requests");
    r.req_cpu = get_quantity(*req, "cpu", where + ".requests");
    r.req_eph = get_quantity(*req, "ephemeral-storage", where + ".requests");
  }
  if (const json* lim = get(*res, "limits")) {
    r.lim_mem = get_quantity(*lim, "memory", where + ".limits");
    r.lim_cpu = get_quantity(*lim, "cpu", where + ".limits");
    r.lim_eph = get_quantity(*lim, "ephemeral-storage", where + ".limits");
  }
  // API defaulting: a request left unset takes the limit's value.
  if (!r.req_mem && r.lim_mem) r.req_mem = r.lim_mem;
  if (!r.req_cpu && r.lim_cpu) r.req_cpu = r.lim_cpu;
  if (!r.req_eph && r.lim_eph) r.req_eph = r.lim_eph;
  return r;
}

// A byte quantity that must not be negative (a limit, a sizeLimit): the API
// server rejects negative ones, so one here is a broken document, not 0.
std::optional<uint64_t> get_bytes_limit(const json& o, std::string_view name, std::string_view where);

// Saturates: a request of 1e30 bytes is "more than the node has", never 0
// (casting a double past 2^64 is undefined behaviour).
uint64_t to_bytes(double v) {
  if (!(v > 0)) return 0;
  if (v >= 18446744073709551615.0) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(v);
}

std::optional<uint64_t> get_bytes_limit(const json& o, std::string_view name, std::string_view where) {
  auto q = get_quantity(o, name, where);
  if (!q) return std::nullopt;
  if (!(*q >= 0)) throw BadDocument{std::string(where) + "." + std::string(name) + ": must not be negative"};
  return to_bytes(*q);
}

// The runtime's container id without its "<runtime>://" scheme, as the
// container cgroup names it.
std::string container_id(std::string_view status_id) {
  auto sep = status_id.find("://");
  return std::string(sep == std::string_view::npos ? status_id : status_id.substr(sep + 3));
}

// Per-container ephemeral-storage limits, emptyDir sizeLimits and the
// running containers' ids: what the kubelet's local storage limits need.
LocalStorageSpec local_storage_spec(const json& pod, const json& spec, const std::string& where) {
  LocalStorageSpec ls;
  if (const json* cs = get(spec, "containers"); cs != nullptr && cs->is_array()) {
    for (const auto& c : *cs) {
      LocalStorageSpec::Container k;
      k.name = get_string(c, "name");
      if (const json* res = get(c, "resources")) {
        if (const json* lim = get(*res, "limits")) {
          k.ephemeral_storage_limit_bytes =
              get_bytes_limit(*lim, "ephemeral-storage", where + " container " + k.name + ".limits");
        }
      }
      ls.containers.push_back(std::move(k));
    }
  }
  if (const json* vs = get(spec, "volumes"); vs != nullptr) {
    if (!vs->is_array()) throw BadDocument{where + ".spec.volumes: not a list"};
    for (const auto& v : *vs) {
      const json* ed = get(v, "emptyDir");
      if (ed == nullptr) continue;
      LocalStorageSpec::EmptyDir e;
      e.name = get_string(v, "name");
      if (e.name.empty()) throw BadDocument{where + ".spec.volumes: an emptyDir volume without a name"};
      e.size_limit_bytes = get_bytes_limit(*ed, "sizeLimit", where + " volume " + e.name + ".emptyDir");
      ls.empty_dirs.push_back(std::move(e));
    }
  }
  if (const json* status = get(pod, "status")) {
    if (const json* st = get(*status, "containerStatuses"); st != nullptr && st->is_array()) {
      for (const auto& s : *st) {
        std::string n = get_string(s, "name"), id = container_id(get_string(s, "containerID"));
        for (auto& k : ls.containers) {
          if (k.name == n) k.id = id;
        }
      }
    }
  }
  return ls;
}

// Each container's requests and runtime id, as the kubelet's eviction
// message reads them (evictionMessage: spec.containers, then
// spec.initContainers; ids from the matching status lists).
std::vector<ContainerSpec> container_specs(const json& pod, const json& spec, const std::string& where) {
  std::vector<ContainerSpec> out;
  for (const char* list : {"containers", "initContainers"}) {
    const json* cs = get(spec, list);
    if (cs == nullptr || !cs->is_array()) continue;
    const bool init = std::string_view(list) == "initContainers";
    for (const auto& c : *cs) {
      ContainerSpec k;
      k.name = get_string(c, "name");
      k.init = init;
      auto r = container_resources(c, where + (init ? " init container " : " container ") + k.name);
      k.memory_request_bytes = to_bytes(r.req_mem.value_or(0));
      k.ephemeral_storage_request_bytes = to_bytes(r.req_eph.value_or(0));
      out.push_back(std::move(k));
    }
  }
  if (const json* status = get(pod, "status")) {
    for (const char* list : {"containerStatuses", "initContainerStatuses"}) {
      const json* st = get(*status, list);
      if (st == nullptr || !st->is_array()) continue;
      const bool init = std::string_view(list) == "initContainerStatuses";
      for (const auto& s : *st) {
        const std::string n = get_string(s, "name");
        for (auto& k : out) {
          if (k.name == n && k.init == init) k.id = container_id(get_string(s, "containerID"));
        }
      }
    }
  }
  return out;
}

// A resource that pod-level `spec.resources` may set (component-helpers'
// IsSupportedPodLevelResource): ephemeral-storage is not one.
bool pod_level_resource(std::string_view name) {
  return name == "cpu" || name == "memory" || name.starts_with("hugepages-");
}

bool any_pod_level_resource(const json* list) {
  if (list == nullptr || !list->is_object()) return false;
  return std::any_of(list->items().begin(), list->items().end(),
                     [](const auto& kv) { return pod_level_resource(kv.key()); });
}

// One resource's request summed over the containers as component-helpers'
// AggregateContainerRequests does (the KEP-753 sidecar formula): regular
// containers and restartable init containers (sidecars) add up; an init
// container needs its own request plus every sidecar declared before it, and
// the pod needs the largest of those. nullopt when no container names the
// resource (the helper leaves the key out of the list).
struct ContainerRequest {
  std::optional<double> request;
  bool restartable = false;
};

std::optional<double> aggregate_container_request(const std::vector<ContainerRequest>& containers,
                                                  const std::vector<ContainerRequest>& init_containers) {
  std::optional<double> sum;
  for (const auto& c : containers) {
    if (c.request) sum = sum.value_or(0) + *c.request;
  }
  double sidecars = 0;
  bool sidecar_named = false;
  std::optional<double> init_peak;
  for (const auto& c : init_containers) {
    const double own = c.request.value_or(0);
    double need = 0;
    if (c.restartable) {
      if (c.request) sum = sum.value_or(0) + own;
      sidecars += own;
      sidecar_named = sidecar_named || c.request.has_value();
      need = sidecars;
    } else {
      need = own + sidecars;
    }
    // Only a container that names the resource, or one running beside a
    // sidecar that does, puts the key in the init containers' list.
    if (c.request || sidecar_named) init_peak = std::max(init_peak.value_or(0), need);
  }
  if (init_peak && (!sum || *init_peak > *sum)) sum = init_peak;
  return sum;
}

// The request the kubelet's eviction manager ranks a pod by, per resource:
// its GetResourceRequestQuantity (pkg/api/v1/resource) over component-helpers'
// PodRequests, from the spec alone (never status: while an in-place resize is
// pending the ranking still reads the spec).
//  - When pod-level resources are set (spec.resources names cpu, memory or
//    hugepages in requests or limits), container requests are skipped
//    altogether; the pod-level request replaces them for the resources it
//    supports, and the others (ephemeral-storage) read 0.
//  - spec.overhead is added only to a request that is not zero.
// A document that did not go through the API server is defaulted as the API
// server would: a container request left unset takes its limit (done by
// container_resources), and with pod-level limits set a pod-level request
// left unset takes the containers' aggregate, else the pod-level limit.
PodResources kubelet_requests(const json& spec, const std::string& where) {
  std::vector<ContainerRequest> mem, eph, init_mem, init_eph;
  if (const json* cs = get(spec, "containers"); cs != nullptr && cs->is_array()) {
    for (const auto& c : *cs) {
      auto r = container_resources(c, where + " container " + get_string(c, "name"));
      mem.push_back({r.req_mem, false});
      eph.push_back({r.req_eph, false});
    }
  }
  if (const json* ics = get(spec, "initContainers"); ics != nullptr && ics->is_array()) {
    for (const auto& c : *ics) {
      auto r = container_resources(c, where + " init container " + get_string(c, "name"));
      const bool restartable = get_string(c, "restartPolicy") == "Always";
      init_mem.push_back({r.req_mem, restartable});
      init_eph.push_back({r.req_eph, restartable});
    }
  }
  const std::optional<double> containers_mem = aggregate_container_request(mem, init_mem);
  const std::optional<double> containers_eph = aggregate_container_request(eph, init_eph);

  const json* pod_res = get(spec, "resources");
  const json* pod_req = pod_res != nullptr ? get(*pod_res, "requests") : nullptr;
  const json* pod_lim = pod_res != nullptr ? get(*pod_res, "limits") : nullptr;
  const bool pod_level = any_pod_level_resource(pod_req) || any_pod_level_resource(pod_lim);

  // Plain doubles, not optionals: GCC 12 at -O3 sees optionals assigned
  // across these branches as maybe-uninitialized (a false positive).
  double memory = pod_level ? 0.0 : containers_mem.value_or(0);
  double ephemeral = pod_level ? 0.0 : containers_eph.value_or(0);
  std::optional<double> pod_mem;
  if (pod_req != nullptr) pod_mem = get_quantity(*pod_req, "memory", where + ".spec.resources.requests");
  if (pod_mem) {
    memory = *pod_mem;
  } else if (pod_lim != nullptr && pod_lim->is_object() && !pod_lim->empty()) {
    if (containers_mem) {
      memory = *containers_mem;
    } else if (auto lim = get_quantity(*pod_lim, "memory", where + ".spec.resources.limits")) {
      memory = *lim;
    }
  }

  if (const json* oh = get(spec, "overhead")) {
    const auto oh_mem = get_quantity(*oh, "memory", where + ".spec.overhead");
    const auto oh_eph = get_quantity(*oh, "ephemeral-storage", where + ".spec.overhead");
    if (oh_mem && memory != 0) memory += *oh_mem;
    if (oh_eph && ephemeral != 0) ephemeral += *oh_eph;
  }
  return PodResources{to_bytes(memory), to_bytes(ephemeral)};
}

// spec.resources.requests.memory when pod-level resources are set (the API
// server defaults a pod-level request left out to the pod-level limit).
std::optional<uint64_t> pod_level_memory_request(const json& spec, const std::string& where) {
  const json* pod_res = get(spec, "resources");
  if (pod_res == nullptr) return std::nullopt;
  const json* req = get(*pod_res, "requests");
  const json* lim = get(*pod_res, "limits");
  if (!any_pod_level_resource(req) && !any_pod_level_resource(lim)) return std::nullopt;
  std::optional<double> v;
  if (req != nullptr) v = get_quantity(*req, "memory", where + ".spec.resources.requests");
  if (!v && lim != nullptr) v = get_quantity(*lim, "memory", where + ".spec.resources.limits");
  if (!v) return std::nullopt;
  return to_bytes(*v);
}

// metadata.labels, bounded (pod_json.hpp). Labels only advise plugins: one
// that cannot be kept costs that label, never the pod; each reason goes to
// `problems` ("metadata.labels: ...").
std::shared_ptr<const PodLabels> parse_labels(const json& meta, std::vector<std::string>& problems) {
  const json* labels = get(meta, "labels");
  if (labels == nullptr) return nullptr;
  auto out = std::make_shared<PodLabels>();
  if (!labels->is_object()) {
    out->incomplete = true;
    problems.push_back("metadata.labels: not a map, no label kept");
    return out;
  }
  std::size_t bytes = 0, over_bounds = 0;
  for (const auto& kv : labels->items()) {  // sorted by key (nlohmann's object is a std::map)
    const std::string& key = kv.key();
    if (!kv.value().is_string()) {
      out->incomplete = true;
      problems.push_back("metadata.labels." + key.substr(0, 64) + ": not a string, left out");
      continue;
    }
    const std::string& value = kv.value().get_ref<const std::string&>();
    if (key.empty() || key.size() > pods::kMaxPodLabelKeyBytes || value.size() > pods::kMaxPodLabelValueBytes) {
      out->incomplete = true;
      problems.push_back("metadata.labels." + key.substr(0, 64) + ": key of " + std::to_string(key.size()) +
                         " bytes or value of " + std::to_string(value.size()) + " bytes is over the API's limits (" +
                         std::to_string(pods::kMaxPodLabelKeyBytes) + ", " +
                         std::to_string(pods::kMaxPodLabelValueBytes) + "), left out");
      continue;
    }
    if (out->entries.size() == pods::kMaxPodLabels || bytes + key.size() + value.size() > pods::kMaxPodLabelBytes) {
      out->incomplete = true;
      ++over_bounds;
      continue;
    }
    bytes += key.size() + value.size();
    out->entries.emplace_back(key, value);
  }
  if (over_bounds > 0) {
    problems.push_back("metadata.labels: " + std::to_string(labels->size()) + " labels, " +
                       std::to_string(over_bounds) + " left out past the first " + std::to_string(pods::kMaxPodLabels) +
                       " or " + std::to_string(pods::kMaxPodLabelBytes) + " bytes");
  }
  out->entries.shrink_to_fit();
  return out;
}

PodMetadata parse_pod(const json& pod, PodTrust trust, PodLabelUse labels, std::vector<std::string>& problems) {
  PodMetadata m;
  const json* meta = get(pod, "metadata");
  if (meta == nullptr) throw BadDocument{"Pod without metadata"};
  m.uid = get_string(*meta, "uid");
  m.name = get_string(*meta, "name");
  m.namespace_ = get_string(*meta, "namespace");
  if (m.namespace_.empty()) m.namespace_ = "default";
  const std::string where = "pod " + (m.name.empty() ? m.uid : m.namespace_ + "/" + m.name);
  if (labels == PodLabelUse::Keep) m.labels = parse_labels(*meta, problems);

  if (const json* ann = get(*meta, "annotations")) {
    // The mirror annotation holds the static pod's config hash, the uid its
    // cgroup is named after. A tenant may write it too, but the kubelet never
    // runs a pod carrying it (it deletes it as an orphaned mirror pod), and
    // the observer matches a cgroup by its own uid before any mirror.
    if (const json* mirror = get(*ann, "kubernetes.io/config.mirror")) {
      m.static_pod = true;
      m.mirror_of = mirror->is_string() ? mirror->get<std::string>() : std::string();
    }
    // config.source is the kubelet's word only in its own copy (it overwrites
    // it on every pod it runs); in the API server it is whatever the pod's
    // author wrote.
    if (trust != PodTrust::ApiServer) {
      std::string source = get_string(*ann, "kubernetes.io/config.source");
      m.static_pod = m.static_pod || (!source.empty() && source != "api");
    }
  }
  if (const json* owners = get(*meta, "ownerReferences"); owners != nullptr && owners->is_array()) {
    for (const auto& o : *owners) {
      if (get_string(o, "kind") == "DaemonSet") m.daemonset = true;
    }
  }

  const json empty = json::object();
  const json* spec = get(pod, "spec");
  if (spec == nullptr) spec = &empty;
  std::optional<int64_t> prio = get_int(*spec, "priority", where + ".spec");
  // spec.priority is resolved by admission from the class (the kubelet reads
  // nothing else); only an operator's file may name a class without it.
  if (!prio && trust == PodTrust::File) {
    std::string pc = get_string(*spec, "priorityClassName");
    if (pc == "system-node-critical") prio = kSystemCriticalPriority + 1000;
    else if (pc == "system-cluster-critical") prio = kSystemCriticalPriority;
  }
  m.priority = static_cast<int32_t>(std::clamp<int64_t>(prio.value_or(0), INT32_MIN, INT32_MAX));
  m.critical = m.static_pod || prio.value_or(0) >= kSystemCriticalPriority;
  m.termination_grace_period_seconds = get_int(*spec, "terminationGracePeriodSeconds", where + ".spec").value_or(30);

  // Limits as the kubelet adds them up (requests: kubelet_requests).
  double sum_lim_mem = 0, sum_lim_eph = 0;
  bool all_mem_limited = true, all_eph_limited = true, any_container = false;
  bool any_set = false, guaranteed = true;
  auto qos_account = [&](const ContainerResources& r) {
    if (r.req_mem.value_or(0) > 0 || r.req_cpu.value_or(0) > 0 || r.lim_mem.value_or(0) > 0 || r.lim_cpu.value_or(0) > 0) {
      any_set = true;
    }
    if (!r.lim_mem || !r.lim_cpu || r.req_mem.value_or(0) != *r.lim_mem || r.req_cpu.value_or(0) != *r.lim_cpu) {
      guaranteed = false;
    }
  };
  if (const json* cs = get(*spec, "containers"); cs != nullptr && cs->is_array()) {
    for (const auto& c : *cs) {
      any_container = true;
      auto r = container_resources(c, where + " container " + get_string(c, "name"));
      qos_account(r);
      if (r.lim_mem) sum_lim_mem += *r.lim_mem; else all_mem_limited = false;
      if (r.lim_eph) sum_lim_eph += *r.lim_eph; else all_eph_limited = false;
    }
  }
  // The kubelet's PodLimits counts the limits that are set, whether or not
  // every container sets one (unlike `limits` above, which ranking uses).
  double set_lim_eph = 0, max_init_set_lim_eph = 0;
  bool any_lim_eph = false;
  if (const json* cs = get(*spec, "containers"); cs != nullptr && cs->is_array()) {
    for (const auto& c : *cs) {
      auto r = container_resources(c, where + " container " + get_string(c, "name"));
      if (r.lim_eph) {
        set_lim_eph += *r.lim_eph;
        any_lim_eph = true;
      }
    }
  }
  double max_init_lim_mem = 0, max_init_lim_eph = 0;
  if (const json* ics = get(*spec, "initContainers"); ics != nullptr && ics->is_array()) {
    for (const auto& c : *ics) {
      auto r = container_resources(c, where + " init container " + get_string(c, "name"));
      qos_account(r);
      if (get_string(c, "restartPolicy") == "Always") {  // sidecar: runs alongside the containers
        if (r.lim_mem) sum_lim_mem += *r.lim_mem; else all_mem_limited = false;
        if (r.lim_eph) sum_lim_eph += *r.lim_eph; else all_eph_limited = false;
        if (r.lim_eph) {
          set_lim_eph += *r.lim_eph;
          any_lim_eph = true;
        }
        continue;
      }
      if (r.lim_eph) {
        max_init_set_lim_eph = std::max(max_init_set_lim_eph, *r.lim_eph);
        any_lim_eph = true;
      }
      max_init_lim_mem = std::max(max_init_lim_mem, r.lim_mem.value_or(0));
      max_init_lim_eph = std::max(max_init_lim_eph, r.lim_eph.value_or(0));
    }
  }
  double overhead_mem = 0;
  if (const json* oh = get(*spec, "overhead")) overhead_mem = get_quantity(*oh, "memory", where + ".spec.overhead").value_or(0);
  m.requests = kubelet_requests(*spec, where);
  m.limits.memory_bytes =
      any_container && all_mem_limited ? to_bytes(std::max(sum_lim_mem, max_init_lim_mem) + overhead_mem) : 0;
  m.limits.ephemeral_storage_bytes = any_container && all_eph_limited ? to_bytes(std::max(sum_lim_eph, max_init_lim_eph)) : 0;

  m.local_storage = local_storage_spec(pod, *spec, where);
  m.containers = container_specs(pod, *spec, where);
  m.pod_level_memory_request_bytes = pod_level_memory_request(*spec, where);
  if (any_lim_eph) m.local_storage.pod_limit_bytes = to_bytes(std::max(set_lim_eph, max_init_set_lim_eph));

  QosClass derived = !any_set ? QosClass::BestEffort : guaranteed ? QosClass::Guaranteed : QosClass::Burstable;
  m.qos = derived;
  if (const json* status = get(pod, "status")) {
    if (auto q = parse_qos(get_string(*status, "qosClass"))) m.qos = *q;
    m.phase = get_string(*status, "phase");
  }
  return m;
}

// A resource field whose value cannot be read, and what it concerns: a
// memory quantity only the memory signals, an ephemeral-storage one or an
// emptyDir sizeLimit only the storage signals, a CPU one neither (it only
// decides the QoS class, which the observer takes from the cgroup).
struct UnreadableField {
  json::json_pointer at;
  std::string why;  // "container c.limits.memory: ..."
  bool memory = false, storage = false;
};

// Why the quantity `v` cannot be used; empty when it can.
std::string quantity_problem(const json& v, bool non_negative) {
  double d = 0;
  if (v.is_number()) {
    d = v.get<double>();
  } else if (v.is_string()) {
    auto q = parse_quantity_saturating(v.get_ref<const std::string&>());
    if (!q) return q.error().message;
    d = *q;
  } else {
    return "not a quantity";
  }
  return non_negative && d < 0 ? "must not be negative" : "";
}

std::vector<UnreadableField> unreadable_fields(const json& pod) {
  std::vector<UnreadableField> out;
  const json* spec = get(pod, "spec");
  if (spec == nullptr) return out;
  auto check = [&](const json& holder, const json::json_pointer& at, const std::string& where, std::string_view key,
                   bool memory, bool storage, bool non_negative) {
    const json* v = get(holder, key);
    if (v == nullptr) return;
    std::string problem = quantity_problem(*v, non_negative);
    if (problem.empty()) return;
    out.push_back({at / std::string(key), where + "." + std::string(key) + ": " + problem, memory, storage});
  };
  for (const char* list : {"containers", "initContainers"}) {
    const json* cs = get(*spec, list);
    if (cs == nullptr || !cs->is_array()) continue;
    for (std::size_t i = 0; i < cs->size(); ++i) {
      const json* res = get((*cs)[i], "resources");
      if (res == nullptr) continue;
      const std::string who = std::string(list[0] == 'i' ? "init container " : "container ") + get_string((*cs)[i], "name");
      for (const char* kind : {"requests", "limits"}) {
        const json* q = get(*res, kind);
        if (q == nullptr) continue;
        const auto at = json::json_pointer("/spec") / list / i / "resources" / kind;
        const std::string where = who + "." + kind;
        check(*q, at, where, "memory", true, false, false);
        check(*q, at, where, "cpu", false, false, false);
        check(*q, at, where, "ephemeral-storage", false, true, std::string_view(kind) == "limits");
      }
    }
  }
  if (const json* oh = get(*spec, "overhead")) {
    check(*oh, json::json_pointer("/spec/overhead"), "spec.overhead", "memory", true, false, false);
  }
  if (const json* vs = get(*spec, "volumes"); vs != nullptr && vs->is_array()) {
    for (std::size_t i = 0; i < vs->size(); ++i) {
      if (const json* ed = get((*vs)[i], "emptyDir")) {
        check(*ed, json::json_pointer("/spec/volumes") / i / "emptyDir", "volume " + get_string((*vs)[i], "name") + ".emptyDir",
              "sizeLimit", false, true, true);
      }
    }
  }
  return out;
}

// Lists of lists are legal but never deep: a bound keeps a hostile answer
// (items nested 20000 deep) from overflowing the stack.
constexpr int kMaxListDepth = 8;

void collect(const json& doc, ParsedPods& out, PodTrust trust, PodLabelUse labels, int depth = 0) {
  if (!doc.is_object()) {
    ++out.skipped;
    return;
  }
  std::string kind = get_string(doc, "kind");
  const json* items = get(doc, "items");
  if (kind == "PodList" || kind == "List" || (kind.empty() && items != nullptr)) {
    if (items == nullptr) return;  // an empty list
    if (!items->is_array()) throw BadDocument{kind + ".items is not a list"};
    if (depth >= kMaxListDepth) throw BadDocument{"lists nested deeper than " + std::to_string(kMaxListDepth) + " levels"};
    for (const auto& it : *items) collect(it, out, trust, labels, depth + 1);
    return;
  }
  if (kind != "Pod" && !(kind.empty() && get(doc, "metadata") && get(doc, "spec"))) {
    ++out.skipped;
    return;
  }
  // One bad pod costs that pod, not the whole answer. When its uid is
  // readable it is kept, marked unparsable: the observer then treats it as a
  // pod whose metadata is unknown and never evicts it (it might be critical).
  try {
    // A field that cannot be read costs the signals it concerns, not the
    // pod: it is cut from a copy, the rest is parsed, and the pod is marked
    // unevictable on those signals only.
    const std::vector<UnreadableField> bad_fields = unreadable_fields(doc);
    PodMetadata m;
    std::vector<std::string> problems;
    if (bad_fields.empty()) {
      m = parse_pod(doc, trust, labels, problems);
    } else {
      json cut = doc;
      for (const auto& f : bad_fields) cut.at(f.at.parent_pointer()).erase(f.at.back());
      m = parse_pod(cut, trust, labels, problems);
      for (const auto& f : bad_fields) {
        m.memory_spec_unparsable = m.memory_spec_unparsable || f.memory;
        m.storage_spec_unparsable = m.storage_spec_unparsable || f.storage;
        if (out.errors.size() < 10) {
          out.errors.push_back("pod " + m.namespace_ + "/" + m.name + " " + f.why);
        }
      }
    }
    if (m.uid.empty()) {
      ++out.skipped;
      return;
    }
    for (const auto& p : problems) {
      if (out.errors.size() < 10) out.errors.push_back("pod " + m.namespace_ + "/" + m.name + " " + p);
    }
    out.pods.push_back(std::move(m));
  } catch (const BadDocument& e) {
    ++out.skipped;
    if (out.errors.size() < 10) out.errors.push_back(e.what);
    PodMetadata bad;
    if (const json* meta = get(doc, "metadata"); meta != nullptr && meta->is_object()) {
      if (const json* uid = get(*meta, "uid"); uid != nullptr && uid->is_string()) bad.uid = uid->get<std::string>();
      if (const json* n = get(*meta, "name"); n != nullptr && n->is_string()) bad.name = n->get<std::string>();
      if (const json* ns = get(*meta, "namespace"); ns != nullptr && ns->is_string()) bad.namespace_ = ns->get<std::string>();
    }
    if (bad.uid.empty()) return;
    bad.unparsable = true;
    out.pods.push_back(std::move(bad));
  }
}

}  // namespace

Result<ParsedPods> parse_pod_documents(std::string_view text, DocumentFormat format, PodTrust trust,
                                       PodLabelUse labels) {
  ParsedPods out;
  if (format == DocumentFormat::Auto) {
    auto first = text.find_first_not_of(" \t\r\n");
    format = first != std::string_view::npos && (text[first] == '{' || text[first] == '[') ? DocumentFormat::Json
                                                                                            : DocumentFormat::Yaml;
  }
  if (format == DocumentFormat::Json) {
    // The one bounded reader of API answers (k8s/bounded_json.hpp).
    auto doc = k8s::parse_bounded_json(text);
    if (!doc) return Error{EINVAL, doc.error().message};
    return parse_pod_json(*doc, trust, labels);
  }
  try {
    // yaml-cpp's LoadAll() never returns on some inputs (a stray ','):
    // walk the events once, bounded, before building any tree.
    YamlLimits limits;
    limits.max_depth = k8s::kMaxJsonDepth;
    if (auto g = check_yaml(text, limits); !g) return Error{EINVAL, g.error().message};
    for (const auto& n : YAML::LoadAll(std::string(text))) {
      if (n.IsNull()) continue;
      collect(yaml_to_json(n), out, trust, labels);
    }
  } catch (const BadDocument& e) {
    return Error{EINVAL, e.what};
  } catch (const std::exception& e) {
    return Error{EINVAL, std::string("syntax error: ") + e.what()};
  }
  return out;
}

Result<ParsedPods> parse_pod_json(const nlohmann::json& doc, PodTrust trust, PodLabelUse labels) {
  ParsedPods out;
  try {
    if (doc.is_array()) {
      for (const auto& d : doc) collect(d, out, trust, labels);
    } else {
      collect(doc, out, trust, labels);
    }
  } catch (const BadDocument& e) {
    return Error{EINVAL, e.what};
  } catch (const std::exception& e) {
    return Error{EINVAL, std::string("syntax error: ") + e.what()};
  }
  return out;
}

}  // namespace pressured::pods
