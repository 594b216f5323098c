// `pressured uninstall [--seccomp-dir DIR] [--state-file PATH] [--wait]`:
// removes from this node exactly the files pressured put there (the seccomp
// profile install-seccomp wrote, the checkpoint; daemon/uninstall.hpp has the
// rules). deploy/uninstall/ runs it on every node after `kubectl delete -k
// deploy/`: in an init container, the only one that mounts the node's two
// directories, so that its pod is Ready only once the node is clean; its main
// container runs `uninstall --wait` with no path: it touches nothing and
// waits until the operator deletes the uninstall DaemonSet (a DaemonSet's pod
// always restarts a container that ends; the image has no shell to sleep
// with). Exit 0 when nothing of pressured's is left, 1 naming what was
// refused or failed.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "daemon/uninstall.hpp"
#include "pressured/seccomp_profile.hpp"

namespace pressured::cli {

Command add_uninstall(CLI::App& app) {
  Command c;
  c.sub = app.add_subcommand("uninstall", "Remove the files pressured put on this node (seccomp profile, checkpoint)");
  auto paths = std::make_shared<UninstallPaths>();
  auto wait = std::make_shared<bool>(false);
  c.sub->add_option("--seccomp-dir", paths->seccomp_dir,
                    "the kubelet's seccomp directory as mounted here (what install-seccomp's --dir was)");
  c.sub->add_option("--state-file", paths->state_file, "daemon.stateFile as mounted here");
  c.sub->add_flag("--wait", *wait,
                  "once the node is clean, stay until SIGTERM; with no path, only wait (a DaemonSet's main container)");
  c.run = [paths, wait] {
    const bool nothing_to_do = paths->seccomp_dir.empty() && paths->state_file.empty();
    if (nothing_to_do && !*wait) {
      std::fprintf(stderr, "pressured uninstall: error: give --seccomp-dir, --state-file or both\n");
      return 1;
    }
    // PID 1 of a container gets no default action for SIGTERM: --wait waits
    // for it, blocked from the start so that one sent after the report below
    // is not lost.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (*wait) ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
    if (nothing_to_do) {
      std::fprintf(stderr, "pressured uninstall: no path given, nothing touched here (the init container removes the "
                           "files); waiting for SIGTERM\n");
      int sig = 0;
      ::sigwait(&set, &sig);
      return 0;
    }
    const UninstallReport r = uninstall_node_files(*paths, build_info::kSeccompProfile);
    for (const auto& p : r.removed) std::fprintf(stderr, "pressured uninstall: removed %s\n", p.c_str());
    for (const auto& p : r.refused) std::fprintf(stderr, "pressured uninstall: left %s\n", p.c_str());
    for (const auto& p : r.errors) std::fprintf(stderr, "pressured uninstall: error: %s\n", p.c_str());
    for (const auto& p : r.kept) std::fprintf(stderr, "pressured uninstall: kept %s\n", p.c_str());
    if (!r.clean()) {
      std::fprintf(stderr, "pressured uninstall: this node still holds what is named above: check each and remove it "
                           "by hand if it is pressured's (docs/operations.md, \"Uninstall\")\n");
      return 1;
    }
    std::fprintf(stderr, "pressured uninstall: nothing of pressured's left on this node%s\n",
                 r.removed.empty() ? " (nothing was there)" : "");
    if (!*wait) return 0;
    int sig = 0;
    ::sigwait(&set, &sig);
    return 0;
  };
  return c;
}

}  // namespace pressured::cli
