// `pressured install-seccomp --dir DIR`: writes the seccomp profile this
// binary was built with (deploy/seccomp/pressured.json, compiled in) to
// DIR/profiles/pressured.json, where the kubelet resolves the DaemonSet's
// `localhostProfile: profiles/pressured.json` (DIR is the kubelet's seccomp
// directory, <root-dir>/seccomp). The DaemonSet runs it in an init container
// of the same image: the profile on the node is always the one of the binary
// that runs under it, and nobody copies files onto nodes by hand. The image
// has no shell or cp, hence a subcommand. Exit 0 when the file holds the
// profile (written now or already there), 1 with the reason otherwise.
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "commands.hpp"
#include "kernel/fd.hpp"
#include "kernel/safe_file.hpp"
#include "pressured/seccomp_profile.hpp"

namespace pressured::cli {

namespace {
// Where the DaemonSet's `localhostProfile: profiles/pressured.json` points, under --dir.
constexpr const char* kProfileRelative = "profiles/pressured.json";
}  // namespace

Command add_install_seccomp(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("install-seccomp",
                             "Install pressured's seccomp profile into the kubelet's seccomp directory");
  auto dir = std::make_shared<std::string>();
  c.sub->add_option("--dir", *dir, "the kubelet's seccomp directory (<kubelet root-dir>/seccomp) as mounted here")
      ->required();
  c.run = [dir] {
    struct stat st {};
    if (::stat(dir->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "pressured install-seccomp: error: %s is not a directory (%s): mount the kubelet's "
                   "seccomp directory there\n", dir->c_str(), std::strerror(errno ? errno : ENOTDIR));
      return 1;
    }
    // --dir is the mount and is taken as given; below it nothing is followed
    // (kernel/safe_file.hpp): a link at profiles/, at the file or at its
    // temporary name is refused or removed, never written through, and a
    // FIFO at the file is refused without waiting on it.
    const std::string path = *dir + "/" + kProfileRelative;
    const std::string profile(build_info::kSeccompProfile);
    auto profiles = kernel::Fd::open(*dir, O_RDONLY | O_DIRECTORY);
    if (profiles) profiles = kernel::Fd::open_at(profiles->get(), *dir, "profiles", O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (profiles) {
      auto current = kernel::read_regular_file_at(profiles->get(), *dir + "/profiles", "pressured.json", 1 << 20);
      if (current && *current == profile) {
        std::fprintf(stderr, "pressured install-seccomp: %s is up to date (%zu bytes)\n", path.c_str(), profile.size());
        return 0;
      }
    }
    // The runtime reads the profile as root; readable by all like the kubelet's other files.
    if (auto r = kernel::replace_file(*dir, kProfileRelative, profile, {.mode = 0644, .dir_mode = 0755}); !r) {
      std::fprintf(stderr, "pressured install-seccomp: error: %s\n", r.error().message.c_str());
      return 1;
    }
    std::fprintf(stderr, "pressured install-seccomp: installed %s (%zu bytes)\n", path.c_str(), profile.size());
    return 0;
  };
  return c;
}

}  // namespace pressured::cli
