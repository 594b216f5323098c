#pragma once
// Which container of a memory eviction's victim grew, and who was hurt: the
// victim pod's and each container's own memory stall time (v2
// memory.pressure). For the eviction's log line, its "why", `pressured top`
// and pressured_eviction_containers_total (docs/observation.md, "Per
// container"). Pure.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pressured/engine.hpp"
#include "pressured/snapshot.hpp"

namespace pressured::node {

/// Growth below this is a reading's noise, not a container growing.
inline constexpr uint64_t kMinGrowthBytes = 1 << 20;

/// The container that grew: the one whose usage rose most (at least
/// kMinGrowthBytes) since its reading before, when one did; else the one
/// furthest over its request (the kubelet's offending container); nullopt
/// when neither.
std::optional<ContainerGrowth> grown_container(const std::vector<ContainerUsage>& containers);

/// A memory eviction's per-container part from its pod and the containers'
/// readings: `containers` (the kubelet's accounting, container_usage),
/// `grew`, and the pod's own memory stall time.
void attribute_containers(Eviction& e, const Pod& pod, const std::vector<ContainerMemory>& memory);

/// {"grew": {...} | absent, "memoryStall": {"pod": avg10, "containers": {name: avg10}} | absent}
/// in `camel` or snake keys, for the decision's "why".
nlohmann::ordered_json attribution_json(const Eviction& e, bool camel);

}  // namespace pressured::node
