#pragma once
// The bodies pressured sends about its node: the EvictionThresholdMet Event,
// its own node conditions, and its NoSchedule taints. Pure: JSON in and out.

#include <array>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "pressured/engine.hpp"
#include "pressured/signals.hpp"

namespace pressured::k8s {

/// Body of the node's Event before an eviction for a node threshold, as the
/// kubelet's eviction manager records it (eviction_manager.go, synchronize):
/// Warning `EvictionThresholdMet`, "Attempting to reclaim <resource>", about
/// the Node (uid: its name, as the kubelet's nodeRef), in namespace default,
/// named "<node>.<eviction id>" so that a retry or a resumed eviction records
/// it once. nullopt for an own local-storage limit (not a node threshold).
std::optional<std::string> threshold_met_event_body(const Eviction& e, const std::string& node,
                                                    const std::string& now_rfc3339);
/// Strategic-merge patch of nodes/status for pressured's own condition types;
/// lastTransitionTime is set only for conditions in `flipped`.
std::string conditions_patch(const std::string& prefix, const std::array<bool, kConditionCount>& status,
                             const std::array<bool, kConditionCount>& flipped, const std::string& now_rfc3339);
/// The taint keys pressured owns, by Condition.
std::array<std::string, kConditionCount> taint_keys(const std::string& prefix);
/// The Node's new spec.taints when pressured's own NoSchedule taints must
/// change for `status`, or nullopt when they are already right. Every other
/// taint is kept as it is, in order.
std::optional<nlohmann::json> updated_taints(const nlohmann::json& current, const std::string& prefix,
                                             const std::array<bool, kConditionCount>& status,
                                             const std::string& now_rfc3339);
}  // namespace pressured::k8s
