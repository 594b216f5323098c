#include "cgroup/hot_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

namespace pressured::cgroup {
namespace {

std::atomic<uint64_t> g_transient_reads{0};
std::atomic<uint64_t> g_kept_fds{0};
std::atomic<uint64_t> g_kept_fd_budget{UINT64_MAX};

// Takes one unit of the kept-fd budget; false when it is spent.
bool take_kept_slot() {
  uint64_t n = g_kept_fds.load(std::memory_order_relaxed);
  do {
    if (n >= g_kept_fd_budget.load(std::memory_order_relaxed)) return false;
  } while (!g_kept_fds.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  return true;
}

// Reads from offset 0 until a short read. The files read here are regular
// files (fake trees) or single-record seq_files (memory.stat, meminfo, PSI),
// for which a short read means the end; when the buffer fills up it is
// doubled and the file re-read from 0, so the content is one consistent
// generation.
Result<std::string_view> pread_all(int fd, std::string& buf, const std::string& path) {
  if (buf.size() < 4096) buf.resize(4096);
  for (;;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno(errno, "read " + path);
    }
    if (static_cast<std::size_t>(n) < buf.size()) return std::string_view(buf.data(), static_cast<std::size_t>(n));
    if (buf.size() >= (64u << 20)) return Error{EFBIG, "read " + path + ": file larger than 64 MiB"};
    buf.resize(buf.size() * 2);
  }
}

}  // namespace

HotFile& HotFile::operator=(HotFile&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void HotFile::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    g_kept_fds.fetch_sub(1, std::memory_order_relaxed);
  }
  fd_ = -1;
}

void HotFile::reset(std::string path) {
  close();
  path_ = std::move(path);
}

uint64_t HotFile::transient_reads() { return g_transient_reads.load(std::memory_order_relaxed); }
void HotFile::set_kept_fd_budget(uint64_t budget) { g_kept_fd_budget.store(budget, std::memory_order_relaxed); }
uint64_t HotFile::kept_fds() { return g_kept_fds.load(std::memory_order_relaxed); }

Result<std::string_view> HotFile::read(std::string& buf) {
  // Over the budget, or out of fds anyway (other code holds them): read this
  // once through a temporary fd, without keeping it.
  auto read_transient = [&]() -> Result<std::string_view> {
    g_transient_reads.fetch_add(1, std::memory_order_relaxed);
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error::from_errno(errno, "open " + path_);
    auto r = pread_all(fd, buf, path_);
    ::close(fd);
    return r;
  };
  if (fd_ < 0) {
    if (!take_kept_slot()) return read_transient();
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      g_kept_fds.fetch_sub(1, std::memory_order_relaxed);
      if (err != EMFILE && err != ENFILE) return Error::from_errno(err, "open " + path_);
      return read_transient();
    }
    fd_ = fd;
  }
  auto r = pread_all(fd_, buf, path_);
  if (!r) {
    // A removed kernfs node answers ENODEV; make the next read start over.
    close();
  }
  return r;
}

Result<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::from_errno(errno, "open " + path);
  std::string out;
  char chunk[8192];
  for (;;) {
    std::size_t want = sizeof chunk;
    if (max_bytes != 0) {
      if (out.size() >= max_bytes) break;
      want = std::min(want, max_bytes - out.size());
    }
    ssize_t n = ::read(fd, chunk, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Error::from_errno(err, "read " + path);
    }
    if (n == 0) break;
    out.append(chunk, static_cast<std::size_t>(n));
    if (out.size() > (64u << 20)) {
      ::close(fd);
      return Error{EFBIG, "read " + path + ": file larger than 64 MiB"};
    }
  }
  ::close(fd);
  return out;
}

Result<void> write_file(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Error::from_errno(errno, "open " + path);
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n < 0) return Error::from_errno(err, "write " + path);
  if (n != static_cast<ssize_t>(value.size())) return Error{EIO, "write " + path + ": short write"};
  return {};
}

}  // namespace pressured::cgroup
