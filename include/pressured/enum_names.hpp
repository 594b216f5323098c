#pragma once
// One table per enum gives both its name (logs, metric labels, JSON) and its
// parse (configuration, fixtures), so the two can never disagree. Tests walk
// each table to check every value has exactly one, distinct name.

#include <cstddef>
#include <optional>
#include <string_view>

namespace pressured {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

/// The name of `v` in `table`, or `fallback` for a value the table lacks
/// (only reachable by casting an out-of-range integer to the enum).
template <typename E, std::size_t N>
constexpr std::string_view enum_name(const EnumName<E> (&table)[N], E v, std::string_view fallback = "unknown") {
  for (const auto& e : table) {
    if (e.value == v) return e.name;
  }
  return fallback;
}

/// The value named `text` in `table` (exact, case-sensitive); nullopt when none is.
template <typename E, std::size_t N>
constexpr std::optional<E> enum_parse(const EnumName<E> (&table)[N], std::string_view text) {
  for (const auto& e : table) {
    if (e.name == text) return e.value;
  }
  return std::nullopt;
}

}  // namespace pressured
