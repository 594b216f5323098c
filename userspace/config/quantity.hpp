#pragma once
// Kubernetes quantities ("100Mi", "1.5Gi", "500M", "1e9", "250m") and Go
// durations ("1m30s", "500ms", "-1s"), parsed into plain numbers and formatted
// back into the shortest exact human text. Pure functions: text in, value out.

#include <string>
#include <string_view>

#include "pressured/clock.hpp"
#include "pressured/config.hpp"
#include "pressured/result.hpp"

namespace pressured {

/// Parses a Kubernetes resource quantity into base units (bytes, inodes, pids,
/// millicores * 1000 ...). Accepts binary (Ki..Ei), decimal (m, k, M, G, T, P,
/// E) and exponent (e3, E-2) suffixes and a sign. The percent form is not a
/// quantity: use parse_threshold_value for that. Errors say what is wrong.
Result<double> parse_quantity(std::string_view text);

/// The same grammar, but a magnitude past the range of a double is
/// +-infinity (or 0 when tiny) instead of an error: what the API server
/// accepts as a quantity (it stores 1e309) must read as "more than anything",
/// never as unparsable. Malformed text is still an error.
Result<double> parse_quantity_saturating(std::string_view text);

/// Parses a threshold or minimum-reclaim value: a quantity, or a percentage
/// ("10%", "2.5%") of the signal's capacity. The range is not checked here.
Result<ThresholdValue> parse_threshold_value(std::string_view text);

/// Parses a Go duration ("1h", "1m30s", "500ms", "1.5s", "0"), the syntax the
/// kubelet uses. Negative durations parse (callers report them as errors, so
/// the message can name the field).
Result<Duration> parse_duration(std::string_view text);

/// Formats a quantity as the shortest exact Kubernetes text: "100Mi", "500M",
/// "1536", "12.5". Round-trips through parse_quantity.
std::string format_quantity(double value);

/// Formats a threshold value: "10%" or format_quantity of the quantity.
std::string format_threshold_value(const ThresholdValue& value);

/// Formats a duration as Go's time.Duration.String() does: "1m30s", "500ms",
/// "5m0s", "0s". Round-trips through parse_duration.
std::string format_duration(Duration d);

}  // namespace pressured
