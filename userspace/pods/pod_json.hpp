#pragma once
// Pure parsing of Pod / PodList documents (the kubelet's /pods answer, or
// local files) into PodMetadata. Text in, structs out; no I/O.

#include <string>
#include <string_view>
#include <vector>

#include "pressured/observer.hpp"

namespace pressured::pods {

struct ParsedPods {
  std::vector<PodMetadata> pods;
  uint64_t skipped = 0;  // objects that were not a Pod, a Pod without metadata.uid, or an unparsable Pod
  std::vector<std::string> errors;  // why pods were unparsable (the first ten)
};

enum class DocumentFormat : uint8_t { Json, Yaml, Auto };

/// Parses one JSON document, or one or more YAML documents ("---"), each a
/// Pod, a PodList or a List of Pods. A syntax error fails the whole text; a
/// Pod that is well-formed but unparsable (a bad quantity, ...) is skipped,
/// counted, and kept as `unparsable` when its uid is readable. Bounded in
/// depth and size on every input.
Result<ParsedPods> parse_pod_documents(std::string_view text, DocumentFormat format = DocumentFormat::Auto);

/// The kubelet's system-critical priority (scheduling.SystemCriticalPriority).
inline constexpr int64_t kSystemCriticalPriority = 2000000000;

}  // namespace pressured::pods
