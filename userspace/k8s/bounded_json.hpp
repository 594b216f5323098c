#pragma once
// JSON from the API server (and pressured's own files) read without trusting
// its shape, the one reader for all of them (the reporter, the pod source
// and its pod parser, the checkpoint): a depth bound
// applied while parsing (nlohmann's dump(), copies and comparisons recurse,
// so a deeper document must never reach them), and typed reads that answer
// "absent" instead of throwing on a field of the wrong type.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pressured/result.hpp"

namespace pressured::k8s {

/// Containers nested deeper than this are refused (Kubernetes objects nest a
/// dozen levels).
inline constexpr int kMaxJsonDepth = 64;

/// Parses `text`; a syntax error or nesting deeper than `max_depth` is an
/// EINVAL Error. Subtrees past the bound are discarded as they are read, so
/// neither the stack nor memory grows with the input's depth.
Result<nlohmann::json> parse_bounded_json(std::string_view text, int max_depth = kMaxJsonDepth);

/// obj[key] when obj is an object holding it, else nullptr.
const nlohmann::json* member(const nlohmann::json& obj, const char* key);
/// obj[key] when it is a string, else nullopt (absent, or another type).
std::optional<std::string> string_member(const nlohmann::json& obj, const char* key);
/// obj[key] when it is an integer, else nullopt.
std::optional<int64_t> int_member(const nlohmann::json& obj, const char* key);

}  // namespace pressured::k8s
