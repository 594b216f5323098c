#pragma once
// Disk usage of a directory tree, computed independently of the storage
// walker (std::filesystem, lstat): what the writable-layer tests compare with.

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace pressured::testing {

/// Allocated bytes (st_blocks * 512) of one path, not following symlinks.
inline uint64_t allocated(const std::string& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

/// Bytes and inodes of a tree, its root included.
inline std::pair<uint64_t, uint64_t> tree_usage(const std::string& root) {
  uint64_t bytes = allocated(root), inodes = 1;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    bytes += allocated(e.path().string());
    ++inodes;
  }
  return {bytes, inodes};
}

}  // namespace pressured::testing
