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
#include "kernel/safe_file.hpp"
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

TEST_F(Uninstall, RemovesTheProfileTheCheckpointTheirTemporariesAndTheDirectoriesPressuredMade) {
  // Made by pressured's writer, as install-seccomp and the daemon make them
  // on a node that had neither directory.
  fs::remove_all(seccomp() + "/profiles");
  fs::remove_all(root_ + "/var/lib/pressured");
  const std::string profile_text(build_info::kSeccompProfile);
  ASSERT_TRUE(kernel::replace_file(seccomp(), "profiles/pressured.json", profile_text, {.mode = 0644, .dir_mode = 0755}));
  ASSERT_TRUE(write_file_atomically(state(), checkpoint()));
  put(profile() + ".tmp", profile_text.substr(0, 20));  // a crash mid-install
  put(state() + ".tmp", checkpoint().substr(0, 40));     // a crash mid-checkpoint
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

// The state directory the kubelet made for the DaemonSet's volume (or an
// operator made) holds no marker: pressured's files go, the directory stays,
// named as kept.
TEST_F(Uninstall, ADirectoryPressuredDidNotMakeStaysEvenWhenEmpty) {
  put(state(), checkpoint());
  put(profile(), std::string(build_info::kSeccompProfile));
  const auto r = uninstall_node_files(paths(), build_info::kSeccompProfile);
  EXPECT_TRUE(r.clean()) << ::testing::PrintToString(r.refused) << ::testing::PrintToString(r.errors);
  EXPECT_FALSE(fs::exists(state()));
  EXPECT_FALSE(fs::exists(profile()));
  EXPECT_TRUE(fs::exists(root_ + "/var/lib/pressured"));
  EXPECT_TRUE(fs::exists(seccomp() + "/profiles"));
  EXPECT_EQ(r.kept.size(), 2u) << ::testing::PrintToString(r.kept);
  // A marker that is not pressured's text does not make it pressured's either.
  put(root_ + "/var/lib/pressured/" + std::string(kernel::kMadeByPressuredName), "mine");
  uninstall_node_files(paths(), build_info::kSeccompProfile);
  EXPECT_TRUE(fs::exists(root_ + "/var/lib/pressured"));
}

// A .tmp beside the checkpoint that no crash of pressured's writer leaves
// (not the start of a checkpoint) is someone else's file.
TEST_F(Uninstall, ATemporaryThatIsNoPieceOfACheckpointOrProfileStays) {
  put(state() + ".tmp", "{\"someone\": \"else\"}\n");
  put(profile() + ".tmp", "{\"defaultAction\": \"SCMP_ACT_ALLOW\"}");
  const auto r = uninstall_node_files(paths(), build_info::kSeccompProfile);
  EXPECT_EQ(r.refused.size(), 2u) << ::testing::PrintToString(r.refused);
  EXPECT_TRUE(fs::exists(state() + ".tmp"));
  EXPECT_TRUE(fs::exists(profile() + ".tmp"));
}

// No link is followed in any component of the paths given, not only the last.
TEST_F(Uninstall, ALinkInAnyComponentIsNotFollowed) {
  fs::create_directories(root_ + "/elsewhere/profiles");
  put(root_ + "/elsewhere/state.json", checkpoint());
  put(root_ + "/elsewhere/profiles/pressured.json", std::string(build_info::kSeccompProfile));
  ASSERT_EQ(::symlink((root_ + "/elsewhere").c_str(), (root_ + "/link").c_str()), 0);
  const auto r = uninstall_node_files({root_ + "/link", root_ + "/link/state.json"}, build_info::kSeccompProfile);
  EXPECT_EQ(r.refused.size(), 2u) << ::testing::PrintToString(r.refused);
  EXPECT_TRUE(r.removed.empty()) << ::testing::PrintToString(r.removed);
  EXPECT_TRUE(fs::exists(root_ + "/elsewhere/state.json"));
  EXPECT_TRUE(fs::exists(root_ + "/elsewhere/profiles/pressured.json"));

  // profiles/ itself a link.
  fs::remove_all(seccomp() + "/profiles");
  ASSERT_EQ(::symlink((root_ + "/elsewhere/profiles").c_str(), (seccomp() + "/profiles").c_str()), 0);
  const auto p = uninstall_node_files({seccomp(), ""}, build_info::kSeccompProfile);
  EXPECT_EQ(p.refused.size(), 1u) << ::testing::PrintToString(p.refused);
  EXPECT_TRUE(fs::exists(root_ + "/elsewhere/profiles/pressured.json"));
}

// What no checkpoint is: larger than the daemon ever reads back, or nested
// past the JSON bound. Refused, and read without building a document.
TEST_F(Uninstall, ALargeOrDeepStateFileIsRefused) {
  const std::string big = R"({"boot_id": ")" + std::string(kMaxCheckpointBytes, 'x') +
                          R"(", "engine": {}, "policy": {}, "version": 3})";
  put(state(), big);
  auto r = uninstall_node_files({"", state()}, build_info::kSeccompProfile);
  EXPECT_EQ(r.refused.size(), 1u) << ::testing::PrintToString(r.refused);
  EXPECT_TRUE(fs::exists(state()));

  const std::string deep = R"({"boot_id": "b", "engine": {}, "policy": {}, "version": 3, "x": )" +
                           std::string(100, '[') + std::string(100, ']') + "}";
  put(state(), deep);
  r = uninstall_node_files({"", state()}, build_info::kSeccompProfile);
  EXPECT_EQ(r.refused.size(), 1u) << ::testing::PrintToString(r.refused);
  EXPECT_TRUE(fs::exists(state()));
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
  EXPECT_FALSE(looks_like_checkpoint(R"({"version": 1, "boot_id": "b", "engine": {}, "policy": {}} x)"));
}

TEST(LooksLikeCheckpoint, EveryPieceTheWriterCanLeaveIsItsTemporaryAndNothingElse) {
  Checkpoint cp;
  cp.boot_id = "4b1e0c1e-0000-4000-8000-000000000001";
  cp.policy.refused = {"uid-a", "uid-b"};
  const std::string text = encode_checkpoint(cp);
  for (std::size_t n = 0; n <= text.size(); ++n) {
    EXPECT_TRUE(looks_like_checkpoint_temporary(text.substr(0, n))) << n << ": " << text.substr(0, n);
  }
  for (const char* other : {"x", "[", "{\"a\"", "{\"version\": 3", "{\"boot_id\": 5",
                            "{\n \"boot_id\": \"b\"}x", "{\"boot_id\": \"b\", \"engine\": 7"}) {
    EXPECT_FALSE(looks_like_checkpoint_temporary(other)) << other;
  }
}

}  // namespace
}  // namespace pressured
