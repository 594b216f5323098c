#include "node/oom_kills.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "kernel/file.hpp"
#include "kernel/parse.hpp"
#include "node/formulas.hpp"

namespace pressured::node {

Result<uint64_t> parse_oom_kill_count(std::string_view text) {
  auto fields = kernel::parse_flat_keyed(text);
  if (!fields) return fields.error();
  for (const auto& [key, value] : *fields) {
    if (key == "oom_kill") return value;
  }
  return Error{EINVAL, "no oom_kill counter"};
}

std::optional<uint64_t> parse_oom_event_count(std::string_view text) {
  auto fields = kernel::parse_flat_keyed(text);
  if (!fields) return std::nullopt;
  for (const auto& [key, value] : *fields) {
    if (key == "oom") return value;
  }
  return std::nullopt;
}

std::optional<std::vector<MemcgOomKills>> read_oom_kills(const std::string& kubepods_memory_path, bool v2,
                                                         int max_depth) {
  if (kubepods_memory_path.empty()) return std::nullopt;
  const char* file = v2 ? "/memory.events.local" : "/memory.oom_control";
  std::vector<MemcgOomKills> out;
  auto read_one = [&](const std::string& dir) -> bool {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return false;
    auto text = kernel::read_file(dir + file);
    if (!text) return false;
    auto n = parse_oom_kill_count(*text);
    if (!n) return false;
    MemcgOomKills k{static_cast<uint64_t>(st.st_ino), dir, *n};
    if (v2) {
      k.oom_events = parse_oom_event_count(*text);
    } else {
      // v1 has no count of OOMs per memcg: a failed charge at the limit is the evidence.
      if (auto f = kernel::read_file(dir + "/memory.failcnt", 64)) {
        if (auto v = kernel::parse_single_value(*f); v && *v) k.failcnt = **v;
      }
      if (auto l = kernel::read_file(dir + "/memory.limit_in_bytes", 64)) {
        if (auto v = kernel::parse_single_value(*l); v && *v) k.limited = !is_unlimited_v1(**v);
      }
    }
    out.push_back(std::move(k));
    return true;
  };
  // kubepods itself tells whether this kernel has the file at all.
  if (!read_one(kubepods_memory_path)) return std::nullopt;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::recursive_directory_iterator it(kubepods_memory_path, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec) || it->is_symlink(type_ec)) continue;
    const int level = it.depth() + 1;  // below kubepods
    if (level >= max_depth) it.disable_recursion_pending();
    read_one(it->path().string());  // removed meanwhile: left out
  }
  // A walk cut short (a directory removed as it was entered) would pass
  // cgroups by that exist: the next observation reads them all.
  if (ec) return std::nullopt;
  return out;
}

Result<uint64_t> parse_vmstat_oom_kills(std::string_view vmstat) {
  constexpr std::string_view kKey = "oom_kill ";
  for (std::size_t at = 0; at < vmstat.size();) {
    std::size_t eol = vmstat.find('\n', at);
    if (eol == std::string_view::npos) eol = vmstat.size();
    const std::string_view line = vmstat.substr(at, eol - at);
    if (line.starts_with(kKey)) {
      auto v = kernel::parse_single_value(line.substr(kKey.size()));
      if (!v || !*v) return Error{EINVAL, "vmstat: oom_kill is not a number"};
      return **v;
    }
    at = eol + 1;
  }
  return Error{ENOENT, "vmstat: no oom_kill line (kernel before 4.13)"};
}

OomKillCounters::OomKillCounters(std::string kubepods_memory_path, bool v2, const std::string& proc_root)
    : kubepods_(std::move(kubepods_memory_path)), v2_(v2), vmstat_(proc_root + "/vmstat") {}

std::optional<std::vector<MemcgOomKills>> OomKillCounters::read() {
  std::optional<uint64_t> node_kills;
  if (auto t = vmstat_.read(buf_)) {
    if (auto n = parse_vmstat_oom_kills(*t)) node_kills = *n;
  }
  if (node_kills && walked_at_ == node_kills) return last_;
  ++walks_;
  last_ = read_oom_kills(kubepods_, v2_);
  // Taken before the walk: a kill during it moves the count, and the next
  // call walks again.
  walked_at_ = last_ ? node_kills : std::nullopt;
  return last_;
}

}  // namespace pressured::node
