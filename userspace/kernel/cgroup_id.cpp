#include "kernel/cgroup_id.hpp"

#include <sys/stat.h>

#include <cerrno>

namespace pressured::kernel {

Result<uint64_t> cgroup_id_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error::from_errno(errno, "stat " + path);
  if (!S_ISDIR(st.st_mode)) return Error{ENOTDIR, path + " is not a cgroup directory"};
  return static_cast<uint64_t>(st.st_ino);
}

}  // namespace pressured::kernel
