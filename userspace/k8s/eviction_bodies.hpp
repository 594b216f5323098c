#pragma once
// The bodies pressured sends about one eviction, as the kubelet's own
// evictions read in the API: the pod's status record, the Eviction (and the
// DELETE of its fallback), and the pod's Event. Pure: JSON text out; the
// words in them come from engine/eviction_words.hpp.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "k8s/http_client.hpp"
#include "pressured/engine.hpp"

namespace pressured::k8s {

/// "/api/v1/namespaces/<ns>/pods/<name>": the pod an eviction is about.
std::string pod_path(const Eviction& e);
/// Now, as RFC 3339 UTC with seconds.
std::string rfc3339_now();

/// Strategic-merge patch of pods/status that records an eviction as the
/// kubelet does: phase Failed, reason Evicted, the message, and the
/// DisruptionTarget condition (reason TerminationByKubelet; not for an own
/// local-storage limit, as the kubelet's). The uid in metadata makes the
/// server refuse it for a pod recreated under the name.
/// `observed_generation`: the pod's metadata.generation, set only when the
/// server serves the field (the DisruptionTarget condition then carries it as
/// observedGeneration, as the kubelet's does from 1.34; an older server
/// would drop or refuse it).
std::string pod_status_patch(const Eviction& e, const std::string& now_rfc3339,
                             std::optional<int64_t> observed_generation = std::nullopt);
/// The grace period pressured asks the API for when it ends a pod: the
/// eviction's, and at least 1 s. In the API a grace of 0 is a force deletion:
/// the pod object goes before its containers are confirmed gone, and a
/// StatefulSet can then run two pods of one identity. The kubelet's
/// "immediate" is 1 s too (immediateEvictionGracePeriodSeconds). The local
/// kill of a hard eviction stays immediate (the record keeps 0).
int64_t api_grace_period_seconds(const Eviction& e);
/// Body of the Eviction subresource request (policy/v1, or policy/v1beta1
/// for servers older than 1.22), with api_grace_period_seconds().
std::string eviction_body(const Eviction& e, const std::string& api_version = "policy/v1");
/// True when an Eviction answer says the server does not serve this
/// Eviction version (1.20 answers 400 "no kind "Eviction" is registered for
/// version "policy/v1"").
bool eviction_version_not_served(const HttpResponse& r);
/// Body of the DELETE fallback (the same grace period, at least 1 s; uid
/// precondition).
std::string delete_body(const Eviction& e);
/// Body of the core/v1 Event.
std::string event_body(const Eviction& e, const std::string& node, const std::string& now_rfc3339);
/// A Warning Event from pressured on `node`, as the kubelet's recorder
/// shapes one (the pod's Evicted Event, the node's EvictionThresholdMet).
std::string warning_event(nlohmann::json metadata, nlohmann::json involved, std::string_view reason,
                          const std::string& message, const std::string& node, const std::string& now_rfc3339);

}  // namespace pressured::k8s
