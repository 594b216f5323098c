#include "node/oom_kills.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "kernel/fd.hpp"
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

namespace {

// One cgroup file of the directory `dfd`, read into `buf` by
// kernel::pread_all (a single-record file: one read). False when it cannot
// be opened or read: a file missing here is common (not every memcg of a
// fake tree has each), so no error text is built for it.
bool read_at(int dfd, const char* name, std::string& buf, std::string_view& out) {
  const kernel::Fd fd(::openat(dfd, name, O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return false;
  auto text = kernel::pread_all(fd.get(), buf, name);
  if (!text) return false;
  out = *text;
  return true;
}

// The walk below kubepods, relative to each directory's fd: every file is
// opened by its name in its directory instead of by a path from / (each
// about eight components through cgroupfs), and each directory's inode comes
// from its fd. At 1000 pods the walk is ~2000 memcgs, after every OOM kill on
// the node, on the daemon's loop.
class OomWalk {
 public:
  OomWalk(bool v2, int max_depth) : v2_(v2), max_depth_(max_depth) {}

  // Reads the memcg open at `dfd` (`path` names it); false when its files
  // cannot be read (removed meanwhile, or no such file on this kernel).
  bool read_one(int dfd, const std::string& path) {
    struct stat st {};
    if (::fstat(dfd, &st) != 0) return false;
    std::string_view text;
    if (!read_at(dfd, v2_ ? "memory.events.local" : "memory.oom_control", buf_, text)) return false;
    auto n = parse_oom_kill_count(text);
    if (!n) return false;
    MemcgOomKills k{static_cast<uint64_t>(st.st_ino), path, *n};
    if (v2_) {
      k.oom_events = parse_oom_event_count(text);
    } else {
      // v1 has no count of OOMs per memcg: a failed charge at the limit is the evidence.
      if (read_at(dfd, "memory.failcnt", buf_, text)) {
        if (auto v = kernel::parse_single_value(text); v && *v) k.failcnt = **v;
      }
      if (read_at(dfd, "memory.limit_in_bytes", buf_, text)) {
        if (auto v = kernel::parse_single_value(text); v && *v) k.limited = !is_unlimited_v1(**v);
      }
    }
    out.push_back(std::move(k));
    return true;
  }

  // Reads every directory below the one open at `dfd` (consumed), pre-order,
  // down to max_depth levels below kubepods. False when a directory could
  // not be listed (removed as it was entered): the walk would pass cgroups
  // by that exist. One that may not be read (EACCES) is passed by.
  bool walk_children(int dfd, const std::string& path, int level) {
    DIR* d = ::fdopendir(dfd);
    if (d == nullptr) {
      ::close(dfd);
      return false;
    }
    bool ok = true;
    errno = 0;
    while (struct dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      if (e->d_type != DT_DIR) {
        if (e->d_type != DT_UNKNOWN) continue;
        struct stat st {};
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
      }
      const int child = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child < 0) {
        if (errno == EACCES || errno == EPERM) continue;
        ok = false;
        break;
      }
      std::string child_path = path + "/" + e->d_name;
      read_one(child, child_path);  // removed meanwhile: left out
      if (level < max_depth_) {
        if (!walk_children(child, child_path, level + 1)) {
          ok = false;
          break;
        }
      } else {
        ::close(child);
      }
      errno = 0;
    }
    if (ok && errno != 0) ok = false;  // readdir failed
    ::closedir(d);
    return ok;
  }

  std::vector<MemcgOomKills> out;

 private:
  bool v2_;
  int max_depth_;
  std::string buf_;  // every file's text in turn (pread_all keeps its size)
};

}  // namespace

std::optional<std::vector<MemcgOomKills>> read_oom_kills(const std::string& kubepods_memory_path, bool v2,
                                                         int max_depth) {
  if (kubepods_memory_path.empty()) return std::nullopt;
  const int root = ::open(kubepods_memory_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return std::nullopt;
  OomWalk walk(v2, max_depth);
  // kubepods itself tells whether this kernel has the file at all.
  if (!walk.read_one(root, kubepods_memory_path)) {
    ::close(root);
    return std::nullopt;
  }
  if (!walk.walk_children(root, kubepods_memory_path, 1)) return std::nullopt;
  return std::move(walk.out);
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
