#include "engine/local_storage.hpp"

#include "config/quantity.hpp"

namespace pressured {
namespace {

const NamedStorageUsage* find(const std::vector<NamedStorageUsage>& parts, std::string_view name) {
  for (const auto& p : parts) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string quantity(uint64_t bytes) { return format_quantity(static_cast<double>(bytes)); }

LocalStorageViolation violation(const Pod& pod, LocalStorageRule rule, std::string subject, uint64_t usage,
                                uint64_t limit) {
  LocalStorageViolation v;
  v.uid = pod.uid;
  v.rule = rule;
  v.usage_bytes = usage;
  v.limit_bytes = limit;
  // The kubelet's sentences (emptyDirMessageFmt, podEphemeralStorageMessageFmt,
  // containerEphemeralStorageMessageFmt), trailing space included.
  switch (rule) {
    case LocalStorageRule::EmptyDir:
      v.message = "Usage of EmptyDir volume \"" + subject + "\" exceeds the limit \"" + quantity(limit) + "\". ";
      break;
    case LocalStorageRule::Pod:
      v.message = "Pod ephemeral local storage usage exceeds the total limit of containers " + quantity(limit) + ". ";
      break;
    case LocalStorageRule::Container:
      v.message = "Container " + subject + " exceeded its local ephemeral storage limit \"" + quantity(limit) + "\". ";
      break;
  }
  v.subject = std::move(subject);
  return v;
}

}  // namespace

std::string_view name(LocalStorageRule rule) {
  switch (rule) {
    case LocalStorageRule::EmptyDir: return "emptydirfs.limit";
    case LocalStorageRule::Pod: return "ephemeralpodfs.limit";
    case LocalStorageRule::Container: return "ephemeralcontainerfs.limit";
  }
  return "unknown";
}

std::optional<LocalStorageViolation> local_storage_violation(const Pod& pod, const LocalStorageOptions& options) {
  // No spec, no limits; no walk, no usage (the kubelet skips pods without
  // stats); critical pods the kubelet refuses to evict.
  if (!pod.metadata_known || pod.metadata_unavailable || pod.storage_spec_unparsable || !pod.ephemeral_storage) {
    return std::nullopt;
  }
  if (pod.critical || pod.static_pod) return std::nullopt;
  const EphemeralStorageBreakdown& b = *pod.ephemeral_storage;
  const LocalStorageSpec& spec = pod.local_storage;

  // 1. emptyDir over its sizeLimit (a sizeLimit of 0 is no limit).
  for (const auto& ed : spec.empty_dirs) {
    if (!ed.size_limit_bytes || *ed.size_limit_bytes == 0) continue;
    const NamedStorageUsage* used = find(b.empty_dir_volumes, ed.name);
    if (used != nullptr && used->bytes > *ed.size_limit_bytes) {
      return violation(pod, LocalStorageRule::EmptyDir, ed.name, used->bytes, *ed.size_limit_bytes);
    }
  }
  // 2. The pod's total over the sum of its containers' limits.
  if (spec.pod_limit_bytes && pod.usage.ephemeral_storage_bytes > *spec.pod_limit_bytes) {
    return violation(pod, LocalStorageRule::Pod, "", pod.usage.ephemeral_storage_bytes, *spec.pod_limit_bytes);
  }
  // 3. A container over its own limit: logs, plus the writable layer when it
  //    shares the node filesystem.
  for (const auto& c : spec.containers) {
    if (!c.ephemeral_storage_limit_bytes || *c.ephemeral_storage_limit_bytes == 0) continue;
    uint64_t used = 0;
    if (const NamedStorageUsage* logs = find(b.container_logs, c.name)) used += logs->bytes;
    if (!options.dedicated_imagefs && !c.id.empty()) {
      if (const NamedStorageUsage* layer = find(b.container_layers, c.id)) used += layer->bytes;
    }
    if (used > *c.ephemeral_storage_limit_bytes) {
      return violation(pod, LocalStorageRule::Container, c.name, used, *c.ephemeral_storage_limit_bytes);
    }
  }
  return std::nullopt;
}

std::vector<LocalStorageViolation> local_storage_violations(const NodeSnapshot& snapshot,
                                                            const LocalStorageOptions& options) {
  std::vector<LocalStorageViolation> out;
  for (const auto& pod : snapshot.pods) {
    if (auto v = local_storage_violation(pod, options)) out.push_back(std::move(*v));
  }
  return out;
}

}  // namespace pressured
