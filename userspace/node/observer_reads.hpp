#pragma once
// Small reads the observer's parts share (node signals, per-pod usage): a
// number or a memory.stat from a kept-open file, the errnos that mean "gone"
// or "not on this kernel", and a warning logged once.

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "kernel/hot_file.hpp"
#include "kernel/parse.hpp"
#include "pressured/result.hpp"

namespace pressured::node {

/// The cgroup (or the file's kernfs node) was removed.
inline bool is_gone(int code) { return code == ENOENT || code == ENODEV; }
/// The kernel does not have the file (PSI off, an older kernel).
inline bool not_supported(int code) { return code == ENOENT || code == EOPNOTSUPP || code == ENOTSUP; }

/// A single-number file; "max" is an error here (usage files never say it).
inline Result<uint64_t> read_number(kernel::HotFile& f, std::string& buf) {
  auto t = f.read(buf);
  if (!t) return t.error();
  auto v = kernel::parse_single_value(*t);
  if (!v) return Error{v.error().code, f.path() + ": " + v.error().message};
  if (!*v) return Error{EINVAL, f.path() + ": unexpected 'max'"};
  return **v;
}

inline std::optional<uint64_t> optional_number(kernel::HotFile& f, std::string& buf) {
  auto v = read_number(f, buf);
  if (!v) return std::nullopt;
  return *v;
}

inline Result<kernel::MemoryStat> read_stat(kernel::HotFile& f, std::string& buf, bool v2) {
  auto t = f.read(buf);
  if (!t) return t.error();
  auto st = kernel::parse_memory_stat(*t, v2);
  if (!st) return Error{st.error().code, f.path() + ": " + st.error().message};
  return *st;
}

/// A degraded read is logged at warn once (and counted by the caller).
template <typename... Args>
void warn_once(bool& flag, spdlog::format_string_t<Args...> fmt, Args&&... args) {
  if (flag) return;
  flag = true;
  spdlog::warn(fmt, std::forward<Args>(args)...);
}

}  // namespace pressured::node
