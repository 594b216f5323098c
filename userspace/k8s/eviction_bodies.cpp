#include "k8s/eviction_bodies.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>

#include "engine/eviction_words.hpp"

namespace pressured::k8s {

using json = nlohmann::json;

std::string pod_path(const Eviction& e) { return "/api/v1/namespaces/" + e.namespace_ + "/pods/" + e.name; }

std::string rfc3339_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string pod_status_patch(const Eviction& e, const std::string& now, std::optional<int64_t> observed_generation) {
  const std::string message = eviction_message(e);
  json status{{"phase", "Failed"}, {"reason", "Evicted"}, {"message", message}};
  // The kubelet sets DisruptionTarget for threshold evictions only, not for
  // an own local-storage limit (eviction_manager.go, synchronize vs
  // localStorageEviction).
  if (e.local_storage_rule.empty()) {
    status["conditions"] = json::array({json{{"type", "DisruptionTarget"},
                                             {"status", "True"},
                                             {"reason", "TerminationByKubelet"},
                                             {"message", message},
                                             {"lastTransitionTime", now}}});
    if (observed_generation) status["conditions"][0]["observedGeneration"] = *observed_generation;
  }
  json j{{"metadata", {{"uid", e.uid}}}, {"status", std::move(status)}};
  return j.dump();
}

int64_t api_grace_period_seconds(const Eviction& e) { return std::max<int64_t>(1, e.grace_period_seconds); }

std::string eviction_body(const Eviction& e, const std::string& api_version) {
  json j{{"apiVersion", api_version},
         {"kind", "Eviction"},
         {"metadata", {{"name", e.name}, {"namespace", e.namespace_}}},
         {"deleteOptions",
          {{"gracePeriodSeconds", api_grace_period_seconds(e)}, {"preconditions", {{"uid", e.uid}}}}}};
  return j.dump();
}

std::string delete_body(const Eviction& e) {
  json j{{"apiVersion", "v1"},
         {"kind", "DeleteOptions"},
         {"gracePeriodSeconds", api_grace_period_seconds(e)},
         {"preconditions", {{"uid", e.uid}}}};
  return j.dump();
}

namespace {

// The Event of one eviction has a name of its own, "<pod>.<eviction id>" (the
// kubelet's "<pod>.<hex time>" shape), so that a POST retried after the server
// stored it but the answer was lost (a timeout on a loaded API server) meets
// 409 AlreadyExists instead of recording the eviction twice; a resumed
// eviction keeps its id and so its Event. Without an id: a generated name.
// The kubelet's annotations (AnnotatedEventf) ride on the Event's metadata.
json event_metadata(const Eviction& e) {
  json meta;
  if (e.id.empty()) {
    meta = {{"generateName", e.name + "."}, {"namespace", e.namespace_}};
  } else {
    constexpr std::size_t kMaxName = 253;  // a DNS subdomain
    std::string pod = e.name.substr(0, kMaxName - std::min(kMaxName - 1, e.id.size() + 1));
    // A cut name must still end its label with an alphanumeric character.
    while (!pod.empty() && !std::isalnum(static_cast<unsigned char>(pod.back()))) pod.pop_back();
    meta = {{"name", pod + "." + e.id}, {"namespace", e.namespace_}};
  }
  auto annotations = eviction_annotations(e);
  if (!annotations.empty()) meta["annotations"] = annotations;
  return meta;
}

}  // namespace

std::string warning_event(json metadata, json involved, std::string_view reason, const std::string& message,
                          const std::string& node, const std::string& now) {
  json j{{"apiVersion", "v1"},
         {"kind", "Event"},
         {"metadata", std::move(metadata)},
         {"involvedObject", std::move(involved)},
         {"reason", reason},
         {"message", message},
         {"type", "Warning"},
         {"source", {{"component", "pressured"}, {"host", node}}},
         {"reportingComponent", "pressured"},
         {"reportingInstance", node},
         {"firstTimestamp", now},
         {"lastTimestamp", now},
         {"count", 1}};
  return j.dump();
}

std::string event_body(const Eviction& e, const std::string& node, const std::string& now) {
  return warning_event(
      event_metadata(e),
      {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", e.name}, {"namespace", e.namespace_}, {"uid", e.uid}},
      "Evicted", eviction_message(e), node, now);
}

bool eviction_version_not_served(const HttpResponse& r) {
  if (r.status != 400 && r.status != 404) return false;
  return r.body.find("no kind \\\"Eviction\\\" is registered") != std::string::npos ||
         r.body.find("no kind \"Eviction\" is registered") != std::string::npos;
}

}  // namespace pressured::k8s
