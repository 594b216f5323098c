// The writer and reader of pressured's own files on the node's disk
// (kernel/safe_file.hpp) with links, FIFOs and stale temporaries planted
// where they work: nothing is written or read through a link, nothing blocks.
#include "kernel/safe_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "kernel_test_helpers.hpp"

namespace pressured::kernel {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(SafeFile, MakesMissingDirectoriesWithTheMarkerAndSetsTheModeWhateverTheUmask) {
  TempDir t;
  const mode_t old = ::umask(077);
  auto r = replace_file(t.path(), "a/b/file.json", "{}\n", {.mode = 0644, .dir_mode = 0755});
  ::umask(old);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(slurp(t.path() + "/a/b/file.json"), "{}\n");
  EXPECT_EQ(mode_of(t.path() + "/a/b/file.json"), 0644u);
  EXPECT_EQ(mode_of(t.path() + "/a"), 0755u);
  for (const char* d : {"/a/", "/a/b/"}) {
    EXPECT_EQ(slurp(t.path() + d + std::string(kMadeByPressuredName)), kMadeByPressuredText) << d;
  }
  EXPECT_FALSE(fs::exists(t.path() + "/a/b/file.json.tmp"));
  // A directory that was there is not marked.
  ASSERT_TRUE(replace_file(t.path(), "file.json", "x"));
  EXPECT_FALSE(fs::exists(t.path() + "/" + std::string(kMadeByPressuredName)));
}

TEST(SafeFile, ALinkOrAStaleFileAtTheTemporaryNameIsRemovedNeverWrittenThrough) {
  TempDir t;
  const std::string victim = t.path() + "/victim";
  write(victim, "not pressured's");
  ASSERT_EQ(::chmod(victim.c_str(), 0600), 0);
  fs::create_directories(t.path() + "/d");
  ASSERT_EQ(::symlink(victim.c_str(), (t.path() + "/d/f.tmp").c_str()), 0);
  auto r = replace_file(t.path(), "d/f", "pressured's", {.mode = 0644});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(slurp(victim), "not pressured's");
  EXPECT_EQ(mode_of(victim), 0600u);
  EXPECT_EQ(slurp(t.path() + "/d/f"), "pressured's");
  EXPECT_FALSE(fs::is_symlink(t.path() + "/d/f.tmp"));

  write(t.path() + "/d/f.tmp", "a crash mid-write");
  ASSERT_TRUE(replace_file(t.path(), "d/f", "again"));
  EXPECT_EQ(slurp(t.path() + "/d/f"), "again");
}

TEST(SafeFile, ALinkInTheDirectoriesBelowTheBaseOrAtTheFileIsRefused) {
  TempDir t;
  fs::create_directories(t.path() + "/elsewhere");
  ASSERT_EQ(::symlink((t.path() + "/elsewhere").c_str(), (t.path() + "/d").c_str()), 0);
  auto r = replace_file(t.path(), "d/f", "x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ELOOP) << r.error().message;
  EXPECT_NE(r.error().message.find(t.path() + "/d"), std::string::npos) << r.error().message;
  EXPECT_TRUE(fs::is_empty(t.path() + "/elsewhere"));

  write(t.path() + "/elsewhere/target", "theirs");
  ASSERT_EQ(::symlink((t.path() + "/elsewhere/target").c_str(), (t.path() + "/f").c_str()), 0);
  r = replace_file(t.path(), "f", "x");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("symbolic link"), std::string::npos) << r.error().message;
  EXPECT_TRUE(fs::is_symlink(t.path() + "/f"));
  EXPECT_EQ(slurp(t.path() + "/elsewhere/target"), "theirs");
}

TEST(SafeFile, AFifoIsNeitherReplacedNorWaitedOn) {
  TempDir t;
  const std::string fifo = t.path() + "/f";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto w = replace_file(t.path(), "f", "x");
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("FIFO"), std::string::npos) << w.error().message;
  auto r = read_regular_file_nofollow(fifo, 1024);  // would block in open() without a writer
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("FIFO"), std::string::npos) << r.error().message;
}

TEST(SafeFile, TheReaderTakesOnlyARegularFileOfAtMostTheBound) {
  TempDir t;
  write(t.path() + "/f", "12345");
  auto r = read_regular_file_nofollow(t.path() + "/f", 5);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, "12345");
  auto big = read_regular_file_nofollow(t.path() + "/f", 4);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, EFBIG);
  EXPECT_EQ(read_regular_file_nofollow(t.path() + "/missing", 5).error().code, ENOENT);
  ASSERT_EQ(::symlink((t.path() + "/f").c_str(), (t.path() + "/l").c_str()), 0);
  EXPECT_FALSE(read_regular_file_nofollow(t.path() + "/l", 5));
  EXPECT_FALSE(read_regular_file_nofollow(t.path(), 5)) << "a directory";
  write(t.path() + "/empty", "");
  auto empty = read_regular_file_nofollow(t.path() + "/empty", 5);
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, "");
}

TEST(SafeFile, OpenDirNoFollowRefusesALinkInAnyComponent) {
  TempDir t;
  fs::create_directories(t.path() + "/real/sub");
  ASSERT_EQ(::symlink((t.path() + "/real").c_str(), (t.path() + "/link").c_str()), 0);
  EXPECT_TRUE(open_dir_nofollow(t.path() + "/real/sub"));
  auto r = open_dir_nofollow(t.path() + "/link/sub");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ELOOP);
  EXPECT_NE(r.error().message.find(t.path() + "/link"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace pressured::kernel
