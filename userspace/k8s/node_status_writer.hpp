#pragma once
// What the API is told about the node itself: pressured's own node
// conditions (PATCH nodes/status; the kubelet's condition types are never
// written), a NoSchedule taint of its own while a pressure condition is true
// (a read-modify-write of the Node on its resourceVersion, others' taints
// kept as they are), and the node's EvictionThresholdMet Event before an
// eviction for a node threshold, as the kubelet's eviction manager records it.

#include <array>

#include "k8s/backoff.hpp"
#include "k8s/node_bodies.hpp"
#include "k8s/reporter_config.hpp"
#include "pressured/engine.hpp"

namespace pressured::k8s {

class NodeStatusWriter {
 public:
  explicit NodeStatusWriter(WriterDeps deps);

  /// Patches the conditions (lastTransitionTime for those in `flipped`)
  /// and, with taint_nodes, sets or clears the taints to match `status`.
  void publish(const std::array<bool, kConditionCount>& status, const std::array<bool, kConditionCount>& flipped);
  /// The node's EvictionThresholdMet Event for `e` (none for an own
  /// local-storage limit: not a node threshold).
  void threshold_met(const Eviction& e);

 private:
  void sync_taints(const std::array<bool, kConditionCount>& status);

  WriterDeps deps_;
  // The pause between two taint conflicts (the worker's only).
  Backoff conflict_pause_;
};

}  // namespace pressured::k8s
