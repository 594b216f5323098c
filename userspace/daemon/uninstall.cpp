#include "daemon/uninstall.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "kernel/file.hpp"

namespace pressured {

namespace {

// Every file pressured writes is small (the profile a few KiB, the checkpoint
// a few KiB per eviction in flight); a larger file at these paths is not its.
constexpr std::size_t kMaxFileBytes = 16u << 20;

std::string errno_text(int err) { return std::strerror(err); }

// Removes `path` when it is a regular file whose contents `ours` accepts.
template <typename Check>
void remove_if_ours(const std::string& path, Check ours, const char* what, UninstallReport& r) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) r.errors.push_back(path + ": " + errno_text(errno));
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    r.refused.push_back(path + ": not a regular file (pressured writes only regular files there)");
    return;
  }
  if (static_cast<std::size_t>(st.st_size) > kMaxFileBytes) {
    r.refused.push_back(path + ": " + std::to_string(st.st_size) + " bytes, larger than anything pressured writes");
    return;
  }
  auto text = kernel::read_file(path, kMaxFileBytes);
  if (!text) {
    r.errors.push_back(path + ": " + text.error().message);
    return;
  }
  if (!ours(*text)) {
    r.refused.push_back(path + ": not " + what);
    return;
  }
  if (::unlink(path.c_str()) != 0) {
    if (errno != ENOENT) r.errors.push_back(path + ": " + errno_text(errno));
    return;
  }
  r.removed.push_back(path);
}

// pressured's atomic writer names its temporary <path>.tmp; any content.
void remove_temporary(const std::string& path, UninstallReport& r) {
  remove_if_ours(path + ".tmp", [](const std::string&) { return true; }, "", r);
}

void remove_dir_if_empty(const std::string& dir, UninstallReport& r) {
  if (dir.empty() || dir == "/") return;
  if (::rmdir(dir.c_str()) == 0) {
    r.removed.push_back(dir + "/");
    return;
  }
  // Not empty (someone else's files), a mount point, or already gone: it stays.
  if (errno == ENOENT || errno == ENOTEMPTY || errno == EEXIST || errno == EBUSY || errno == ENOTDIR) return;
  r.errors.push_back(dir + ": " + errno_text(errno));
}

}  // namespace

bool looks_like_checkpoint(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return false;
  return j.contains("version") && j["version"].is_number_integer() && j.contains("boot_id") &&
         j["boot_id"].is_string() && j.contains("engine") && j["engine"].is_object() && j.contains("policy") &&
         j["policy"].is_object();
}

UninstallReport uninstall_node_files(const UninstallPaths& paths, std::string_view profile) {
  UninstallReport r;
  if (!paths.seccomp_dir.empty()) {
    const std::string dir = paths.seccomp_dir + "/profiles";
    const std::string file = dir + "/pressured.json";
    remove_if_ours(file, [profile](const std::string& t) { return t == profile; },
                   "the seccomp profile this pressured installs (another version's, or edited)", r);
    remove_temporary(file, r);
    remove_dir_if_empty(dir, r);
  }
  if (!paths.state_file.empty()) {
    remove_if_ours(paths.state_file, [](const std::string& t) { return looks_like_checkpoint(t); },
                   "a pressured checkpoint", r);
    remove_temporary(paths.state_file, r);
    const std::filesystem::path parent = std::filesystem::path(paths.state_file).parent_path();
    remove_dir_if_empty(parent.string(), r);
  }
  return r;
}

}  // namespace pressured
