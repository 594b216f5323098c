// Which container grew, and who was hurt (attribution.hpp).
#include "node/attribution.hpp"

#include <cstdio>


namespace pressured::node {

std::optional<ContainerGrowth> grown_container(const std::vector<ContainerUsage>& containers) {
  const ContainerUsage* grew = nullptr;
  uint64_t most = 0;
  for (const auto& c : containers) {
    if (!c.previous_usage || c.usage <= *c.previous_usage) continue;
    const uint64_t by = c.usage - *c.previous_usage;
    if (by >= kMinGrowthBytes && by > most) {
      most = by;
      grew = &c;
    }
  }
  if (grew != nullptr) {
    return ContainerGrowth{grew->name,    ContainerGrowth::Basis::Growth, grew->usage, grew->request,
                           static_cast<int64_t>(most), grew->previous_age_seconds.value_or(0)};
  }
  const ContainerUsage* over = nullptr;
  uint64_t furthest = 0;
  for (const auto& c : containers) {
    if (c.usage <= c.request) continue;
    if (c.usage - c.request > furthest) {
      furthest = c.usage - c.request;
      over = &c;
    }
  }
  if (over == nullptr) return std::nullopt;
  return ContainerGrowth{over->name, ContainerGrowth::Basis::OverRequest, over->usage, over->request,
                         static_cast<int64_t>(furthest), 0};
}

void attribute_containers(Eviction& e, const Pod& pod, const std::vector<ContainerMemory>& memory) {
  e.containers = container_usage(pod, StarvedResource::Memory, memory);
  e.grew = grown_container(e.containers);
  e.memory_pressure = pod.memory_pressure;
}

nlohmann::ordered_json attribution_json(const Eviction& e, bool camel) {
  auto key = [camel](const char* c, const char* s) { return std::string(camel ? c : s); };
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  if (e.grew) {
    nlohmann::ordered_json g;
    g["container"] = e.grew->name;
    g["basis"] = e.grew->basis == ContainerGrowth::Basis::Growth ? "growth" : key("overRequest", "over_request");
    g["usage"] = e.grew->usage;
    g["request"] = e.grew->request;
    g["bytes"] = e.grew->bytes;
    if (e.grew->basis == ContainerGrowth::Basis::Growth) g["seconds"] = e.grew->seconds;
    o["grew"] = std::move(g);
  }
  nlohmann::ordered_json stall = nlohmann::ordered_json::object();
  if (e.memory_pressure) stall["pod"] = e.memory_pressure->some.avg10;
  nlohmann::ordered_json per = nlohmann::ordered_json::object();
  for (const auto& c : e.containers) {
    if (c.memory_pressure) per[c.name] = c.memory_pressure->some.avg10;
  }
  if (!per.empty()) stall["containers"] = std::move(per);
  if (!stall.empty()) o[key("memoryStall", "memory_stall")] = std::move(stall);
  return o;
}

}  // namespace pressured::node
