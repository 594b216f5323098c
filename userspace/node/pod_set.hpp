#pragma once
// Which pods the node has (docs/observation.md, "Drivers and pod cgroups",
// "Pod metadata sources"): the pod cgroups listed under kubepods and its QoS
// tiers, kept from the last listing when a listing fails partway, a watch on
// those directories that tells a decision the set moved, and each pod's
// metadata merged by uid (a static pod's cgroup by its mirror pod), with the
// fail-safe that never lets a pod the configured source does not describe be
// evicted. One part of the kernel NodeObserver; the pods' usage is
// pod_usage.hpp's.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cgroup/discovery.hpp"
#include "kernel/fd.hpp"
#include "pressured/observer.hpp"

namespace pressured::node {

class PodSet {
 public:
  /// `metadata` may be null (pods known from cgroups only); `counters`
  /// (failed listings, pods without metadata, ...) must outlive it.
  PodSet(CgroupLayout layout, std::shared_ptr<PodMetadataSource> metadata, ObserverCounters& counters);

  /// The pod cgroups now, sorted by memory path. A listing that fails
  /// partway (EMFILE, EACCES) keeps the pods of `last_listing()` whose
  /// cgroups still exist with the same id (failed_pod_listings, logged once):
  /// a short list would let a lower-ranked pod go first. No kubepods: empty
  /// (logged once). Watches (or stamps) the pod directories first
  /// (changed_since_listing).
  std::vector<cgroup::PodDir> list(const std::function<std::vector<cgroup::PodDir>()>& last_listing);

  /// Whether a pod cgroup may have been created, removed or recreated since
  /// the last list(); true before any list(). One read of an inotify fd that
  /// watches kubepods and its QoS tiers (nothing to read: unchanged); where
  /// inotify cannot watch them, a stamp of their entries (one getdents per
  /// directory, ~150 us of CPU at 1000 pods).
  bool changed_since_listing();

  /// Merges the source's current metadata into `pods` (a full observation's,
  /// uid and cgroup path set): names, priority, requests, critical/static/
  /// DaemonSet. A pod the configured source does not describe (no good
  /// answer, not listed, listed unparsably) is metadata_unavailable: never
  /// evicted. Updates the match gauges, logs the source's health on each
  /// change, and asks the source for a refresh when a new unknown pod shows.
  void merge_metadata(TimePoint now, std::vector<Pod>& pods);

  /// NodeObserver::list_pods: a directory scan, containers included.
  std::vector<PodCgroup> describe() const;

 private:
  // The entries of the directories pods live in (kubepods and its QoS
  // tiers), by name and inode number, hashed in any order: a pod cgroup
  // created, removed or recreated changes them. A link count alone (2 + the
  // subdirectories) missed one pod removed and another created in the same
  // tier. One getdents per directory; 0 when absent.
  using QosStamps = std::array<uint64_t, 3>;
  QosStamps qos_dir_stamps() const;
  // Watches the QoS directories for entries created, removed or renamed and
  // empties what the watch queued so far; false when it cannot (no inotify
  // instance, a directory that cannot be watched), and the stamps decide.
  bool watch_qos_dirs();
  void index_mirrors(const std::shared_ptr<const PodMetadataMap>& meta);

  CgroupLayout layout_;
  std::shared_ptr<PodMetadataSource> metadata_;
  ObserverCounters& counters_;
  QosStamps qos_stamps_{};
  bool qos_stamps_taken_ = false;
  kernel::Fd inotify_;  // the watch on the QoS directories (non-blocking)
  bool watching_ = false;  // the last list() armed the watch: it, not the stamps, answers
  bool watch_fired_ = false;  // an entry moved since the last list()
  bool warned_watch_ = false;
  bool warned_kubepods_ = false;
  bool protecting_ = false;  // some pods are unevictable for lack of metadata (logged on each change)
  std::unordered_set<std::string> known_unknown_;
  // A pod without metadata this long while the source answers is more than
  // a lagging watch (its timeout plus the stall grace: 70 s by default).
  static constexpr Duration kMetadataLagWarning = std::chrono::minutes(2);
  std::unordered_map<std::string, TimePoint> unknown_since_;  // pods without metadata: first seen so
  std::unordered_set<std::string> warned_unknown_;
  std::shared_ptr<const PodMetadataMap> indexed_meta_;
  std::unordered_map<std::string, const PodMetadata*> mirror_index_;  // by kubernetes.io/config.mirror
};

}  // namespace pressured::node
