#include "daemon/uninstall.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "daemon/checkpoint.hpp"
#include "k8s/bounded_json.hpp"
#include "kernel/fd.hpp"
#include "kernel/safe_file.hpp"

namespace pressured {

namespace {

using json = nlohmann::json;

std::string errno_text(int err) { return std::strerror(err); }

std::string join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// The directory part and the last component of `path` ("" when there is none).
std::pair<std::string, std::string> split(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const std::size_t slash = p.rfind('/');
  if (slash == std::string::npos) return {".", p};
  return {slash == 0 ? "/" : p.substr(0, slash), p.substr(slash + 1)};
}

// The directory `path`, every component opened without following a link:
// nullopt when it is not there (nothing to remove); a link or an error is
// reported.
std::optional<kernel::Fd> open_dir(const std::string& path, UninstallReport& r) {
  auto fd = kernel::open_dir_nofollow(path);
  if (fd) return std::move(*fd);
  if (fd.error().code == ENOENT) return std::nullopt;
  if (fd.error().code == ELOOP || fd.error().code == ENOTDIR) {
    r.refused.push_back(path + ": " + fd.error().message + " (pressured follows no link here)");
  } else {
    r.errors.push_back(path + ": " + fd.error().message);
  }
  return std::nullopt;
}

// Removes `name` in `dir` when it is a regular file of at most `max_bytes`
// whose contents `ours` accepts.
void remove_if_ours(int dirfd, const std::string& dir, const std::string& name, std::size_t max_bytes,
                    const std::function<bool(const std::string&)>& ours, const char* what, UninstallReport& r) {
  const std::string path = join(dir, name);
  auto text = kernel::read_regular_file_at(dirfd, dir, name, max_bytes);
  if (!text) {
    const int code = text.error().code;
    if (code == ENOENT) return;
    if (code == EFBIG) {
      r.refused.push_back(path + ": larger than anything pressured writes there");
    } else if (code == EINVAL || code == ELOOP) {
      r.refused.push_back(path + ": " + text.error().message + " (pressured writes only regular files there)");
    } else {
      r.errors.push_back(path + ": " + text.error().message);
    }
    return;
  }
  if (!ours(*text)) {
    r.refused.push_back(path + ": not " + what);
    return;
  }
  if (::unlinkat(dirfd, name.c_str(), 0) != 0) {
    if (errno != ENOENT) r.errors.push_back(path + ": " + errno_text(errno));
    return;
  }
  r.removed.push_back(path);
}

// Removes the directory `name` in `parent` when pressured made it (its marker
// is there, byte for byte) and nothing else is in it; a mount point stays.
void remove_dir_if_made(int parentfd, const std::string& parent, const std::string& name, UninstallReport& r) {
  const std::string path = join(parent, name);
  int raw = ::openat(parentfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (raw < 0) {
    if (errno != ENOENT) r.errors.push_back(path + ": " + errno_text(errno));
    return;
  }
  kernel::Fd dir(raw);
  struct stat here {}, up {};
  if (::fstat(dir.get(), &here) != 0 || ::fstat(parentfd, &up) != 0) {
    r.errors.push_back(path + ": " + errno_text(errno));
    return;
  }
  if (here.st_dev != up.st_dev) {
    r.kept.push_back(path + "/: a mount point");
    return;
  }
  const std::string marker(kernel::kMadeByPressuredName);
  auto mark = kernel::read_regular_file_at(dir.get(), path, marker, 4096);
  if (!mark || *mark != kernel::kMadeByPressuredText) {
    r.kept.push_back(path + "/: not made by pressured (no " + marker + " in it)");
    return;
  }
  bool others = false;
  if (DIR* d = ::fdopendir(::dup(dir.get()))) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != ".." && n != marker) others = true;
    }
    ::closedir(d);
  } else {
    r.errors.push_back(path + ": " + errno_text(errno));
    return;
  }
  if (others) {
    r.kept.push_back(path + "/: holds files that are not pressured's");
    return;
  }
  if (::unlinkat(dir.get(), marker.c_str(), 0) != 0 || ::unlinkat(parentfd, name.c_str(), AT_REMOVEDIR) != 0) {
    r.errors.push_back(path + ": " + errno_text(errno));
    return;
  }
  r.removed.push_back(path + "/");
}

// Reads a document as events, building nothing: memory stays bounded by the
// nesting (itself bounded) whatever the size. Records what a checkpoint is
// recognised by: its top-level members and their types.
class CheckpointShape final : public json::json_sax_t {
 public:
  bool null() override { return value('n'); }
  bool boolean(bool) override { return value('b'); }
  bool number_integer(number_integer_t) override { return value('i'); }
  bool number_unsigned(number_unsigned_t) override { return value('i'); }
  bool number_float(number_float_t, const string_t&) override { return value('f'); }
  bool string(string_t&) override { return value('s'); }
  bool binary(binary_t&) override { return value('x'); }
  bool start_object(std::size_t) override { return open('o'); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open('a'); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (depth_ == 1) key_ = k;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    error_at_ = position;
    return false;
  }

  bool top_is_object = false;
  bool closed_top = false;  // the top-level value ended: a whole document
  bool too_deep = false;
  bool wrong_type = false;  // a member pressured writes with another type
  std::map<std::string, char> members;
  std::size_t error_at_ = 0;  // 0: none

 private:
  bool value(char type) {
    if (depth_ == 0) return true;  // a scalar document: not an object
    if (depth_ == 1) {
      static const std::map<std::string, char> kTypes = {
          {"version", 'i'}, {"boot_id", 's'}, {"engine", 'o'}, {"policy", 'o'}, {"relief", 'o'}};
      auto it = kTypes.find(key_);
      if (it != kTypes.end() && it->second != type) wrong_type = true;
      members[key_] = type;
    }
    return true;
  }
  bool open(char type) {
    if (depth_ == 0) top_is_object = type == 'o';
    if (!value(type)) return false;
    if (++depth_ > k8s::kMaxJsonDepth) {
      too_deep = true;
      return false;
    }
    return true;
  }
  bool close() {
    if (--depth_ == 0) closed_top = true;
    return true;
  }
  int depth_ = 0;
  std::string key_;
};

CheckpointShape scan(std::string_view text) {
  CheckpointShape shape;
  json::sax_parse(text, &shape, nlohmann::detail::input_format_t::json, /*strict=*/true);
  return shape;
}

}  // namespace

bool looks_like_checkpoint(std::string_view text) {
  if (text.size() > kMaxCheckpointBytes) return false;
  const CheckpointShape s = scan(text);
  if (s.error_at_ != 0 || s.too_deep || s.wrong_type || !s.top_is_object) return false;
  for (const char* m : {"version", "boot_id", "engine", "policy"}) {
    if (s.members.count(m) == 0) return false;
  }
  return true;
}

bool looks_like_checkpoint_temporary(std::string_view text) {
  if (text.empty() || looks_like_checkpoint(text)) return true;
  if (text.size() > kMaxCheckpointBytes) return false;
  // Cut short by a crash: the document reads well up to its end. A byte no
  // JSON can hold, appended, is where the error must be: anything wrong
  // before it is not a prefix of any document.
  std::string probe(text);
  probe.push_back('\x01');
  const CheckpointShape s = scan(probe);
  if (s.error_at_ != probe.size() || s.closed_top || s.too_deep || s.wrong_type) return false;
  // The writer's form: an object whose first member is boot_id (members are
  // written in name order, in every version).
  const std::size_t open = text.find_first_not_of(" \t\r\n");
  if (open == std::string_view::npos || text[open] != '{') return false;
  const std::size_t next = text.find_first_not_of(" \t\r\n", open + 1);
  if (next == std::string_view::npos) return true;
  constexpr std::string_view kFirst = "\"boot_id\"";
  const std::string_view rest = text.substr(next);
  return rest.size() < kFirst.size() ? kFirst.substr(0, rest.size()) == rest : rest.substr(0, kFirst.size()) == kFirst;
}

UninstallReport uninstall_node_files(const UninstallPaths& paths, std::string_view profile) {
  UninstallReport r;
  // Another version's profile is read to be named as such; none is near 1 MiB.
  const std::size_t max_profile = std::max<std::size_t>(profile.size(), 1 << 20);
  if (!paths.seccomp_dir.empty()) {
    if (auto seccomp = open_dir(paths.seccomp_dir, r)) {
      const std::string dir = join(paths.seccomp_dir, "profiles");
      int raw = ::openat(seccomp->get(), "profiles", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (raw >= 0) {
        kernel::Fd profiles(raw);
        remove_if_ours(profiles.get(), dir, "pressured.json", max_profile,
                       [profile](const std::string& t) { return t == profile; },
                       "the seccomp profile this pressured installs (another version's, or edited)", r);
        // A crash mid-install leaves a piece of the profile.
        remove_if_ours(profiles.get(), dir, "pressured.json.tmp", max_profile,
                       [profile](const std::string& t) { return profile.substr(0, t.size()) == t; },
                       "a piece of the seccomp profile this pressured installs", r);
        profiles.reset();
        remove_dir_if_made(seccomp->get(), paths.seccomp_dir, "profiles", r);
      } else if (errno == ELOOP || errno == ENOTDIR) {
        r.refused.push_back(dir + ": not a directory (a symbolic link?): pressured follows no link here");
      } else if (errno != ENOENT) {
        r.errors.push_back(dir + ": " + errno_text(errno));
      }
    }
  }
  if (!paths.state_file.empty()) {
    const auto [dir, name] = split(paths.state_file);
    if (auto state_dir = open_dir(dir, r)) {
      remove_if_ours(state_dir->get(), dir, name, kMaxCheckpointBytes,
                     [](const std::string& t) { return looks_like_checkpoint(t); }, "a pressured checkpoint", r);
      remove_if_ours(state_dir->get(), dir, name + ".tmp", kMaxCheckpointBytes,
                     [](const std::string& t) { return looks_like_checkpoint_temporary(t); },
                     "a pressured checkpoint or a piece of one", r);
      state_dir->reset();
      const auto [up, base] = split(dir);
      if (dir != "/" && !base.empty() && base != "." && base != "..") {
        if (auto parent = open_dir(up, r)) remove_dir_if_made(parent->get(), up, base, r);
      }
    }
  }
  return r;
}

}  // namespace pressured
