#pragma once
// The kubelet's local ephemeral-storage limits (eviction_manager.go,
// localStorageEviction): a pod is evicted, before and independently of any
// node-level threshold, when
//   1. an emptyDir volume's usage exceeds its sizeLimit,
//   2. the pod's total exceeds the sum of its containers' ephemeral-storage
//      limits (the kubelet's PodLimits: the limits that are set), or
//   3. a container's usage (its logs, plus its writable layer unless the
//      layers live on a dedicated image filesystem) exceeds its own limit,
// checked in that order; the first rule that holds names the reason. A pure
// function of the snapshot: the walker measures, this decides.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pressured/snapshot.hpp"

namespace pressured {

enum class LocalStorageRule : uint8_t { EmptyDir, Pod, Container };

/// The rule's name for logs and metrics, as the kubelet labels these
/// evictions in its own evictions metric: "emptydirfs.limit",
/// "ephemeralpodfs.limit", "ephemeralcontainerfs.limit".
std::string_view name(LocalStorageRule rule);

/// A pod over one of its local storage limits.
struct LocalStorageViolation {
  std::string uid;
  LocalStorageRule rule = LocalStorageRule::EmptyDir;
  std::string subject;  // the volume (EmptyDir) or container (Container) name; empty for Pod
  uint64_t usage_bytes = 0;
  uint64_t limit_bytes = 0;
  std::string message;  // the kubelet's sentence, e.g. "Usage of EmptyDir volume \"x\" exceeds the limit \"1Gi\". "
  bool operator==(const LocalStorageViolation&) const = default;
};

struct LocalStorageOptions {
  /// Writable layers are on a filesystem of their own (a dedicated imagefs):
  /// the kubelet then counts only logs against a container's limit.
  bool dedicated_imagefs = false;
};

/// The first limit `pod` exceeds, nullopt when none (or when nothing can be
/// said: metadata unknown, storage never walked, a critical or static pod,
/// which the kubelet refuses to evict).
std::optional<LocalStorageViolation> local_storage_violation(const Pod& pod, const LocalStorageOptions& options);

/// Every pod of the snapshot over a limit, in snapshot order.
std::vector<LocalStorageViolation> local_storage_violations(const NodeSnapshot& snapshot,
                                                            const LocalStorageOptions& options);

}  // namespace pressured
