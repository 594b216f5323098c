#include "kernel/parse.hpp"

#include <array>
#include <charconv>
#include <cstring>

namespace pressured::kernel {
namespace {

Error parse_error(std::string what) { return Error{EINVAL, std::move(what)}; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

bool to_u64(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool to_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Calls fn(key, value_text) for each "key value" line; false on a malformed line.
template <typename Fn>
bool for_each_kv_line(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    auto sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0) return false;
    if (!fn(line.substr(0, sp), line.substr(sp + 1))) return false;
  }
  return true;
}

}  // namespace

Result<std::vector<std::pair<std::string, uint64_t>>> parse_flat_keyed(std::string_view text) {
  if (text.empty() || text.back() != '\n') return parse_error("truncated flat-keyed file (no final newline)");
  std::vector<std::pair<std::string, uint64_t>> out;
  bool ok = for_each_kv_line(text, [&](std::string_view k, std::string_view v) {
    uint64_t n = 0;
    if (!to_u64(v, n)) return false;
    out.emplace_back(std::string(k), n);
    return true;
  });
  if (!ok) return parse_error("malformed flat-keyed line");
  return out;
}

Result<MemoryStat> parse_memory_stat(std::string_view text, bool v2) {
  if (text.empty() || text.back() != '\n') return parse_error("truncated memory.stat (no final newline)");
  const std::string_view k_anon = v2 ? "anon" : "total_rss";
  const std::string_view k_file = v2 ? "file" : "total_cache";
  const std::string_view k_inactive = v2 ? "inactive_file" : "total_inactive_file";
  const std::string_view k_active = v2 ? "active_file" : "total_active_file";
  MemoryStat st;
  unsigned found = 0;
  bool ok = for_each_kv_line(text, [&](std::string_view k, std::string_view v) {
    uint64_t* dst = nullptr;
    unsigned bit = 0;
    if (k == k_anon) dst = &st.anon, bit = 1;
    else if (k == k_file) dst = &st.file, bit = 2;
    else if (k == k_inactive) dst = &st.inactive_file, bit = 4;
    else if (k == k_active) dst = &st.active_file, bit = 8;
    else return true;  // other keys are not even converted
    if (!to_u64(v, *dst)) return false;
    found |= bit;
    return true;
  });
  if (!ok) return parse_error("malformed memory.stat line");
  if (found != 15) {
    return parse_error(std::string("memory.stat lacks ") +
                       std::string((found & 1) == 0 ? k_anon : (found & 2) == 0 ? k_file
                                                              : (found & 4) == 0 ? k_inactive : k_active));
  }
  return st;
}

Result<MemoryEvents> parse_memory_events(std::string_view text) {
  if (text.empty() || text.back() != '\n') return parse_error("truncated memory.events (no final newline)");
  MemoryEvents ev;
  unsigned found = 0;
  bool ok = for_each_kv_line(text, [&](std::string_view k, std::string_view v) {
    uint64_t n = 0;
    if (!to_u64(v, n)) return false;
    if (k == "low") ev.low = n;
    else if (k == "high") ev.high = n;
    else if (k == "max") ev.max = n, found |= 1;
    else if (k == "oom") ev.oom = n;
    else if (k == "oom_kill") ev.oom_kill = n, found |= 2;
    else if (k == "oom_group_kill") ev.oom_group_kill = n;
    return true;
  });
  if (!ok) return parse_error("malformed memory.events line");
  if (found != 3) return parse_error("memory.events lacks max or oom_kill");
  return ev;
}

namespace {
bool parse_psi_line(std::string_view rest, PsiLine& out) {
  // rest: "avg10=0.00 avg60=0.00 avg300=0.00 total=0"
  unsigned found = 0;
  while (!rest.empty()) {
    auto sp = rest.find(' ');
    std::string_view item = rest.substr(0, sp);
    rest.remove_prefix(sp == std::string_view::npos ? rest.size() : sp + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string_view::npos) return false;
    std::string_view k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "avg10") found |= to_double(v, out.avg10) ? 1 : 0x100;
    else if (k == "avg60") found |= to_double(v, out.avg60) ? 2 : 0x100;
    else if (k == "avg300") found |= to_double(v, out.avg300) ? 4 : 0x100;
    else if (k == "total") found |= to_u64(v, out.total_us) ? 8 : 0x100;
  }
  return found == 15;
}
}  // namespace

Result<PsiStats> parse_psi(std::string_view text) {
  PsiStats st;
  bool some = false;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    if (line.starts_with("some ")) {
      if (!parse_psi_line(line.substr(5), st.some)) return parse_error("malformed PSI 'some' line");
      some = true;
    } else if (line.starts_with("full ")) {
      PsiLine full;
      if (!parse_psi_line(line.substr(5), full)) return parse_error("malformed PSI 'full' line");
      st.full = full;
    } else {
      return parse_error("unexpected PSI line");
    }
  }
  if (!some) return parse_error("PSI file lacks the 'some' line");
  return st;
}

Result<std::optional<uint64_t>> parse_single_value(std::string_view text) {
  std::string_view t = trim(text);
  if (t == "max") return std::optional<uint64_t>{};
  uint64_t n = 0;
  if (!to_u64(t, n)) return parse_error("expected a number, got '" + std::string(t.substr(0, 32)) + "'");
  return std::optional<uint64_t>{n};
}

Result<MemInfo> parse_meminfo(std::string_view text) {
  if (text.empty() || text.back() != '\n') return parse_error("truncated meminfo (no final newline)");
  MemInfo mi;
  bool have_total = false, have_hugetlb = false;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    std::string_view val = trim(line.substr(colon + 1));
    uint64_t mult = 1;
    if (val.ends_with(" kB")) {
      val.remove_suffix(3);
      mult = 1024;
    }
    uint64_t* dst = nullptr;
    if (key == "MemTotal") dst = &mi.mem_total, have_total = true;
    else if (key == "MemFree") dst = &mi.mem_free;
    else if (key == "MemAvailable") dst = &mi.mem_available;
    else if (key == "Hugetlb") dst = &mi.hugetlb, have_hugetlb = true;
    else if (key == "HugePages_Total") dst = &mi.hugepages_total;
    else if (key == "Hugepagesize") dst = &mi.hugepage_size;
    else if (key == "SwapTotal") dst = &mi.swap_total;
    else if (key == "SwapFree") dst = &mi.swap_free;
    else continue;
    uint64_t n = 0;
    if (!to_u64(trim(val), n)) return parse_error("malformed meminfo value for " + std::string(key));
    *dst = n * mult;
  }
  if (!have_total) return parse_error("meminfo lacks MemTotal");
  if (!have_hugetlb) mi.hugetlb = mi.hugepages_total * mi.hugepage_size;
  return mi;
}

Result<uint64_t> parse_loadavg_tasks(std::string_view text) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos) return parse_error("malformed /proc/loadavg");
  std::string_view rest = text.substr(slash + 1);
  auto sp = rest.find(' ');
  uint64_t n = 0;
  if (sp == std::string_view::npos || !to_u64(rest.substr(0, sp), n)) return parse_error("malformed /proc/loadavg");
  return n;
}

bool MountInfo::has_option(std::string_view option) const {
  std::string_view s = super_options;
  while (!s.empty()) {
    auto c = s.find(',');
    if (s.substr(0, c) == option) return true;
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  return false;
}

namespace {
std::string unescape_octal(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' &&
        s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}
}  // namespace

std::vector<MountInfo> parse_mountinfo(std::string_view text, std::size_t* skipped) {
  std::vector<MountInfo> out;
  std::size_t bad = 0;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty()) continue;
    // id parent major:minor root mount_point options [optional...] - fstype source super_options
    std::vector<std::string_view> f;
    while (!line.empty()) {
      auto sp = line.find(' ');
      if (sp != 0) f.push_back(line.substr(0, sp));
      line.remove_prefix(sp == std::string_view::npos ? line.size() : sp + 1);
    }
    std::size_t dash = 0;
    for (std::size_t i = 6; i < f.size(); ++i) {
      if (f[i] == "-") {
        dash = i;
        break;
      }
    }
    if (dash == 0 || dash + 3 >= f.size()) {
      ++bad;
      continue;
    }
    MountInfo m;
    m.root = unescape_octal(f[3]);
    m.mount_point = unescape_octal(f[4]);
    m.fstype = std::string(f[dash + 1]);
    m.super_options = std::string(f[dash + 3]);
    out.push_back(std::move(m));
  }
  if (skipped != nullptr) *skipped = bad;
  return out;
}

Result<int> parse_proc_cgroups_hierarchy(std::string_view text, std::string_view controller) {
  bool header = false;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.starts_with('#')) {
      header = true;
      continue;
    }
    // subsys_name hierarchy num_cgroups enabled, separated by tabs.
    auto sep = line.find_first_of(" \t");
    if (sep == std::string_view::npos || line.substr(0, sep) != controller) continue;
    std::string_view rest = trim(line.substr(sep + 1));
    uint64_t id = 0;
    if (!to_u64(rest.substr(0, rest.find_first_of(" \t")), id) || id > 0x7fffffff)
      return parse_error("malformed /proc/cgroups line for " + std::string(controller));
    return static_cast<int>(id);
  }
  if (!header) return parse_error("/proc/cgroups lacks its header line");
  return Error{ENOENT, "/proc/cgroups does not list the " + std::string(controller) + " controller"};
}

Result<uint64_t> parse_status_cap_eff(std::string_view text) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.starts_with("CapEff:")) continue;
    std::string_view v = trim(line.substr(7));
    uint64_t caps = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), caps, 16);
    if (v.empty() || ec != std::errc() || p != v.data() + v.size()) return parse_error("malformed CapEff line");
    return caps;
  }
  return parse_error("status lacks the CapEff line");
}

Result<ProcStat> parse_proc_stat(std::string_view text) {
  const auto close = text.rfind(')');
  if (close == std::string_view::npos) return parse_error("stat lacks the ')' closing comm");
  std::string_view rest = text.substr(close + 1);
  // state ppid pgrp session tty_nr tpgid flags
  std::array<std::string_view, 7> f{};
  for (auto& field : f) {
    rest = trim(rest);
    const auto sp = rest.find_first_of(" \n");
    field = rest.substr(0, sp);
    rest.remove_prefix(sp == std::string_view::npos ? rest.size() : sp);
    if (field.empty()) return parse_error("stat has fewer than 7 fields after comm");
  }
  ProcStat st;
  if (f[0].size() != 1) return parse_error("malformed state field in stat");
  st.state = f[0][0];
  auto number = [](std::string_view v, auto& out) {
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && p == v.data() + v.size();
  };
  if (!number(f[1], st.ppid)) return parse_error("malformed ppid field in stat");
  if (!number(f[6], st.flags)) return parse_error("malformed flags field in stat");
  return st;
}

uint64_t count_lines(std::string_view text) {
  uint64_t n = 0;
  while (!text.empty()) {
    auto nl = text.find('\n');
    if (nl != 0) ++n;
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return n;
}

}  // namespace pressured::kernel
