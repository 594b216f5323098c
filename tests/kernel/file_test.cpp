// Reads and writes of kernel files: whole files, files relative to a dirfd,
// kept-open fds from offset 0, single numbers; every error names the path,
// and no path leaves an fd behind; an fd read on to its end past short reads.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "kernel/fd.hpp"
#include "kernel/file.hpp"
#include "kernel_test_helpers.hpp"

namespace pressured::kernel {
namespace {

using testing::TempDir;

// Open fds of this process (the /proc/self/fd listing less the listing's own).
int open_fds() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;
}

bool mentions(const Error& e, const std::string& path) { return e.message.find(path) != std::string::npos; }

TEST(ReadFile, WholeFileAndPrefix) {
  TempDir dir;
  std::string path = dir.path() + "/memory.stat";
  std::string big(100 * 1024, 'x');  // more than one read(2) chunk
  big += "\n";
  testing::write(path, big);
  auto all = read_file(path);
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(*all, big);
  auto head = read_file(path, 10);
  ASSERT_TRUE(head);
  EXPECT_EQ(*head, std::string(10, 'x'));
}

TEST(ReadFile, ErrorsNameThePathAndLeakNoFd) {
  TempDir dir;
  const int before = open_fds();
  auto missing = read_file(dir.path() + "/pod1/memory.current");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_TRUE(mentions(missing.error(), dir.path() + "/pod1/memory.current")) << missing.error().message;
  // A directory opens but cannot be read: the read error names it too, and
  // the fd opened for it is closed.
  auto isdir = read_file(dir.path());
  ASSERT_FALSE(isdir);
  EXPECT_EQ(isdir.error().code, EISDIR);
  EXPECT_TRUE(mentions(isdir.error(), "read " + dir.path())) << isdir.error().message;
  EXPECT_EQ(open_fds(), before);
}

TEST(ReadFile, AtADirFd) {
  TempDir dir;
  testing::write(dir.path() + "/pids.current", "7\n");
  auto dfd = Fd::open(dir.path(), O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(dfd) << dfd.error().message;
  auto text = read_file_at(dfd->get(), dir.path(), "pids.current");
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_EQ(*text, "7\n");
  auto missing = read_file_at(dfd->get(), dir.path(), "pids.max");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_TRUE(mentions(missing.error(), dir.path() + "/pids.max")) << missing.error().message;
}

// A pipe written in small pieces: every read(2) comes back short, as from a
// sysfs binary file (a page at most), and the reader must go on to the end.
std::string read_piecewise(const std::string& text, std::size_t piece, std::size_t max_bytes,
                           std::size_t hint) {
  int p[2];
  if (::pipe(p) != 0) return "pipe failed";
  Fd r(p[0]);
  std::thread writer([&, w = p[1]] {
    for (std::size_t i = 0; i < text.size(); i += piece) {
      const auto n = std::min(piece, text.size() - i);
      if (::write(w, text.data() + i, n) != static_cast<ssize_t>(n)) break;
      std::this_thread::yield();
    }
    ::close(w);
  });
  auto got = read_to_end(r, "/sys/kernel/btf/vmlinux", max_bytes, hint);
  // The reader may stop before the writer is done (max_bytes): drain so it can finish.
  char sink[4096];
  while (::read(r.get(), sink, sizeof sink) > 0) {
  }
  writer.join();
  return got ? *got : "error: " + got.error().message;
}

TEST(ReadToEnd, ReadsOnPastShortReadsWhateverTheHint) {
  std::string text;
  for (int i = 0; text.size() < 50000; ++i) text += std::to_string(i) + ",";
  // The fstat size a sysfs file reports, one too small (grows twice over), none.
  for (std::size_t hint : {text.size(), std::size_t{100}, std::size_t{0}}) {
    EXPECT_EQ(read_piecewise(text, 4096, 0, hint), text) << "hint " << hint;
    EXPECT_EQ(read_piecewise(text, 777, 0, hint), text) << "hint " << hint;
  }
  // A hint larger than the file: the result is the file, not the hint's size.
  EXPECT_EQ(read_piecewise(text, 4096, 0, text.size() * 3), text);
}

TEST(ReadToEnd, MaxBytesBoundsTheReadWithAHintToo) {
  const std::string text(20000, 'b');
  EXPECT_EQ(read_piecewise(text, 4096, 5000, text.size()), std::string(5000, 'b'));
  EXPECT_EQ(read_piecewise(text, 4096, 5000, 0), std::string(5000, 'b'));
}

TEST(ReadToEnd, ErrorsNameThePath) {
  TempDir dir;
  auto d = Fd::open(dir.path(), O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(d);
  auto r = read_to_end(*d, dir.path(), 0, 4096);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EISDIR);
  EXPECT_TRUE(mentions(r.error(), "read " + dir.path())) << r.error().message;
}

TEST(PreadAll, RereadsFromOffsetZeroAndGrowsTheBuffer) {
  TempDir dir;
  std::string path = dir.path() + "/memory.stat";
  std::string first(10000, 'a');  // more than the 4 KiB the buffer starts with
  testing::write(path, first);
  auto fd = Fd::open(path, O_RDONLY);
  ASSERT_TRUE(fd);
  std::string buf;
  auto r1 = pread_all(fd->get(), buf, path);
  ASSERT_TRUE(r1) << r1.error().message;
  EXPECT_EQ(*r1, first);
  testing::write(path, "short\n");  // rewritten in place: the same fd sees the new content
  auto r2 = pread_all(fd->get(), buf, path);
  ASSERT_TRUE(r2);
  EXPECT_EQ(*r2, "short\n");
  auto bad = pread_all(-1, buf, "/sys/fs/cgroup/x/memory.stat");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, EBADF);
  EXPECT_TRUE(mentions(bad.error(), "/sys/fs/cgroup/x/memory.stat")) << bad.error().message;
}

TEST(ReadU64, NumbersAndErrors) {
  TempDir dir;
  testing::write(dir.path() + "/pid_max", "4194304\n");
  testing::write(dir.path() + "/pids.max", "max\n");
  testing::write(dir.path() + "/garbage", "12 kB\n");
  auto v = read_u64(dir.path() + "/pid_max");
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(*v, 4194304u);
  for (const char* name : {"pids.max", "garbage", "missing"}) {
    auto e = read_u64(dir.path() + "/" + name);
    ASSERT_FALSE(e) << name;
    EXPECT_TRUE(mentions(e.error(), dir.path() + "/" + name)) << e.error().message;
  }
}

TEST(WriteFile, WholeValueOrAnErrorNamingThePath) {
  TempDir dir;
  std::string path = dir.path() + "/freezer.state";
  testing::write(path, "");
  ASSERT_TRUE(write_file(path, "FROZEN"));
  auto back = read_file(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "FROZEN");
  auto missing = write_file(dir.path() + "/gone/cgroup.procs", "1");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_TRUE(mentions(missing.error(), dir.path() + "/gone/cgroup.procs")) << missing.error().message;
}

}  // namespace
}  // namespace pressured::kernel
