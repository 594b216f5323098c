#pragma once
// One eviction told to the API server as the kubelet tells its own, as one
// job: the read of the pod (k8s/pod_check.hpp), then its status record
// (phase Failed, reason Evicted, DisruptionTarget) or, where that is refused
// or not wanted, the Eviction API (policy/v1, policy/v1beta1 on servers that
// do not serve v1, the pod's uid as precondition, a DELETE with the same
// grace on 429/500), then the pod's `Evicted` Event. A job carries what its
// first step found to its second, and is answered once, when both are done:
// no map pairs an Eviction with its Event. The reporter runs the two steps
// apart (k8s/reporter.hpp: Evictions go ahead of Events in its queue).

#include <atomic>
#include <optional>

#include "k8s/eviction_bodies.hpp"
#include "k8s/pod_check.hpp"
#include "k8s/reporter_config.hpp"
#include "pressured/policy.hpp"

namespace pressured::k8s {

/// Everything the API is told about one eviction.
struct EvictionJob {
  Eviction eviction;
  /// Its API step runs: false for a static or mirror pod (the kubelet would
  /// recreate it: killed locally, only its Event is sent).
  bool api = true;
  /// Its Event follows (the pod has a name and a namespace).
  bool event = true;
  /// Not None: the end of a pod whose status record the kubelet undid (the
  /// Eviction API with its fallback, no second Event).
  RecordUndone undone = RecordUndone::None;
  /// What its API step found (the Event's verdict: whether the pod is on
  /// this node); unset when that step did not run.
  std::optional<bool> on_node;
  /// What became of it (the answer once every step is done).
  EvictionResult result = EvictionResult::NotNeeded;
};

class EvictionWriter {
 public:
  explicit EvictionWriter(WriterDeps deps) : deps_(deps) {}

  /// The API step: the pod read, then the status record (with mark_failed)
  /// or the Eviction API; for an undone record, the Eviction API. Sets
  /// job.result and job.on_node.
  void write(EvictionJob& job);
  /// The Event step: only about a pod read on this node (the API step's
  /// read, or one of its own).
  void write_event(EvictionJob& job);

 private:
  EvictionResult evict(EvictionJob& job);
  EvictionResult end(EvictionJob& job);
  // PATCH pods/status; nullopt when refused (the caller falls back).
  std::optional<EvictionResult> mark_failed(const Eviction& e, const std::string& what,
                                            std::optional<int64_t> generation);
  // The Eviction API with its DELETE fallback.
  EvictionResult evict_through_api(const Eviction& e, const std::string& what);

  WriterDeps deps_;
  // Learnt from the first answer: the server serves policy/v1beta1 only.
  std::atomic<bool> eviction_v1beta1_{false};
};

}  // namespace pressured::k8s
