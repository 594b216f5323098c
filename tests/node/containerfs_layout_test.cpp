// Filesystem layout detection (KEP-4191) on fake filesystem ids, and the
// observer reading containerfs.* from the writable layers' filesystem.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <map>

#include "fakes/fake_node.hpp"
#include "node/containerfs_layout.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

using node::classify_layout;
using testing::FakeNode;

TEST(ContainerfsLayout, ClassifiesByFilesystemId) {
  EXPECT_EQ(classify_layout(1, 1, 1), ContainerfsLayout::Single);
  EXPECT_EQ(classify_layout(1, std::nullopt, 1), ContainerfsLayout::Single);  // no imagefs: it is nodefs
  EXPECT_EQ(classify_layout(1, 2, 2), ContainerfsLayout::Imagefs);
  EXPECT_EQ(classify_layout(1, 2, 1), ContainerfsLayout::Split);
  EXPECT_EQ(classify_layout(1, 2, 3), ContainerfsLayout::Separate);
  EXPECT_EQ(classify_layout(1, 1, 3), ContainerfsLayout::Separate);
  EXPECT_EQ(classify_layout(1, std::nullopt, 3), ContainerfsLayout::Separate);
  EXPECT_EQ(classify_layout(std::nullopt, 2, 2), ContainerfsLayout::Unknown);
  EXPECT_EQ(classify_layout(1, 2, std::nullopt), ContainerfsLayout::Unknown);
  EXPECT_TRUE(is_split(ContainerfsLayout::Split));
  EXPECT_TRUE(is_split(ContainerfsLayout::Separate));
  EXPECT_FALSE(is_split(ContainerfsLayout::Imagefs));
  EXPECT_FALSE(is_split(ContainerfsLayout::Single));
}

// A fake stat(): path -> device, ENOENT for the others, or an error.
node::DeviceOf fake(std::map<std::string, Result<uint64_t>> devices) {
  return [devices = std::move(devices)](const std::string& p) -> Result<uint64_t> {
    auto it = devices.find(p);
    if (it == devices.end()) return Error{ENOENT, "stat " + p + ": No such file or directory"};
    return it->second;
  };
}

ObserveConfig paths(std::string runtime_root = "") {
  ObserveConfig c;
  c.nodefs_path = "/var/lib/kubelet";
  c.imagefs_path = "/var/lib/containers/storage";
  c.runtime_root = std::move(runtime_root);
  return c;
}

TEST(ContainerfsLayout, DetectsEachLayoutFromThePaths) {
  // CRI-O with a separate image store: writable layers in its root on nodefs.
  auto d = node::detect_containerfs(paths("/var/lib/containers/root"),
                                    fake({{"/var/lib/kubelet", 10}, {"/var/lib/containers/storage", 20},
                                          {"/var/lib/containers/root", 10}}));
  EXPECT_EQ(d.layout, ContainerfsLayout::Split);
  EXPECT_EQ(d.containerfs_path, "/var/lib/containers/root");
  EXPECT_NE(d.detail.find("writable layers /var/lib/containers/root"), std::string::npos) << d.detail;

  d = node::detect_containerfs(paths("/mnt/layers"), fake({{"/var/lib/kubelet", 10},
                                                           {"/var/lib/containers/storage", 20},
                                                           {"/mnt/layers", 30}}));
  EXPECT_EQ(d.layout, ContainerfsLayout::Separate);
  EXPECT_EQ(d.containerfs_path, "/mnt/layers");

  // No runtime root: the layers are below the imagefs path.
  d = node::detect_containerfs(paths(), fake({{"/var/lib/kubelet", 10}, {"/var/lib/containers/storage", 20}}));
  EXPECT_EQ(d.layout, ContainerfsLayout::Imagefs);
  EXPECT_EQ(d.containerfs_path, "/var/lib/containers/storage");

  // No imagefs path at all: one filesystem, read at nodefs.
  d = node::detect_containerfs(paths(), fake({{"/var/lib/kubelet", 10}}));
  EXPECT_EQ(d.layout, ContainerfsLayout::Single);
  EXPECT_EQ(d.containerfs_path, "/var/lib/kubelet");
}

TEST(ContainerfsLayout, UnknownSaysWhy) {
  // A configured runtime root that does not exist is not guessed at.
  auto d = node::detect_containerfs(paths("/var/lib/containers/root"), fake({{"/var/lib/kubelet", 10}}));
  EXPECT_EQ(d.layout, ContainerfsLayout::Unknown);
  EXPECT_TRUE(d.containerfs_path.empty());
  EXPECT_NE(d.detail.find("/var/lib/containers/root (cgroup.runtimeRoot) does not exist"), std::string::npos)
      << d.detail;

  d = node::detect_containerfs(paths(), fake({}));
  EXPECT_EQ(d.layout, ContainerfsLayout::Unknown);
  EXPECT_NE(d.detail.find("nodefs /var/lib/kubelet does not exist"), std::string::npos) << d.detail;

  // Any other error is reported, not taken for "absent".
  d = node::detect_containerfs(paths(), fake({{"/var/lib/kubelet", 10},
                                              {"/var/lib/containers/storage", Error{EACCES, "stat x: denied"}}}));
  EXPECT_EQ(d.layout, ContainerfsLayout::Unknown);
  EXPECT_EQ(d.detail, "stat x: denied");
}

TEST(ContainerfsLayout, RealDirectoriesOnOneFilesystemAreSingle) {
  FakeNode node(CgroupVersion::V2, CgroupDriver::Cgroupfs);
  auto d = node::detect_containerfs(node.config());
  EXPECT_EQ(d.layout, ContainerfsLayout::Single) << d.detail;
}

// The observer reads containerfs.* from the writable layers' filesystem: a
// directory on /dev/shm (tmpfs) when the fake node is elsewhere.
TEST(ContainerfsObserver, ReadsTheWritableLayersFilesystem) {
  FakeNode node(CgroupVersion::V2, CgroupDriver::Cgroupfs);
  char tmpl[] = "/dev/shm/pressured-layers-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) GTEST_SKIP() << "no /dev/shm to put a separate writable-layers directory on";
  const std::string layers = tmpl;
  struct stat a {}, b {};
  ASSERT_EQ(::stat(node.root().c_str(), &a), 0);
  ASSERT_EQ(::stat(layers.c_str(), &b), 0);
  if (a.st_dev == b.st_dev) {
    ::rmdir(layers.c_str());
    GTEST_SKIP() << "/dev/shm and " << node.root() << " are one filesystem here: no separate layout to observe";
  }
  ObserveConfig c = node.config();
  c.runtime_root = layers;
  auto obs = make_node_observer(c, nullptr, nullptr);
  ASSERT_TRUE(obs) << obs.error().message;
  auto snap = (*obs)->observe(TimePoint(std::chrono::seconds(1)));
  ::rmdir(layers.c_str());
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_EQ(snap->containerfs_layout, ContainerfsLayout::Separate);
  struct statvfs v {};
  ASSERT_EQ(::statvfs("/dev/shm", &v), 0);
  const auto& cfs = snap->signal(Signal::ContainerfsAvailable);
  ASSERT_TRUE(cfs);
  EXPECT_DOUBLE_EQ(cfs->capacity, static_cast<double>(v.f_blocks) * static_cast<double>(v.f_frsize));
  const auto& nf = snap->signal(Signal::NodefsAvailable);
  ASSERT_TRUE(nf);
  EXPECT_NE(cfs->capacity, nf->capacity);
  ASSERT_TRUE(snap->signal(Signal::ContainerfsInodesFree));  // tmpfs has an inode limit
  // refresh_signal reads it too (the daemon's fast path).
  auto fresh = (*obs)->refresh_signal(Signal::ContainerfsAvailable, TimePoint(std::chrono::seconds(2)));
  EXPECT_FALSE(fresh) << "the directory is gone: the read must fail, not report a value";
}

TEST(ContainerfsObserver, OneFilesystemReportsNodefsValues) {
  FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  auto obs = make_node_observer(node.config(), nullptr, nullptr);
  ASSERT_TRUE(obs) << obs.error().message;
  auto snap = (*obs)->observe(TimePoint(std::chrono::seconds(1)));
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_EQ(snap->containerfs_layout, ContainerfsLayout::Single);
  ASSERT_TRUE(snap->signal(Signal::ContainerfsAvailable));
  EXPECT_DOUBLE_EQ(snap->signal(Signal::ContainerfsAvailable)->capacity, snap->signal(Signal::NodefsAvailable)->capacity);
}

}  // namespace
}  // namespace pressured
