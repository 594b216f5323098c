#pragma once
// The running kernel's version, for tests whose expectation depends on it
// (a BPF feature that arrived in a given release).

#include <sys/utsname.h>

#include <cstdio>
#include <optional>
#include <utility>

namespace pressured::testing {

/// major.minor from uname(2); nullopt when it cannot be read.
inline std::optional<std::pair<int, int>> kernel_major_minor() {
  utsname u{};
  if (::uname(&u) != 0) return std::nullopt;
  int major = 0, minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return std::nullopt;
  return std::make_pair(major, minor);
}

/// Whether the running kernel is `major`.`minor` or later (false when unknown).
inline bool kernel_at_least(int major, int minor) {
  const auto v = kernel_major_minor();
  return v && (v->first > major || (v->first == major && v->second >= minor));
}

}  // namespace pressured::testing
