// The fd owner: closes exactly once, at the end of its owner's scope or on
// reset, and never after a move or a release.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernel/fd.hpp"
#include "kernel_test_helpers.hpp"

namespace pressured::kernel {
namespace {

using testing::is_open_fd;

int new_eventfd() {
  int fd = ::eventfd(0, EFD_CLOEXEC);
  EXPECT_GE(fd, 0) << "eventfd: " << std::strerror(errno);
  return fd;
}

TEST(Fd, ClosesAtTheEndOfItsScope) {
  int raw = new_eventfd();
  {
    Fd fd(raw);
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(fd.get(), raw);
    EXPECT_TRUE(is_open_fd(raw));
  }
  EXPECT_FALSE(is_open_fd(raw)) << "the owner's destructor closes the fd";
}

TEST(Fd, MovedFromOwnerDoesNotCloseAgain) {
  int raw = new_eventfd();
  Fd outer;
  {
    Fd inner(raw);
    outer = std::move(inner);
    EXPECT_FALSE(inner.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    EXPECT_EQ(inner.get(), -1);   // NOLINT(bugprone-use-after-move)
  }
  // The moved-from owner went out of scope: the fd must still be open, or a
  // second close would hit whatever fd number the kernel hands out next.
  EXPECT_TRUE(is_open_fd(raw));
  EXPECT_EQ(outer.get(), raw);

  Fd constructed(std::move(outer));
  EXPECT_FALSE(outer.valid());  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(is_open_fd(raw));
  {
    Fd last(std::move(constructed));
  }
  EXPECT_FALSE(is_open_fd(raw));
}

TEST(Fd, MoveAssignmentClosesTheFdItHeld) {
  int a = new_eventfd(), b = new_eventfd();
  Fd fa(a), fb(b);
  fa = std::move(fb);
  EXPECT_FALSE(is_open_fd(a)) << "the overwritten fd is closed";
  EXPECT_TRUE(is_open_fd(b));
  EXPECT_EQ(fa.get(), b);
  auto& self = fa;
  fa = std::move(self);  // self-move keeps the fd
  EXPECT_TRUE(is_open_fd(b));
  EXPECT_EQ(fa.get(), b);
}

TEST(Fd, ReleaseGivesUpOwnership) {
  int raw = new_eventfd();
  int released = -1;
  {
    Fd fd(raw);
    released = fd.release();
    EXPECT_FALSE(fd.valid());
  }
  EXPECT_EQ(released, raw);
  EXPECT_TRUE(is_open_fd(raw)) << "a released fd belongs to the caller";
  ::close(raw);
}

TEST(Fd, ResetClosesAndTakesTheNewFd) {
  int a = new_eventfd(), b = new_eventfd();
  Fd fd(a);
  fd.reset(b);
  EXPECT_FALSE(is_open_fd(a));
  EXPECT_EQ(fd.get(), b);
  fd.reset(b);  // the same fd again: kept, not closed
  EXPECT_TRUE(is_open_fd(b));
  fd.reset();
  EXPECT_FALSE(fd.valid());
  EXPECT_FALSE(is_open_fd(b));
  Fd none(-5);
  EXPECT_FALSE(none.valid());
  EXPECT_EQ(none.get(), -1);
}

TEST(Fd, LivesInContainers) {
  // A vector that grows moves its elements: every fd is closed once, at the end.
  std::vector<int> raws;
  {
    std::vector<Fd> fds;
    for (int i = 0; i < 20; ++i) {
      raws.push_back(new_eventfd());
      fds.emplace_back(raws.back());
    }
    for (int raw : raws) EXPECT_TRUE(is_open_fd(raw));
  }
  for (int raw : raws) EXPECT_FALSE(is_open_fd(raw));
}

TEST(Fd, OpenAddsCloexecAndNamesThePathOnError) {
  testing::TempDir dir;
  std::string path = dir.path() + "/file";
  testing::write(path, "x");
  auto fd = Fd::open(path, O_RDONLY);
  ASSERT_TRUE(fd) << fd.error().message;
  EXPECT_NE(::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, 0);

  auto missing = Fd::open(dir.path() + "/missing", O_RDONLY);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_NE(missing.error().message.find(dir.path() + "/missing"), std::string::npos) << missing.error().message;

  auto dfd = Fd::open(dir.path(), O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(dfd);
  auto at = Fd::open_at(dfd->get(), dir.path(), "file", O_RDONLY);
  ASSERT_TRUE(at) << at.error().message;
  EXPECT_NE(::fcntl(at->get(), F_GETFD) & FD_CLOEXEC, 0);
  auto at_missing = Fd::open_at(dfd->get(), dir.path(), "nope", O_RDONLY);
  ASSERT_FALSE(at_missing);
  EXPECT_NE(at_missing.error().message.find(dir.path() + "/nope"), std::string::npos) << at_missing.error().message;
}

}  // namespace
}  // namespace pressured::kernel
