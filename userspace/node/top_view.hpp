#pragma once
// `pressured top` rendering: pure functions from a snapshot (+ config) to
// text or JSON, so tests can check them without a terminal.

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/eviction_words.hpp"  // human_bytes
#include "pressured/config.hpp"
#include "pressured/observer.hpp"
#include "pressured/snapshot.hpp"

namespace pressured::node {

struct TopInput {
  const NodeSnapshot* snapshot = nullptr;
  const CgroupLayout* layout = nullptr;
  const EvictionConfig* eviction = nullptr;
  ObserverCounters::Values counters;
  std::string metadata_source;  // describe() of the metadata source
  std::size_t max_pods = 0;     // 0: all
  std::optional<PodStorageStats> storage;  // the ephemeral storage walker's stats, when it runs
  /// A pod's containers read now (NodeObserver::container_memory), at most
  /// once per pod and frame: shown under each pod, and what the next
  /// evictions' "grew" and "hurt" come from. Unset: no containers shown.
  std::function<std::vector<ContainerMemory>(const Pod&)> container_memory;
};


/// The text frame: signals against thresholds, then pods in eviction order.
std::string render_top_text(const TopInput& in);

/// The same as JSON (one object per frame).
nlohmann::json render_top_json(const TopInput& in);

}  // namespace pressured::node
