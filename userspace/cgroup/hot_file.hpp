#pragma once
// A kernel file read over and over through one kept-open fd with pread(2):
// no open/close per read and no path walk. Opened lazily. Kept-open fds are
// budgeted process-wide (set_kept_fd_budget): past the budget, or on
// EMFILE/ENFILE, a read opens, reads and closes (counted by
// transient_reads()), so thousands of pods never exhaust the fd table that
// directory scans, sockets and BPF need too.

#include <string>
#include <string_view>

#include "pressured/result.hpp"

namespace pressured::cgroup {

class HotFile {
 public:
  HotFile() = default;
  explicit HotFile(std::string path) : path_(std::move(path)) {}
  ~HotFile() { close(); }
  HotFile(HotFile&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }
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
  bool is_open() const { return fd_ >= 0; }

  /// Reads done with a temporary fd because the budget or the fd table was
  /// full (process-wide).
  static uint64_t transient_reads();

  /// How many fds HotFiles may keep open at once, process-wide (default:
  /// unlimited). Lowering it below the current count closes nothing: files
  /// over the budget keep their fd until closed.
  static void set_kept_fd_budget(uint64_t budget);
  /// Fds HotFiles keep open now.
  static uint64_t kept_fds();

 private:
  std::string path_;
  int fd_ = -1;
};

/// Reads a whole file once (open, read, close): for cold files (mountinfo,
/// cgroup.controllers, pid_max, pod metadata files). max_bytes 0: the whole
/// file, EFBIG beyond 64 MiB; otherwise at most its first max_bytes bytes.
Result<std::string> read_file(const std::string& path, std::size_t max_bytes = 0);

/// Writes `value` to a control file in one write(2) (cgroup.procs,
/// freezer.state, cgroup.kill, memory limits): the kernel takes it whole or
/// refuses it, so a short write is an error.
Result<void> write_file(const std::string& path, const std::string& value);

}  // namespace pressured::cgroup
