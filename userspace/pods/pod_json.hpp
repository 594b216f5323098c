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
  uint64_t skipped = 0;  // objects that were not a Pod, or a Pod without metadata.uid
};

enum class DocumentFormat : uint8_t { Json, Yaml, Auto };

/// Parses one JSON document, or one or more YAML documents ("---"), each a
/// Pod, a PodList or a List of Pods. Errors name the problem (syntax, a bad
/// quantity, ...).
Result<ParsedPods> parse_pod_documents(std::string_view text, DocumentFormat format = DocumentFormat::Auto);

/// The kubelet's system-critical priority (scheduling.SystemCriticalPriority).
inline constexpr int64_t kSystemCriticalPriority = 2000000000;

}  // namespace pressured::pods
