#pragma once
// Pure parsing of Pod / PodList documents (the kubelet's /pods answer, or
// local files) into PodMetadata. Text in, structs out; no I/O.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pressured/observer.hpp"

namespace pressured::pods {

struct ParsedPods {
  std::vector<PodMetadata> pods;
  uint64_t skipped = 0;  // objects that were not a Pod, a Pod without metadata.uid, or an unparsable Pod
  std::vector<std::string> errors;  // why pods were unparsable (the first ten)
};

enum class DocumentFormat : uint8_t { Json, Yaml, Auto };

/// Whose copy of a pod a document is, which decides the fields believed.
/// What makes a pod static or critical must come from someone the pod's
/// author is not.
enum class PodTrust : uint8_t {
  /// The API server's objects: a tenant writes its annotations. Static only
  /// by the kubelet's mirror annotation (kubernetes.io/config.mirror), the
  /// priority only from spec.priority (resolved by admission from the class).
  ApiServer,
  /// The kubelet's own /pods: it overwrites kubernetes.io/config.source on
  /// every pod it runs, so "file"/"http" there means static; spec.priority as
  /// above.
  Kubelet,
  /// Files written by the node's operator: all of the above, and a
  /// priorityClassName of system-*-critical without spec.priority.
  File,
};

/// Whether a pod's metadata.labels are kept (PodMetadata::labels). Labels
/// only advise plugins: a daemon without plugins drops them at the parse, so
/// they cost it no memory (up to kMaxPodLabelBytes a pod).
enum class PodLabelUse : uint8_t { Drop, Keep };

/// Parses one JSON document, or one or more YAML documents ("---"), each a
/// Pod, a PodList or a List of Pods. A syntax error fails the whole text; a
/// Pod that is well-formed but unparsable (a bad quantity, ...) is skipped,
/// counted, and kept as `unparsable` when its uid is readable. Bounded in
/// depth and size on every input. A resource quantity that cannot be read
/// (malformed; anything the API server accepts reads, saturating) marks only
/// the signals it concerns (memory_spec_unparsable, storage_spec_unparsable).
/// `trust` defaults to the least trusting: the API server's.
Result<ParsedPods> parse_pod_documents(std::string_view text, DocumentFormat format = DocumentFormat::Auto,
                                       PodTrust trust = PodTrust::ApiServer,
                                       PodLabelUse labels = PodLabelUse::Keep);

/// The same for a document already read (a JSON value: a Pod, a PodList, a
/// List, or an array of them), e.g. an item of an API server's answer read
/// by k8s/bounded_json.hpp, without printing and reading it again.
Result<ParsedPods> parse_pod_json(const nlohmann::json& doc, PodTrust trust = PodTrust::ApiServer,
                                  PodLabelUse labels = PodLabelUse::Keep);

/// Bounds on a pod's metadata.labels kept in memory (PodLabels): labels over
/// them are left out, the pod's labels marked incomplete and the reason put
/// in ParsedPods::errors. The key and value bounds are the API server's own
/// validation (a qualified name: a DNS-subdomain prefix of 253, "/", a name
/// of 63; a value of 63), so only a hand-written file reaches them; the
/// count and the total keep a node of 1000 pods under 4 MiB of labels
/// whatever its pods carry (a typical pod has well under 1 KiB).
inline constexpr std::size_t kMaxPodLabels = 64;
inline constexpr std::size_t kMaxPodLabelKeyBytes = 253 + 1 + 63;
inline constexpr std::size_t kMaxPodLabelValueBytes = 63;
inline constexpr std::size_t kMaxPodLabelBytes = 4096;  // keys and values of one pod

/// The kubelet's system-critical priority (scheduling.SystemCriticalPriority).
inline constexpr int64_t kSystemCriticalPriority = 2000000000;

}  // namespace pressured::pods
