#include "kernel/fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace pressured::kernel {

Result<Fd> Fd::open(const std::string& path, int flags, unsigned mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return Error::from_errno(errno, "open " + path);
  return Fd(fd);
}

Result<Fd> Fd::open_at(int dirfd, const std::string& dir_path, const std::string& name, int flags) {
  int fd = ::openat(dirfd, name.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Error::from_errno(errno, "open " + dir_path + "/" + name);
  return Fd(fd);
}

void Fd::reset(int fd) noexcept {
  // close(2) releases the fd even when it reports an error (EINTR included on
  // Linux): retrying could close an fd another thread has just been given.
  if (fd == fd_) return;
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd < 0 ? -1 : fd;
}

}  // namespace pressured::kernel
