#pragma once
// A kernel file read over and over through one kept-open fd with pread(2):
// no open/close per read and no path walk. Opened lazily. Kept-open fds are
// budgeted process-wide (set_kept_fd_budget): past the budget, or on
// EMFILE/ENFILE, a read opens, reads and closes (counted by
// transient_reads()), so thousands of pods never exhaust the fd table that
// directory scans, sockets and BPF need too.

#include <string>
#include <string_view>

#include "kernel/fd.hpp"
#include "pressured/result.hpp"

namespace pressured::kernel {

class HotFile {
 public:
  HotFile() = default;
  explicit HotFile(std::string path) : path_(std::move(path)) {}
  ~HotFile() { close(); }
  HotFile(HotFile&& o) noexcept = default;
  HotFile& operator=(HotFile&& o) noexcept;
  HotFile(const HotFile&) = delete;
  HotFile& operator=(const HotFile&) = delete;

  /// Reads the whole file into `buf` (resized to fit) and returns a view of it.
  /// Errors carry the errno: ENOENT/ENODEV when the cgroup is gone, EACCES, ...
  Result<std::string_view> read(std::string& buf);

  /// Closes the fd (the next read reopens the path).
  void close();
  /// Changes the path and closes the fd.
  void reset(std::string path);

  const std::string& path() const { return path_; }
  bool is_open() const { return fd_.valid(); }

  /// Reads done with a temporary fd because the budget or the fd table was
  /// full (process-wide).
  static uint64_t transient_reads();

  /// How many fds HotFiles may keep open at once, process-wide (default:
  /// unlimited). Lowering it below the current count closes nothing: files
  /// over the budget keep their fd until closed.
  static void set_kept_fd_budget(uint64_t budget);
  /// Fds HotFiles keep open now.
  static uint64_t kept_fds();

  /// Sets the process up for many kept files (up to six per pod): lifts the
  /// soft RLIMIT_NOFILE to the hard one and sets the kept-fd budget to it
  /// minus a quarter (at least 256) left for what must never fail for want
  /// of an fd (listing pod cgroups, a read over the budget, sockets, BPF
  /// objects, pidfds). Called once where the process is set up (main, a
  /// benchmark's main), never by a library.
  static void size_for_process();

 private:
  std::string path_;
  Fd fd_;
};

}  // namespace pressured::kernel
