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
  std::vector<std::string> kept;     ///< "dir/: why": a directory left as it is, rightly (not pressured's to remove)
  bool clean() const { return refused.empty() && errors.empty(); }
};

/// Removes, each only when it is pressured's:
///  - <seccomp_dir>/profiles/pressured.json when it holds `profile` byte for
///    byte (what this binary's install-seccomp writes; another version's or an
///    edited profile is refused, named in the report);
///  - state_file when it is a pressured checkpoint (looks_like_checkpoint);
///  - <path>.tmp beside either when it is what a crash mid-write of
///    pressured's writer leaves: a piece of the profile from its start, or
///    looks_like_checkpoint_temporary;
///  - <seccomp_dir>/profiles and state_file's directory when pressured made
///    them (kernel/safe_file.hpp's marker is in them, which the writer puts
///    in each directory it makes) and nothing else is in them then; one the
///    kubelet, the operator or a volume made, or a mount point, stays (named
///    in `kept`).
/// No symbolic link is followed in any component of either path: a link is
/// refused and named. Non-regular files are never read or removed; files are
/// read only up to the size pressured writes (the profile's, 4 MiB for the
/// checkpoint), and parsed with bounded nesting into no document. A missing
/// file is not an error: running it twice is the same as once.
UninstallReport uninstall_node_files(const UninstallPaths& paths, std::string_view profile);

/// Whether `text` is a pressured checkpoint of any version (a JSON object with
/// its version, boot_id, engine and policy members, of the types pressured
/// writes; at most kMaxCheckpointBytes and 64 levels deep). Pure; memory does
/// not grow with the size of `text`.
bool looks_like_checkpoint(std::string_view text);

/// Whether `text` is what the checkpoint writer leaves at `<state>.tmp` when
/// it stops mid-write: empty, a whole checkpoint, or the start of one (an
/// object whose first member is boot_id, reading well up to where it ends). Pure.
bool looks_like_checkpoint_temporary(std::string_view text);

}  // namespace pressured
