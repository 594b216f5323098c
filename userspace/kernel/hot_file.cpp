#include "kernel/hot_file.hpp"

#include <fcntl.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>

#include "kernel/file.hpp"

namespace pressured::kernel {
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

}  // namespace

HotFile& HotFile::operator=(HotFile&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    fd_ = std::move(o.fd_);
  }
  return *this;
}

void HotFile::close() {
  if (fd_.valid()) {
    fd_.reset();
    g_kept_fds.fetch_sub(1, std::memory_order_relaxed);
  }
}

void HotFile::reset(std::string path) {
  close();
  path_ = std::move(path);
}

uint64_t HotFile::transient_reads() { return g_transient_reads.load(std::memory_order_relaxed); }
void HotFile::set_kept_fd_budget(uint64_t budget) { g_kept_fd_budget.store(budget, std::memory_order_relaxed); }
uint64_t HotFile::kept_fds() { return g_kept_fds.load(std::memory_order_relaxed); }

void HotFile::size_for_process() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) (void)::getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur == RLIM_INFINITY) return;
  const uint64_t limit = rl.rlim_cur;
  const uint64_t reserve = limit / 4 > 256 ? limit / 4 : 256;
  set_kept_fd_budget(limit > reserve ? limit - reserve : 0);
}

Result<std::string_view> HotFile::read(std::string& buf) {
  // Over the budget, or out of fds anyway (other code holds them): read this
  // once through a temporary fd, without keeping it.
  auto read_transient = [&]() -> Result<std::string_view> {
    g_transient_reads.fetch_add(1, std::memory_order_relaxed);
    auto fd = Fd::open(path_, O_RDONLY);
    if (!fd) return fd.error();
    return pread_all(fd->get(), buf, path_);
  };
  if (!fd_.valid()) {
    if (!take_kept_slot()) return read_transient();
    auto fd = Fd::open(path_, O_RDONLY);
    if (!fd) {
      g_kept_fds.fetch_sub(1, std::memory_order_relaxed);
      if (fd.error().code != EMFILE && fd.error().code != ENFILE) return fd.error();
      return read_transient();
    }
    fd_ = std::move(*fd);
  }
  auto r = pread_all(fd_.get(), buf, path_);
  if (!r) {
    // A removed kernfs node answers ENODEV; make the next read start over.
    close();
  }
  return r;
}

}  // namespace pressured::kernel
