#include "config/psi_check.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "config/load.hpp"

namespace pressured {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/pressured-psi-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

Config config_with(const std::string& yaml) {
  auto c = parse_config_yaml(yaml);
  EXPECT_TRUE(c) << c.error().message;
  return c ? *c : Config{};
}

TEST(PsiCheck, AKernelWithoutPsiIsNamedWithWhatItLoses) {
  TempDir d;  // a node's /proc without pressure/ (psi=0)
  Config c = config_with("evictionHard:\n  memory.available: 100Mi\n  memory.pressure.full.avg10: 40\ncgroup:\n  procRoot: " +
                         d.path + "\n");
  PsiCheck p = check_psi(c);
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.message.find(d.path + "/pressure/memory"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("psi=0"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("memory.pressure.full.avg10 (hard)"), std::string::npos) << p.message;
  EXPECT_EQ(p.message.find("memory.available"), std::string::npos) << "not a PSI threshold: " << p.message;
}

TEST(PsiCheck, PsiPathIsWhereItIsLookedFor) {
  TempDir proc, psi;
  std::ofstream(psi.path + "/memory") << "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
  // procRoot has no pressure/, psiPath does: PSI is there.
  Config c = config_with("cgroup:\n  procRoot: " + proc.path + "\n  psiPath: " + psi.path + "\n");
  EXPECT_EQ(c.observe.psi_dir(), psi.path);
  EXPECT_TRUE(check_psi(c).available);
  EXPECT_TRUE(check_psi(c).message.empty());
  // Without psiPath the default is <procRoot>/pressure.
  Config d = config_with("cgroup:\n  procRoot: " + proc.path + "\n");
  EXPECT_EQ(d.observe.psi_dir(), proc.path + "/pressure");
  EXPECT_FALSE(check_psi(d).available);
}

TEST(PsiCheck, ARelativePsiPathIsRefused) {
  auto c = parse_config_yaml("cgroup:\n  psiPath: proc/pressure\n");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("cgroup.psiPath"), std::string::npos) << c.error().message;
}

}  // namespace
}  // namespace pressured
