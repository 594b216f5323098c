#pragma once
// One owner for a file descriptor: closed exactly once, when its owner goes
// away or is reset. Every fd pressured opens and keeps to itself (kernel
// files, eventfds, timerfds, pidfds, BPF probe objects, sockets) is held in
// one of these, so an early return cannot leak it and a move cannot close it
// twice.

#include <string>

#include "pressured/result.hpp"

namespace pressured::kernel {

class Fd {
 public:
  Fd() = default;
  /// Takes ownership of `fd` (-1, or any negative value, means none).
  explicit Fd(int fd) noexcept : fd_(fd < 0 ? -1 : fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  /// open(2) with O_CLOEXEC added; the error names the path.
  static Result<Fd> open(const std::string& path, int flags, unsigned mode = 0);
  /// openat(2) relative to `dirfd` with O_CLOEXEC added; the error names
  /// `name` as `dir_path`/`name` (the dirfd's path is for the message only).
  static Result<Fd> open_at(int dirfd, const std::string& dir_path, const std::string& name, int flags);

  /// The fd, still owned by this (-1 when none).
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  /// Gives the fd up without closing it: for a library that takes ownership
  /// (fdopendir, a struct that closes it itself).
  [[nodiscard]] int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  /// Closes the fd held (if any) and takes `fd` instead.
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

}  // namespace pressured::kernel
