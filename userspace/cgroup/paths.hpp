#pragma once
// Small path helpers shared by the cgroup readers.

#include <string>
#include <string_view>

namespace pressured::cgroup {

/// Collapses "//" and removes "/." and a trailing "/" (not ".." resolution:
/// cgroup paths never contain "..").
inline std::string normalize_path(std::string_view p) {
  std::string out;
  out.reserve(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    if (c == '.' && (!out.empty() && out.back() == '/') && (i + 1 == p.size() || p[i + 1] == '/')) {
      ++i;  // skip "./"
      continue;
    }
    out.push_back(c);
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

inline std::string_view trim_view(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace pressured::cgroup
