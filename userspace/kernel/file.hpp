#pragma once
// Small reads and writes of kernel files (cgroupfs, procfs, sysfs). Every
// error is a Result naming the path and the failing call, so a log line says
// which file of which cgroup went away. Files read over and over keep an fd
// open instead (HotFile, or a source's own Fd with pread_all).

#include <cstdint>
#include <string>
#include <string_view>

#include "pressured/result.hpp"

namespace pressured::kernel {

/// Reads a whole file once (open, read, close): for cold files (mountinfo,
/// cgroup.controllers, pid_max, pod metadata files). max_bytes 0: the whole
/// file, EFBIG beyond 64 MiB; otherwise at most its first max_bytes bytes.
Result<std::string> read_file(const std::string& path, std::size_t max_bytes = 0);

class Fd;

/// Reads an open fd from its current offset to the end, however short each
/// read is (a sysfs binary file gives at most a page a read); max_bytes as
/// read_file's. `size_hint` (an fstat's size, 0 when unknown) sizes the
/// buffer once and reads into it in place: for a large file (the kernel's
/// BTF) that spares a copy of every chunk and the string's regrowths.
Result<std::string> read_to_end(const Fd& fd, const std::string& path, std::size_t max_bytes = 0,
                                std::size_t size_hint = 0);

/// Like read_file, for `name` relative to the open directory `dirfd`; errors
/// name `dir_path`/`name` (`dir_path` is used for messages only).
Result<std::string> read_file_at(int dirfd, const std::string& dir_path, const std::string& name,
                                 std::size_t max_bytes = 0);

/// Reads a configuration file someone else writes (the node's
/// KubeletConfiguration, pressured's own file) without trusting what is at
/// the path: opened non-blocking (a FIFO there never blocks the caller),
/// refused unless a regular file, and refused (EFBIG) past max_bytes. The
/// identity it was read under (device, inode, size, mtime) comes back too,
/// so a caller can tell whether two reads saw one version of the file.
struct RegularFileRead {
  std::string text;
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  bool same_version(const RegularFileRead& o) const {
    return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns && text == o.text;
  }
};
Result<RegularFileRead> read_regular_file(const std::string& path, std::size_t max_bytes);

/// Reads a kept-open fd from offset 0 into `buf` (resized to fit) and returns
/// a view of it: one consistent generation of a seq_file (memory.stat,
/// memory.events, PSI, usage). `path` names the file in errors.
Result<std::string_view> pread_all(int fd, std::string& buf, std::string_view path);

/// Reads a file holding one unsigned number (memory.current, pids.current,
/// pid_max). "max" and anything else but a number are errors naming the path.
Result<uint64_t> read_u64(const std::string& path);

/// Writes `value` to a control file in one write(2) (cgroup.procs,
/// freezer.state, cgroup.kill, memory limits): the kernel takes it whole or
/// refuses it, so a short write is an error.
Result<void> write_file(const std::string& path, const std::string& value);

}  // namespace pressured::kernel
