// containerfs.* (KEP-4191): the thresholds the kubelet derives for them and
// the usage that ranks pods under them. Pure.
#include <algorithm>

#include "pressured/engine.hpp"

namespace pressured {

uint64_t pod_usage(const Pod& pod, Signal signal, ContainerfsLayout layout) {
  const StarvedResource r = info(signal).resource;
  // On nodefs (single filesystem, split) the containerfs holds logs and
  // emptyDirs too: the kubelet ranks it like nodefs, by everything.
  if (!is_containerfs(signal) || layout == ContainerfsLayout::Single || layout == ContainerfsLayout::Split ||
      layout == ContainerfsLayout::Unknown) {
    return pod_usage(pod, r);
  }
  if (!pod.ephemeral_storage) return 0;  // not walked yet: nothing known on that filesystem
  const EphemeralStorageBreakdown& b = *pod.ephemeral_storage;
  return r == StarvedResource::Inodes ? b.writable_layers_inodes : b.writable_layers_bytes;
}

RankKeys rank_keys(const Pod& pod, Signal signal, ContainerfsLayout layout, const EvictionConfig& config) {
  RankKeys k = rank_keys(pod, info(signal).resource, config);
  if (!is_containerfs(signal)) return k;
  k.usage = pod_usage(pod, signal, layout);
  k.zero_usage = k.usage == 0;
  k.over_request = k.usage > k.request;
  return k;
}

std::vector<Threshold> with_containerfs_thresholds(std::vector<Threshold> thresholds, ContainerfsLayout layout) {
  // The kubelet overrides containerfs thresholds given to it ("found
  // containerfs.available for hard eviction. ignoring"); the loader already
  // refused to keep them, this makes the function idempotent.
  std::erase_if(thresholds, [](const Threshold& t) { return is_containerfs(t.signal); });
  if (layout == ContainerfsLayout::Unknown) return thresholds;
  // Writable layers share the imagefs only in the imagefs layout; split and a
  // single filesystem take nodefs' (the kubelet: "Either split disk case
  // (containerfs=nodefs) or single filesystem"). A filesystem of their own is
  // split in the kubelet's sense (containerfs != imagefs): nodefs' too.
  const bool from_imagefs = layout == ContainerfsLayout::Imagefs;
  const Signal bytes = from_imagefs ? Signal::ImagefsAvailable : Signal::NodefsAvailable;
  const Signal inodes = from_imagefs ? Signal::ImagefsInodesFree : Signal::NodefsInodesFree;
  const std::size_t n = thresholds.size();
  for (std::size_t i = 0; i < n; ++i) {
    Threshold t = thresholds[i];
    if (t.signal == bytes) {
      t.signal = Signal::ContainerfsAvailable;
    } else if (t.signal == inodes) {
      t.signal = Signal::ContainerfsInodesFree;
    } else {
      continue;
    }
    thresholds.push_back(t);
  }
  return thresholds;
}

}  // namespace pressured
