// The codecs' non-template half (config/codecs.hpp): scalar decoders and
// the error messages every part of the loader words the same way.
#include "config/codecs.hpp"

#include <charconv>
#include <cmath>
#include <string_view>

namespace pressured::config_detail {

std::string scalar_text(const Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsNull()) return "null";
  if (n.IsSequence()) return "a list";
  return "a mapping";
}

Error field_error(const std::string& where, const std::string& message) {
  return Error{EINVAL, where + ": " + message};
}

Error value_error(const std::string& where, const Node& n, const std::string& why) {
  std::string shown = n.IsScalar() ? "'" + n.Scalar() + "'" : scalar_text(n);
  return field_error(where, shown + " " + why);
}

// value back into a node for dump_config().

Result<std::string> decode_string(const Node& n, const std::string& where) {
  if (!n.IsScalar()) return value_error(where, n, "is not a string");
  return n.Scalar();
}

Result<bool> decode_bool(const Node& n, const std::string& where) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  return value_error(where, n, "is not a boolean (true or false)");
}

constexpr Duration kMaxConfigDuration = std::chrono::hours(100000);

Result<Duration> decode_duration(const Node& n, const std::string& where) {
  if (!n.IsScalar()) return value_error(where, n, "is not a duration");
  auto d = parse_duration(n.Scalar());
  if (!d) return field_error(where, d.error().message);
  if (d->count() < 0) return value_error(where, n, "is negative; durations must not be negative");
  // Deadlines are now + duration on a nanosecond clock: past ~11 years that
  // sum is one step from overflowing. Nothing in pressured waits that long.
  if (*d > kMaxConfigDuration) {
    return value_error(where, n, "is too long (at most " + format_duration(kMaxConfigDuration) + ")");
  }
  return *d;
}

Result<uint64_t> decode_count(const Node& n, const std::string& where, uint64_t max) {
  if (!n.IsScalar()) return value_error(where, n, "is not a quantity");
  // Plain digits are read exactly: through a double, 18446744073709551615
  // became 2^64 and was refused as larger than itself.
  std::string_view digits = n.Scalar();
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec == std::errc() && p == digits.data() + digits.size() && v <= max) return v;
    return value_error(where, n, "is too large (at most " + std::to_string(max) + ")");
  }
  auto q = parse_quantity(n.Scalar());
  if (!q) return field_error(where, q.error().message);
  if (*q < 0) return value_error(where, n, "is negative");
  if (*q != std::floor(*q)) return value_error(where, n, "is not a whole number");
  // static_cast<double>(UINT64_MAX) rounds up to 2^64, which would pass the
  // comparison and then wrap to 0 in the cast (16Ei printed as 0).
  if (*q >= 18446744073709551616.0 || *q > static_cast<double>(max)) {
    return value_error(where, n, "is too large (at most " + std::to_string(max) + ")");
  }
  return static_cast<uint64_t>(*q);
}

// A count as text that reads back as the same count: past 2^53 a double
// (format_quantity) no longer holds every integer, and UINT64_MAX printed as
// 16Ei, which is refused.
std::string format_count(uint64_t v) {
  if (v < (uint64_t{1} << 53)) return format_quantity(static_cast<double>(v));
  return std::to_string(v);
}

}  // namespace pressured::config_detail
