#pragma once
// The read of a pod before any write about it (its status record, Eviction,
// DELETE or Event). pressured writes only about pods the API server shows on
// its own node, under the uid it killed: a pod's spec.nodeName never changes
// once set, and every write carries the uid read here (status patch,
// Eviction and DELETE preconditions, the Event's involvedObject), so what
// this read shows on this node is what the write reaches.

#include <optional>
#include <string>

#include "k8s/reporter_config.hpp"
#include "pressured/engine.hpp"

namespace pressured::k8s {

/// What became of an API eviction (Reporter::set_eviction_hook).
enum class EvictionResult {
  Landed,     // the API accepted the Eviction or its DELETE fallback
  Recorded,   // the API accepted the status record (Failed, Evicted): the pod object stays, its status the kubelet's
  NotNeeded,  // the pod is gone, is another pod now, is already terminating or terminal, or is static (Event only)
  GaveUp,     // the retry budget spent, or an answer that cannot be acted on
  Dropped,    // never sent: the queue was full
};

struct PodCheck {
  /// The pod's fate without a write: NotNeeded when gone, recreated under
  /// the name, on another node or terminating (and, with `terminal_done`,
  /// Failed or Succeeded; Recorded when that is an eviction record already);
  /// GaveUp when its node cannot be told. nullopt: write.
  std::optional<EvictionResult> done;
  /// The read found a pod of this uid whose spec.nodeName is this node (its
  /// Event may be sent, whatever else `done` says).
  bool on_node = false;
  /// The pod's metadata.generation when the server tracks it (1.34+: it
  /// then also serves a condition's observedGeneration).
  std::optional<int64_t> generation;
};

/// Reads `e`'s pod. `what` names the write in log lines. `count_fate`:
/// false for an Event's own read (the pod's fate is its Eviction's to count
/// and log).
PodCheck check_pod(const WriterDeps& deps, const Eviction& e, const std::string& what, bool terminal_done,
                   bool count_fate = true);

}  // namespace pressured::k8s
