#pragma once
// What `pressured uninstall` removes from a node: exactly the files pressured
// put there and nothing else. `kubectl delete -k` removes the API objects but
// not the seccomp profile the init container installed nor the checkpoint the
// daemon kept; the daemon never removes them itself (a SIGTERM is as often a
// rolling update or a node drain, after which the next pod resumes from the
// checkpoint and runs under the profile). The uninstall workload
// (deploy/uninstall/) runs this on every node after the DaemonSet is gone.

#include <string>
#include <string_view>
#include <vector>

namespace pressured {

/// Where pressured's files are, as seen by the uninstalling process (a
/// container sees the node's paths under its mounts). An empty path is skipped.
struct UninstallPaths {
  /// The kubelet's seccomp directory: `install-seccomp --dir` wrote
  /// <dir>/profiles/pressured.json.
  std::string seccomp_dir;
  /// daemon.stateFile: the checkpoint.
  std::string state_file;
};

/// What was done, path by path; clean() when nothing of pressured's is left.
struct UninstallReport {
  std::vector<std::string> removed;  ///< removed now
  std::vector<std::string> refused;  ///< "path: why": left, not recognisably pressured's
  std::vector<std::string> errors;   ///< "path: error": could not be removed
  bool clean() const { return refused.empty() && errors.empty(); }
};

/// Removes, each only when it is pressured's:
///  - <seccomp_dir>/profiles/pressured.json when it holds `profile` byte for
///    byte (what this binary's install-seccomp writes; another version's or an
///    edited profile is refused, named in the report);
///  - state_file when it is a pressured checkpoint (looks_like_checkpoint);
///  - <path>.tmp beside either (what a crash mid-write of pressured's atomic
///    writer leaves);
///  - <seccomp_dir>/profiles and state_file's directory when they are empty
///    then (install-seccomp and the DaemonSet's state volume made them; a
///    directory holding anything else, or a mount point, stays).
/// Symbolic links and non-regular files are never followed or removed. A
/// missing file is not an error: running it twice is the same as once.
UninstallReport uninstall_node_files(const UninstallPaths& paths, std::string_view profile);

/// Whether `text` is a pressured checkpoint of any version (a JSON object with
/// its version, boot_id, engine and policy members). Pure.
bool looks_like_checkpoint(std::string_view text);

}  // namespace pressured
