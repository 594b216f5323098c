#include "kernel/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "kernel/fd.hpp"
#include "kernel/parse.hpp"

namespace pressured::kernel {
namespace {

constexpr std::size_t kMaxFileBytes = 64u << 20;

std::string too_large(std::string_view path) {
  return "read " + std::string(path) + ": file larger than 64 MiB";
}

}  // namespace

Result<std::string> read_to_end(const Fd& fd, const std::string& path, std::size_t max_bytes, std::size_t size_hint) {
  std::string out;
  if (size_hint != 0) {
    // In place: one buffer of the expected size, grown only if the file is
    // longer than it said, and no copy of each chunk.
    const std::size_t cap = max_bytes != 0 ? max_bytes : kMaxFileBytes + 1;
    out.resize(std::min(size_hint, cap));
    std::size_t got = 0;
    for (;;) {
      if (got == out.size()) {
        if (out.size() >= cap) break;
        out.resize(std::min(cap, out.size() * 2));
      }
      const ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Error::from_errno(errno, "read " + path);
      }
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    out.resize(got);
    if (max_bytes == 0 && out.size() > kMaxFileBytes) return Error{EFBIG, too_large(path)};
    return out;
  }
  char chunk[8192];
  for (;;) {
    std::size_t want = sizeof chunk;
    if (max_bytes != 0) {
      if (out.size() >= max_bytes) break;
      want = std::min(want, max_bytes - out.size());
    }
    ssize_t n = ::read(fd.get(), chunk, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "read " + path);
    }
    if (n == 0) break;
    out.append(chunk, static_cast<std::size_t>(n));
    if (out.size() > kMaxFileBytes) return Error{EFBIG, too_large(path)};
  }
  return out;
}

Result<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  auto fd = Fd::open(path, O_RDONLY);
  if (!fd) return fd.error();
  return read_to_end(*fd, path, max_bytes);
}

Result<std::string> read_file_at(int dirfd, const std::string& dir_path, const std::string& name,
                                 std::size_t max_bytes) {
  auto fd = Fd::open_at(dirfd, dir_path, name, O_RDONLY);
  if (!fd) return fd.error();
  return read_to_end(*fd, dir_path + "/" + name, max_bytes);
}

Result<RegularFileRead> read_regular_file(const std::string& path, std::size_t max_bytes) {
  auto fd = Fd::open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!fd) return fd.error();
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return Error::from_errno(errno, "fstat " + path);
  if (!S_ISREG(st.st_mode)) return Error{EINVAL, path + ": not a regular file (a FIFO, device or directory is never read)"};
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Error{EFBIG, path + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                            std::to_string(max_bytes) + " a configuration file may have"};
  }
  // One byte past the bound tells a file that grew while being read.
  auto text = read_to_end(*fd, path, max_bytes + 1);
  if (!text) return text.error();
  if (text->size() > max_bytes) {
    return Error{EFBIG, path + ": grew past the " + std::to_string(max_bytes) + " bytes a configuration file may have"};
  }
  RegularFileRead r;
  r.text = std::move(*text);
  r.device = st.st_dev;
  r.inode = st.st_ino;
  // The size and mtime after the read: a write that raced the read moves them.
  if (::fstat(fd->get(), &st) != 0) return Error::from_errno(errno, "fstat " + path);
  r.size = st.st_size;
  r.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return r;
}

// Reads from offset 0 until a short read. The files read here are regular
// files (fake trees) or single-record seq_files (memory.stat, meminfo, PSI),
// for which a short read means the end; when the buffer fills up it is
// doubled and the file re-read from 0, so the content is one consistent
// generation.
Result<std::string_view> pread_all(int fd, std::string& buf, std::string_view path) {
  if (buf.size() < 4096) buf.resize(4096);
  for (;;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "read " + std::string(path));
    }
    if (static_cast<std::size_t>(n) < buf.size()) return std::string_view(buf.data(), static_cast<std::size_t>(n));
    if (buf.size() >= kMaxFileBytes) return Error{EFBIG, too_large(path)};
    buf.resize(buf.size() * 2);
  }
}

Result<uint64_t> read_u64(const std::string& path) {
  auto text = read_file(path, 4096);
  if (!text) return text.error();
  auto v = parse_single_value(*text);
  if (!v) return Error{v.error().code, path + ": " + v.error().message};
  if (!v->has_value()) return Error{EINVAL, path + ": expected a number, got 'max'"};
  return **v;
}

Result<void> write_file(const std::string& path, const std::string& value) {
  auto fd = Fd::open(path, O_WRONLY);
  if (!fd) return fd.error();
  ssize_t n = ::write(fd->get(), value.data(), value.size());
  if (n < 0) return Error::from_errno(errno, "write " + path);
  if (n != static_cast<ssize_t>(value.size())) return Error{EIO, "write " + path + ": short write"};
  return {};
}

}  // namespace pressured::kernel
