// pressured uninstall's rules (userspace/daemon/uninstall.hpp) on a fake node
// in mkdtemp: what pressured wrote goes, everything else stays and is named.
#include "daemon/uninstall.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "daemon/checkpoint.hpp"
#include "pressured/seccomp_profile.hpp"

namespace pressured {
namespace {

namespace fs = std::filesystem;

class Uninstall : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pressured-uninstall-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(seccomp() + "/profiles");
    fs::create_directories(root_ + "/var/lib/pressured");
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string seccomp() const { return root_ + "/var/lib/kubelet/seccomp"; }
  std::string profile() const { return seccomp() + "/profiles/pressured.json"; }
  std::string state() const { return root_ + "/var/lib/pressured/state.json"; }
  UninstallPaths paths() const { return {seccomp(), state()}; }
  static void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
  static std::string checkpoint() {
    Checkpoint cp;
    cp.boot_id = "4b1e0c1e-0000-4000-8000-000000000001";
    return encode_checkpoint(cp);
  }

  std::string root_;
};

TEST_F(Uninstall, RemovesTheProfileTheCheckpointTheirTemporariesAndTheEmptyDirectories) {
  put(profile(), std::string(build_info::kSeccompProfile));
  put(profile() + ".tmp", "{\"defaultAct");  // a crash mid-install
  put(state(), checkpoint());
  put(state() + ".tmp", "{");  // a crash mid-checkpoint
  const auto r = uninstall_node_files(paths(), build_info::kSeccompProfile);
  EXPECT_TRUE(r.clean()) << ::testing::PrintToString(r.refused) << ::testing::PrintToString(r.errors);
  EXPECT_EQ(r.removed.size(), 6u) << ::testing::PrintToString(r.removed);
  EXPECT_FALSE(fs::exists(seccomp() + "/profiles"));
  EXPECT_TRUE(fs::exists(seccomp())) << "the kubelet's seccomp directory is not pressured's";
  EXPECT_FALSE(fs::exists(root_ + "/var/lib/pressured"));
  EXPECT_TRUE(fs::exists(root_ + "/var/lib"));

  const auto again = uninstall_node_files(paths(), build_info::kSeccompProfile);
  EXPECT_TRUE(again.clean());
  EXPECT_TRUE(again.removed.empty()) << "a second run finds nothing";
}

TEST_F(Uninstall, LeavesEverythingElseAndNamesWhatIsNotRecognisablyPressureds) {
  put(profile(), "{\"defaultAction\": \"SCMP_ACT_ERRNO\"}");  // another version's or edited
  put(seccomp() + "/profiles/other.json", "{}");
  put(state(), "{\"not\": \"a checkpoint\"}");
  put(root_ + "/var/lib/pressured/notes.txt", "an operator's");
  const auto r = uninstall_node_files(paths(), build_info::kSeccompProfile);
  EXPECT_FALSE(r.clean());
  ASSERT_EQ(r.refused.size(), 2u) << ::testing::PrintToString(r.refused);
  EXPECT_NE(r.refused[0].find(profile()), std::string::npos);
  EXPECT_NE(r.refused[1].find(state()), std::string::npos);
  EXPECT_TRUE(r.removed.empty()) << ::testing::PrintToString(r.removed);
  for (const auto& p : {profile(), seccomp() + "/profiles/other.json", state(), root_ + "/var/lib/pressured/notes.txt"}) {
    EXPECT_TRUE(fs::exists(p)) << p;
  }
}

TEST_F(Uninstall, OurFilesGoBesideOthersWhoseDirectoriesStay) {
  put(profile(), std::string(build_info::kSeccompProfile));
  put(seccomp() + "/profiles/other.json", "{}");
  put(state(), checkpoint());
  put(root_ + "/var/lib/pressured/notes.txt", "an operator's");
  const auto r = uninstall_node_files(paths(), build_info::kSeccompProfile);
  EXPECT_TRUE(r.clean()) << ::testing::PrintToString(r.refused) << ::testing::PrintToString(r.errors);
  EXPECT_EQ(r.removed.size(), 2u) << ::testing::PrintToString(r.removed);
  EXPECT_FALSE(fs::exists(profile()));
  EXPECT_FALSE(fs::exists(state()));
  EXPECT_TRUE(fs::exists(seccomp() + "/profiles/other.json"));
  EXPECT_TRUE(fs::exists(root_ + "/var/lib/pressured/notes.txt"));
}

TEST_F(Uninstall, NeverFollowsOrRemovesASymlink) {
  const std::string elsewhere = root_ + "/elsewhere.json";
  put(elsewhere, std::string(build_info::kSeccompProfile));
  ASSERT_EQ(::symlink(elsewhere.c_str(), profile().c_str()), 0);
  const auto r = uninstall_node_files({seccomp(), ""}, build_info::kSeccompProfile);
  EXPECT_EQ(r.refused.size(), 1u) << ::testing::PrintToString(r.refused);
  EXPECT_TRUE(fs::is_symlink(profile()));
  EXPECT_TRUE(fs::exists(elsewhere));
}

TEST_F(Uninstall, NothingThereIsClean) {
  const auto r = uninstall_node_files({root_ + "/missing/seccomp", root_ + "/missing/state.json"},
                                      build_info::kSeccompProfile);
  EXPECT_TRUE(r.clean()) << ::testing::PrintToString(r.errors);
  EXPECT_TRUE(r.removed.empty());
}

TEST(LooksLikeCheckpoint, EveryVersionsShapeAndNothingElse) {
  Checkpoint cp;
  cp.boot_id = "b";
  EXPECT_TRUE(looks_like_checkpoint(encode_checkpoint(cp)));
  EXPECT_TRUE(looks_like_checkpoint(R"({"version": 99, "boot_id": "b", "engine": {}, "policy": {}})"));
  EXPECT_FALSE(looks_like_checkpoint(""));
  EXPECT_FALSE(looks_like_checkpoint("[]"));
  EXPECT_FALSE(looks_like_checkpoint(R"({"version": 1, "boot_id": "b", "engine": {}})"));
  EXPECT_FALSE(looks_like_checkpoint(R"({"version": "1", "boot_id": "b", "engine": {}, "policy": {}})"));
}

}  // namespace
}  // namespace pressured
