#include "kernel/safe_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

namespace pressured::kernel {
namespace {

std::vector<std::string> components(std::string_view path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view c = path.substr(i, j - i);
    if (!c.empty() && c != ".") out.emplace_back(c);
    i = j + 1;
  }
  return out;
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

const char* kind_of(mode_t m) {
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return "not a regular file";
}

// The error of an O_NOFOLLOW open that failed: a link is named as one.
Error open_error(int err, int dirfd, const std::string& name, const std::string& path) {
  struct stat st {};
  if ((err == ELOOP || err == ENOTDIR) && ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(st.st_mode)) {
    return Error{ELOOP, "open " + path + ": a symbolic link, not followed"};
  }
  return Error::from_errno(err, "open " + path);
}

Result<Fd> open_subdir(int dirfd, const std::string& name, const std::string& path) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return open_error(errno, dirfd, name, path);
  return Fd(fd);
}

Result<void> write_all(int fd, std::string_view contents, const std::string& path) {
  std::size_t off = 0;
  while (off < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + off, contents.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "write " + path);
    }
    off += static_cast<std::size_t>(n);
  }
  return {};
}

// Creates `name` in `dirfd`, new (O_EXCL: never an existing file, nor through
// a link), with `contents` and `mode`, synced. Unlinks it again on failure.
Result<void> create_new(int dirfd, const std::string& name, const std::string& path, std::string_view contents,
                        unsigned mode) {
  int raw = ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (raw < 0) return open_error(errno, dirfd, name, path);
  Fd fd(raw);
  Result<void> r = write_all(fd.get(), contents, path);
  if (r && ::fchmod(fd.get(), mode) != 0) r = Error::from_errno(errno, "fchmod " + path);
  if (r && ::fsync(fd.get()) != 0) r = Error::from_errno(errno, "fsync " + path);
  if (!r) ::unlinkat(dirfd, name.c_str(), 0);
  return r;
}

}  // namespace

Result<Fd> open_dir_nofollow(const std::string& path) {
  if (path.empty()) return Error{EINVAL, "open: empty directory path"};
  std::string at = path.front() == '/' ? "/" : ".";
  auto dir = Fd::open(at, O_RDONLY | O_DIRECTORY);
  if (!dir) return dir.error();
  std::string shown = path.front() == '/' ? "" : ".";
  for (const auto& c : components(path)) {
    shown += "/" + c;
    auto next = open_subdir(dir->get(), c, shown);
    if (!next) return next.error();
    dir = std::move(*next);
  }
  return dir;
}

Result<void> replace_file(const std::string& base, std::string_view relative, std::string_view contents,
                          const ReplaceOptions& options) {
  std::vector<std::string> parts = components(relative);
  if (parts.empty() || parts.back() == "..") return Error{EINVAL, "no file name in '" + std::string(relative) + "'"};
  const std::string name = parts.back();
  parts.pop_back();
  auto dir = Fd::open(base, O_RDONLY | O_DIRECTORY);
  if (!dir) return dir.error();
  std::string dir_path = base;
  for (const auto& c : parts) {
    const std::string sub = join(dir_path, c);
    auto next = open_subdir(dir->get(), c, sub);
    if (!next && next.error().code == ENOENT) {
      const bool made = ::mkdirat(dir->get(), c.c_str(), 0700) == 0;
      if (!made && errno != EEXIST) return Error::from_errno(errno, "mkdir " + sub);
      next = open_subdir(dir->get(), c, sub);
      if (next && made) {
        if (::fchmod(next->get(), options.dir_mode) != 0) return Error::from_errno(errno, "fchmod " + sub);
        const std::string marker(kMadeByPressuredName);
        if (auto m = create_new(next->get(), marker, join(sub, marker), kMadeByPressuredText, 0644); !m) {
          return m.error();
        }
        ::fsync(dir->get());  // the new directory's entry
      }
    }
    if (!next) return next.error();
    dir = std::move(*next);
    dir_path = sub;
  }
  const std::string path = join(dir_path, name);
  struct stat st {};
  if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
    return Error{EEXIST, path + " is " + kind_of(st.st_mode) + ", not a regular file: not replaced (remove it)"};
  }
  // A crash mid-write leaves <name>.tmp; whatever is there now (that, or a
  // link planted under the name) is removed as an entry, never opened.
  const std::string tmp = name + ".tmp";
  if (::unlinkat(dir->get(), tmp.c_str(), 0) != 0 && errno != ENOENT) {
    return Error::from_errno(errno, "unlink " + join(dir_path, tmp));
  }
  if (auto r = create_new(dir->get(), tmp, join(dir_path, tmp), contents, options.mode); !r) return r.error();
  if (::renameat(dir->get(), tmp.c_str(), dir->get(), name.c_str()) != 0) {
    int err = errno;
    ::unlinkat(dir->get(), tmp.c_str(), 0);
    return Error::from_errno(err, "rename " + join(dir_path, tmp));
  }
  // The rename is durable once the directory is synced too.
  if (::fsync(dir->get()) != 0) return Error::from_errno(errno, "fsync " + dir_path);
  return {};
}

Result<std::string> read_regular_file_at(int dirfd, const std::string& dir_path, const std::string& name,
                                         std::size_t max_bytes) {
  const std::string path = join(dir_path, name);
  // Refused before it is opened: opening a device can act on it.
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Error::from_errno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return Error{EINVAL, path + " is " + kind_of(st.st_mode) + ", not a regular file"};
  // Non-blocking: a FIFO swapped in since the check opens at once instead of
  // waiting for a writer, and is refused below.
  int raw = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (raw < 0) return open_error(errno, dirfd, name, path);
  Fd fd(raw);
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return Error{EINVAL, path + " is " + kind_of(st.st_mode) + ", not a regular file"};
  auto too_large = [&] {
    return Error{EFBIG, path + " is larger than " + std::to_string(max_bytes) + " bytes"};
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return too_large();
  std::string out;
  out.resize(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), max_bytes) + 1);
  std::size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (out.size() > max_bytes) return too_large();  // grew since the fstat
      out.resize(std::min(out.size() * 2, max_bytes + 1));
    }
    ssize_t n = ::read(fd.get(), out.data() + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "read " + path);
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  if (have > max_bytes) return too_large();
  out.resize(have);
  return out;
}

Result<std::string> read_regular_file_nofollow(const std::string& path, std::size_t max_bytes) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return Error{EINVAL, "read " + path + ": not a file name"};
  auto dirfd = Fd::open(dir, O_RDONLY | O_DIRECTORY);
  if (!dirfd) return dirfd.error();
  return read_regular_file_at(dirfd->get(), dir, name, max_bytes);
}

}  // namespace pressured::kernel
