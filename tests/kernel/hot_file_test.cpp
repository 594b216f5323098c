// A kernel file read over and over through one kept-open fd.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernel/hot_file.hpp"
#include "kernel_test_helpers.hpp"

namespace pressured::kernel {
namespace {

// Kept-open fds are budgeted: past the budget a read still succeeds, with a
// temporary fd, and the count of kept fds never passes the budget.
TEST(HotFileBudget, ReadsPastTheBudgetUseTemporaryFds) {
  testing::TempDir dir;
  std::vector<HotFile> files;
  for (int i = 0; i < 5; ++i) {
    std::string path = dir.path() + "/f" + std::to_string(i);
    std::ofstream(path) << "value " << i << "\n";
    files.emplace_back(path);
  }
  const uint64_t kept_before = HotFile::kept_fds();
  const uint64_t transient_before = HotFile::transient_reads();
  HotFile::set_kept_fd_budget(kept_before + 2);
  std::string buf;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 5; ++i) {
      auto r = files[i].read(buf);
      ASSERT_TRUE(r) << r.error().message;
      EXPECT_EQ(*r, "value " + std::to_string(i) + "\n");
    }
  }
  EXPECT_EQ(HotFile::kept_fds(), kept_before + 2);
  EXPECT_EQ(HotFile::transient_reads() - transient_before, 6u) << "3 files over the budget, read twice";
  int open_files = 0;
  for (const auto& f : files) open_files += f.is_open() ? 1 : 0;
  EXPECT_EQ(open_files, 2);
  files.clear();
  EXPECT_EQ(HotFile::kept_fds(), kept_before) << "closing gives the budget back";
  HotFile::set_kept_fd_budget(UINT64_MAX);
}

TEST(HotFile, RereadsThroughTheSameFdAndReopensAfterRemoval) {
  testing::TempDir dir;
  std::string path = dir.path() + "/memory.current";
  testing::write(path, "100\n");
  HotFile f(path);
  std::string buf;
  auto r = f.read(buf);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, "100\n");
  EXPECT_TRUE(f.is_open());
  testing::write(path, "200\n");  // in place: the kept fd sees it
  r = f.read(buf);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, "200\n");
  // Removed and created again (a recreated cgroup): the kept fd still reads
  // the old inode until closed; after close() the path is opened afresh.
  ASSERT_EQ(std::remove(path.c_str()), 0);
  testing::write(path, "300\n");
  f.close();
  EXPECT_FALSE(f.is_open());
  r = f.read(buf);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, "300\n");
  // A missing file is an error naming the path, and leaves the fd closed.
  HotFile gone(dir.path() + "/missing");
  auto e = gone.read(buf);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find(dir.path() + "/missing"), std::string::npos) << e.error().message;
  EXPECT_FALSE(gone.is_open());
}

}  // namespace
}  // namespace pressured::kernel
