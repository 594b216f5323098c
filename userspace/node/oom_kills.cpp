#include "node/oom_kills.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "kernel/file.hpp"
#include "kernel/parse.hpp"

namespace pressured::node {

Result<uint64_t> parse_oom_kill_count(std::string_view text) {
  auto fields = kernel::parse_flat_keyed(text);
  if (!fields) return fields.error();
  for (const auto& [key, value] : *fields) {
    if (key == "oom_kill") return value;
  }
  return Error{EINVAL, "no oom_kill counter"};
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
    out.push_back({static_cast<uint64_t>(st.st_ino), dir, *n});
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

}  // namespace pressured::node
